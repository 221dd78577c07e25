"""Checks an attempt runs before it writes: the strategy on every reconcile, the sole owner before the
first write (an idle re-check that writes nothing lists no pods and no ResourceSlices).

1. Sole owner: another MIG manager active on the node (NVIDIA's mig-manager, a DRA driver with
   DynamicMIG) refuses the reconcile with `OtherMigOwner`, the owner named, nothing touched.
2. Strategy from the truth: with `--mig-strategy auto` the strategy comes from the GPU Operator's
   ClusterPolicy (`spec.mig.strategy`), else from what the device plugin advertises
   (`nvidia.com/mig-*` -> mixed; `nvidia.com/gpu` counting MIG devices -> single, counting GPUs ->
   none), else GPU Feature Discovery's `nvidia.com/mig.strategy` label. An explicit strategy the plugin's
   advertisement contradicts is refused with `StrategyMismatch` (no cordon, no restart): expecting
   the wrong resources would restart the plugin after every change and never see it converge.

Evidence only counts when it is there: a plugin that advertises nothing (paused, starting) says
nothing about its strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from migagent.attempt.advertise.sharing_source import SharingSource
from migagent.errors import PermanentError
from migagent.layout.observed import Observation
from migagent.layout.sharing import Advertised
from migagent.layout.strategy import MigStrategy
from migagent.node.names import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from migagent.node.owners import (
    MIG_MANAGER_LABEL,
    MIG_MANAGER_SELECTOR,
    dynamic_mig_devices,
    mig_manager_enabled,
    mig_manager_labelled,
    strategy_of_policy,
)
from migagent.node.port import KubePort, NodeView, PodView

log = structlog.get_logger(__name__)

GFD_STRATEGY_LABEL = "nvidia.com/mig.strategy"
PLAIN_GPU = Advertised(GPU_RESOURCE, 1)
JsonDict = dict[str, Any]


class OtherMigOwnerError(PermanentError):
    """Another MIG manager is active on this node; migagent refuses to touch it."""


class StrategyMismatchError(PermanentError):
    """The configured MIG strategy disagrees with what the device plugin advertises."""


class ClusterFacts(Protocol):
    """kube.owners.OwnerReads."""

    def resource_slices(self, driver: str = ...) -> list[JsonDict]: ...

    def cluster_policy(self) -> JsonDict | None: ...


@dataclass(frozen=True)
class Preflight:
    pods: KubePort
    facts: ClusterFacts | None = None
    """None: no cluster-wide reads (ResourceSlices, ClusterPolicy); the pod and label checks still run."""
    sharing: SharingSource | None = None
    """How `nvidia.com/gpu` is replicated, so its count proves a strategy only divided by its replicas
    (None: not replicated)."""

    def sole_owner(self, node: NodeView, *, pods: Sequence[PodView] | None = None) -> None:
        """OtherMigOwnerError naming the other MIG manager; run once before an attempt's first write.
        `pods`: the node's pods when the caller has listed them already (else listed by label here)."""
        policy = self._policy()
        owners: list[str] = []
        key, _, value = MIG_MANAGER_SELECTOR.partition("=")
        listed = (
            [p for p in pods if p.labels.get(key) == value]
            if pods is not None
            else self.pods.list_pods_on_node(label_selector=MIG_MANAGER_SELECTOR)
        )
        managers = [p for p in listed if not p.is_finished]
        owners += [f"NVIDIA mig-manager pod {pod.ref} ({MIG_MANAGER_SELECTOR}) runs on this node" for pod in managers]
        operator_deploys_it = policy is not None and mig_manager_enabled(policy) is not False
        if not managers and mig_manager_labelled(node.labels) and operator_deploys_it:
            owners.append(
                f"the GPU Operator deploys its mig-manager here ({MIG_MANAGER_LABEL}=true and the ClusterPolicy's"
                " migManager.enabled is not false)"
            )
        if self.facts is not None:
            dynamic = dynamic_mig_devices(self.facts.resource_slices())
            if dynamic:
                shown = ", ".join(dynamic[:3]) + (f" and {len(dynamic) - 3} more" if len(dynamic) > 3 else "")
                owners.append(
                    f"the NVIDIA DRA driver advertises MIG devices dynamically on this node (DynamicMIG: {shown})"
                )
        if owners:
            log.warning("other_mig_owner", owners=owners)
            raise OtherMigOwnerError(
                "another MIG manager is active on this node, so migagent changes nothing: "
                + "; ".join(owners)
                + ". Disable it for this node (ClusterPolicy migManager.enabled=false, or the DRA driver's"
                " DynamicMIG gate) or stop migagent here"
            )

    def _policy(self) -> JsonDict | None:
        return self.facts.cluster_policy() if self.facts is not None else None

    def _gpu_sharing(self, node: NodeView) -> Advertised | None:
        """How the plugin advertises nvidia.com/gpu, read only when that count is evidence (one request)."""
        if self.sharing is None or not _whole_gpus_advertised(node.allocatable):
            return PLAIN_GPU
        return self.sharing.view(node).advertised(GPU_RESOURCE)

    def strategy(
        self, node: NodeView, configured: MigStrategy, observe: Callable[[], Observation], *, auto: bool = False
    ) -> MigStrategy:
        """The MIG strategy this attempt expects (`auto`: learnt from the truth), or StrategyMismatchError.
        Reads nothing but the ClusterPolicy (when one is configured): it runs on every reconcile, idle
        ones included."""
        advertised = advertised_strategy(node.allocatable, observe, gpu=self._gpu_sharing(node))
        if auto:
            from_policy = strategy_of_policy(self._policy())
            chosen = from_policy or advertised or gfd_strategy(node.labels) or MigStrategy.MIXED
            source = "ClusterPolicy" if from_policy else "device plugin" if advertised else "default"
            if advertised is not None and chosen is not advertised:
                raise _mismatch(f"the ClusterPolicy says mig.strategy {chosen}", advertised)
            log.debug("mig_strategy_resolved", strategy=str(chosen), source=source)
            return chosen
        if advertised is not None and advertised is not configured:
            raise _mismatch(f"migagent runs with --mig-strategy {configured}", advertised)
        return configured


def _whole_gpus_advertised(allocatable: Mapping[str, int]) -> bool:
    """Only a node advertising whole GPUs and no MIG resource needs the sharing config to be read."""
    if any(name.startswith(MIG_RESOURCE_PREFIX) and count > 0 for name, count in allocatable.items()):
        return False
    return any(count > 0 for name, count in allocatable.items() if name.startswith(GPU_RESOURCE))


def _mismatch(ours: str, advertised: MigStrategy) -> StrategyMismatchError:
    return StrategyMismatchError(
        f"{ours} but the device plugin advertises as with mig.strategy {advertised}; nothing was cordoned or"
        f" restarted. Run migagent with --mig-strategy {advertised} (or auto), or change the plugin's strategy"
    )


def gfd_strategy(labels: Mapping[str, str]) -> MigStrategy | None:
    value = labels.get(GFD_STRATEGY_LABEL)
    if value is None:
        # GFD writes no nvidia.com/mig.strategy under `none`, its GPU labels all the same (found against
        # GFD v0.18.2 in tests/nvidia): those without that label mean `none`.
        return MigStrategy.NONE if f"{GPU_RESOURCE}.product" in labels else None
    try:
        return MigStrategy(value)
    except ValueError:
        return None


def advertised_strategy(
    allocatable: Mapping[str, int], observe: Callable[[], Observation], *, gpu: Advertised | None = PLAIN_GPU
) -> MigStrategy | None:
    """The strategy the plugin's advertisement proves, or None when it proves none. `gpu`: how the plugin
    advertises `nvidia.com/gpu` under its sharing config (None: unknown, so its count proves nothing);
    a replicated count is divided by its replicas first (found against NVIDIA's plugin: `none` with
    `nvidia.com/gpu` x4 on 2 GPUs advertises 8, the count of their 8 MIG devices under `single`)."""
    if any(name.startswith(MIG_RESOURCE_PREFIX) and count > 0 for name, count in allocatable.items()):
        return MigStrategy.MIXED
    gpus = _gpu_devices(allocatable, gpu)
    if gpus <= 0:
        return None
    observation = observe()
    mig_gpus = [gpu for gpu in observation.gpus if gpu.mig_current]
    if not any(gi.compute_instances for gpu in mig_gpus for gi in gpu.gpu_instances):
        return None  # MIG off (or no MIG devices): single, none and mixed all advertise whole GPUs
    whole = len(observation.gpus)
    devices = sum(len(gi.compute_instances) for gpu in mig_gpus for gi in gpu.gpu_instances) + (
        whole - len(mig_gpus)
    )
    if gpus == devices and gpus != whole:
        return MigStrategy.SINGLE
    if gpus == whole and gpus != devices:
        return MigStrategy.NONE
    return None


def _gpu_devices(allocatable: Mapping[str, int], gpu: Advertised | None) -> int:
    """The devices behind the advertised `nvidia.com/gpu` count (replicas divided out); 0: unknown."""
    if gpu is None or not gpu.exact:
        return 0
    advertised = allocatable.get(gpu.name, 0)
    return advertised // gpu.replicas if advertised > 0 and advertised % gpu.replicas == 0 else 0
