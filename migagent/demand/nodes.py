"""A GPU node as the advice sees it: its labels and taints, what its agent reported, whether it may be
changed now, which MIG strategy its device plugin runs, and what it can offer pending pods.

A node is changed only when its agent has reported its GPUs (`migagent.io/observed`) and has settled:
state `success` for the layout its label names (no change under way, no failure being retried), not
cordoned. The strategy is read from what the node advertises: `nvidia.com/mig-*` resources mean
`mixed`; MIG devices advertised as as many `nvidia.com/gpu` mean `single`; one `nvidia.com/gpu` per
GPU despite MIG devices means `none` (the plugin ignores MIG: no layout changes what it offers).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from migagent.layout.strategy import MigStrategy
from migagent.node.names import GPU_RESOURCE, MIG_RESOURCE_PREFIX, OBSERVED_ANNOTATION
from migagent.node.port import NodeView
from migagent.node.scheduling import DemandNode, DemandPod
from migagent.rollout.reported import ReportedNode, UnreadableReportError, read_report
from migagent.rollout.reports import AgentAnswer, answer


def read_reported(node: DemandNode) -> tuple[ReportedNode | None, str]:
    """The agent's report, or why the node may not be changed (one phrase)."""
    try:
        reported = read_report(node.view.annotations.get(OBSERVED_ANNOTATION))
    except UnreadableReportError as error:
        return None, f"its agent has not reported: {error}"
    if node.view.unschedulable:
        return reported, "cordoned"
    if node.layout is not None and answer(node.view, node.layout) is not AgentAnswer.SUCCESS:
        return reported, f"its agent has not settled on {node.layout} (a change is under way or failed)"
    return reported, ""


def mig_devices(reported: ReportedNode) -> int:
    return sum(len(gi.compute_instances) for gpu in reported.observation.gpus if gpu.mig_current
               for gi in gpu.gpu_instances)


def infer_strategy(node: NodeView, reported: ReportedNode | None) -> MigStrategy:
    """The device plugin's strategy, from what the node advertises (see the module's docstring)."""
    if any(name.startswith(MIG_RESOURCE_PREFIX) and count > 0 for name, count in node.allocatable.items()):
        return MigStrategy.MIXED
    devices = mig_devices(reported) if reported is not None else 0
    gpus = node.allocatable.get(GPU_RESOURCE, 0)
    if devices and gpus == devices:
        return MigStrategy.SINGLE
    if devices and reported is not None and gpus == len(reported.observation.gpus):
        return MigStrategy.NONE
    return MigStrategy.MIXED


def under_strategy(mixed: Mapping[str, int], strategy: MigStrategy) -> tuple[dict[str, int], str]:
    """What a plugin run with `strategy` advertises, from the mixed-strategy counts; or why it would
    refuse the layout (single: one MIG profile on the whole node, no GPU with MIG off beside them)."""
    if strategy is not MigStrategy.SINGLE:
        return dict(mixed), ""
    profiles = {name: count for name, count in mixed.items() if name.startswith(MIG_RESOURCE_PREFIX) and count}
    if len(profiles) > 1:
        return {}, f"the single strategy needs one MIG profile on the node, the layout has {', '.join(profiles)}"
    if profiles and mixed.get(GPU_RESOURCE, 0):
        return {}, "the single strategy needs MIG on every GPU of the node"
    return ({GPU_RESOURCE: sum(profiles.values())} if profiles else dict(mixed)), ""


def used(pods: Iterable[DemandPod]) -> Counter[str]:
    total: Counter[str] = Counter()
    for pod in pods:
        total.update(pod.requests)
    return total


def free(capacity: Mapping[str, int], pods: Iterable[DemandPod]) -> dict[str, int]:
    """Units of each resource no bound pod requests (never below 0)."""
    taken = used(pods)
    return {name: max(0, count - taken.get(name, 0)) for name, count in capacity.items()}
