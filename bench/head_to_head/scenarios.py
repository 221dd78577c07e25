"""The scenarios, written once for both managers: each starts from the same node (8 H100s, seven
1g.10gb instances each, the layout `all-1g.10gb` reported `success`, the operands running, no GPU
pods) and changes the `nvidia.com/mig.config` label as an admin would.

The change is `half-balanced` unless a scenario says otherwise: GPUs 0-3 become 1g.10gb x2 + 2g.20gb +
3g.40gb, GPUs 4-7 stay as they are. On GPU 0 the 3g.40gb can only sit on slots 4-7, so the 1g.10gb on
slot 6 must go whatever a manager plans, while the one on slot 0 can stay.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.head_to_head.run import Outcome, RunContext
from bench.head_to_head.timeline import first_state
from tests.realkube.deployment import ensure_namespace, ensure_owner

TARGET = "half-balanced"
TYPO = "half-balancd"
APP = {"app": "inference"}


@dataclass(frozen=True)
class Settings:
    settle_timeout_s: float = 240.0
    """Of an idle machine: each wait stretches it by the load factor (`migagent_sim.deadline`)."""
    pdb_release_s: float = 10.0
    """How long the budget blocks in `pdb-for-a-while` before its peer becomes Ready elsewhere."""
    fast_gap_s: float = 0.5
    """Between the label writes of `three-fast`."""
    restart_delay_s: float = 1.0
    """From the kill to the manager's new process (a container restart)."""


def no_pods(ctx: RunContext, settings: Settings) -> Outcome:
    written = ctx.label(TARGET)
    ctx.settle(written, TARGET, timeout_s=settings.settle_timeout_s)
    return Outcome(TARGET, written)


def pods(ctx: RunContext, settings: Settings) -> Outcome:
    """Pods on a GI the change can keep (GPU 0 slot 0), on one it must destroy (GPU 0 slot 6), and on a
    GPU the change leaves alone (GPU 5)."""
    kubelet = ctx.node.kubelet
    kubelet.run_workload("ml", "train-gpu0-kept", mig_uuid=ctx.node.mig_uuid(0, 0), labels={"app": "train"})
    kubelet.run_workload("ml", "infer-gpu0-changed", mig_uuid=ctx.node.mig_uuid(0, 6), labels=APP)
    kubelet.run_workload("ml", "infer-gpu5-untouched", mig_uuid=ctx.node.mig_uuid(5, 0), labels=APP)
    ctx.baseline()
    written = ctx.label(TARGET)
    ctx.settle(written, TARGET, timeout_s=settings.settle_timeout_s)
    return Outcome(TARGET, written)


def _guarded_pod(ctx: RunContext, *, replicas: int) -> None:
    """inference-0 on GPU 0 slot 6 (a GI the change destroys), from a ReplicaSet of `replicas`."""
    ensure_namespace(ctx.node.plane, "ml")  # the scenario may be the first thing its control plane runs
    ensure_owner(ctx.node.plane, "ReplicaSet", "ml", "inference-0-owner", replicas=replicas)
    ctx.node.kubelet.run_workload("ml", "inference-0", mig_uuid=ctx.node.mig_uuid(0, 6), labels=APP)


def pdb_for_a_while(ctx: RunContext, settings: Settings) -> Outcome:
    """A budget (maxUnavailable 1) whose other replica is still starting: no disruption allowed until it
    is Ready elsewhere, `pdb_release_s` after the change began (a timer: the admin's drain may be running)."""
    api = ctx.node.api
    _guarded_pod(ctx, replicas=2)

    def peer(name: str, node_name: str | None) -> None:
        """Another replica of inference-0's ReplicaSet: unscheduled, or Running and Ready on `node_name`."""
        api.create_pod(
            node_name=node_name, namespace="ml", name=name, labels=APP, owner_kind="ReplicaSet",
            owner_name="inference-0-owner", replicas=2,
        )  # fmt: skip

    peer("inference-1", None)
    api.add_pdb("ml", "inference-pdb", match_labels=APP, max_unavailable=1)
    api.pdb_status("ml", "inference-pdb", allowed=0)
    ctx.baseline()

    def peer_ready() -> None:
        peer("inference-2", "elsewhere")
        ctx.node.recorder.mark("the budget's other replica is Ready elsewhere")

    release = threading.Timer(settings.pdb_release_s, peer_ready)
    release.start()
    try:
        written = ctx.label(TARGET)
        ctx.settle(written, TARGET, timeout_s=settings.settle_timeout_s)
    finally:
        release.cancel()
        release.join()
    return Outcome(TARGET, written, {"budget": f"allows one eviction from +{settings.pdb_release_s:g}s"})


def pdb_for_ever(ctx: RunContext, settings: Settings) -> Outcome:
    """A budget that never allows a disruption (maxUnavailable 0)."""
    _guarded_pod(ctx, replicas=1)
    ctx.node.api.add_pdb("ml", "inference-pdb", match_labels=APP, max_unavailable=0)
    ctx.node.api.pdb_status("ml", "inference-pdb", allowed=0)
    ctx.baseline()
    written = ctx.label(TARGET)
    ctx.settle(written, TARGET, timeout_s=settings.settle_timeout_s)
    return Outcome(TARGET, written, {"budget": "never allows"})


def typo_then_fix(ctx: RunContext, settings: Settings) -> Outcome:
    """A layout name the file lacks, then the right one once the typo has settled."""
    typo = ctx.label(TYPO)
    ctx.settle(typo, TYPO, timeout_s=settings.settle_timeout_s)
    samples = ctx.node.recorder.samples(ctx.origin)
    failed = first_state(samples, "failed", after=typo)
    touched = ctx.gpus_before is not None and ctx.node.gpus().devices != ctx.gpus_before.devices
    notes = {
        "typo": f"state {samples[-1].state}"
        + (f" after {failed - typo:.1f}s" if failed is not None else "")
        + ("; GPUs changed" if touched else "; GPUs untouched")
    }
    fixed = ctx.label(TARGET)
    ctx.settle(fixed, TARGET, timeout_s=settings.settle_timeout_s)
    return Outcome(TARGET, fixed, notes)


def killed_mid_change(ctx: RunContext, settings: Settings) -> Outcome:
    """The manager's process group is SIGKILLed at the first change the harness sees on the GPUs, and a
    new process starts `restart_delay_s` later."""
    before = ctx.node.gpus()
    written = ctx.label(TARGET)
    changing = ctx.wait_for(
        lambda: ctx.node.gpus().devices != before.devices, timeout_s=settings.settle_timeout_s, poll_s=0.01
    )
    notes = {}
    if changing:
        ctx.kill_manager()
        at_kill = ctx.node.gpus()
        left = ctx.node.recorder.latest()
        destroyed = len({d.uuid for d in before.devices} - {d.uuid for d in at_kill.devices})
        paused = sum(v == "paused-for-mig-change" for _, v in left.deploy) if left else 0
        notes["killed"] = (
            f"at +{ctx.now() - written:.1f}s, {destroyed} GIs destroyed; left: state {left.state if left else None},"
            f" {'cordoned' if left and left.cordoned else 'not cordoned'}, {paused} operands paused"
        )
        time.sleep(settings.restart_delay_s)
        ctx.start_manager()
    else:
        notes["killed"] = "never: the GPUs did not change"
    ctx.settle(written, TARGET, timeout_s=settings.settle_timeout_s)
    return Outcome(TARGET, written, notes)


def three_fast(ctx: RunContext, settings: Settings) -> Outcome:
    """all-balanced, all-3g.40gb, then half-balanced, `fast_gap_s` apart; timed from the last write."""
    first = ctx.label("all-balanced")
    time.sleep(settings.fast_gap_s)
    ctx.label("all-3g.40gb")
    time.sleep(settings.fast_gap_s)
    last = ctx.label(TARGET)
    ctx.settle(last, TARGET, timeout_s=settings.settle_timeout_s)
    return Outcome(TARGET, last, {"first write": f"{last - first:.1f}s before the last"})


Scenario = Callable[[RunContext, Settings], Outcome]
SCENARIOS: dict[str, Scenario] = {
    "no-pods": no_pods,
    "pods": pods,
    "pdb-for-a-while": pdb_for_a_while,
    "pdb-for-ever": pdb_for_ever,
    "typo-then-fix": typo_then_fix,
    "killed-mid-change": killed_mid_change,
    "three-fast": three_fast,
}
DESCRIPTIONS = {
    "no-pods": "all-1g.10gb -> half-balanced, no GPU pods",
    "pods": "the same change with pods on a kept GI, a changed GI and an untouched GPU",
    "pdb-for-a-while": "a pod on a changed GI under a PDB that allows its eviction 10 s after the label",
    "pdb-for-ever": "a pod on a changed GI under a PDB that never allows",
    "typo-then-fix": "label half-balancd (no such layout), then half-balanced",
    "killed-mid-change": "the manager SIGKILLed at its first GPU change, restarted 1 s later",
    "three-fast": "all-balanced, all-3g.40gb, half-balanced written 0.5 s apart",
}
