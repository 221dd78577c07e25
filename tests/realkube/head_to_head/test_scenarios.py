"""The head-to-head harness (bench/head_to_head) observes what it reports: one test per scenario runs
it for the managers on the real control plane and checks each record against what the harness can
read independently afterwards: the pods the API server still has, the GPUs in the state file, the
Node's labels and cordon, and the managers' own logs. (Gated by this directory's conftest.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.head_to_head.binaries import gpu_host
from bench.head_to_head.main import make_managers, run_one
from bench.head_to_head.managers import Manager
from bench.head_to_head.node import NODE
from bench.head_to_head.run import RunContext, RunRecord
from bench.head_to_head.scenarios import TARGET, Settings
from migagent.sim.state import SimNodeState
from tests.realkube.control_plane import ControlPlane
from tests.realkube.deployment import Deployer

MANAGERS = ("migagent", "mig-manager", "mig-manager+drain")
BOTH = ("migagent", "mig-manager")
SETTINGS = Settings(settle_timeout_s=180.0)


@pytest.fixture(scope="module")
def managers(control_plane: ControlPlane, deployer: Deployer) -> dict[str, Manager]:
    made = {m.name: m for m in make_managers(gpu_host(), MANAGERS, deployer=deployer)}
    for manager in made.values():
        manager.install(control_plane)
    return made


def _run(plane: ControlPlane, manager: Manager, scenario: str, workdir: Path) -> RunRecord:
    return run_one(plane, manager, scenario, workdir=workdir, node=NODE, settings=SETTINGS)


def _observed(ctx: RunContext, record: RunRecord) -> None:
    """The record says what an independent look at the node, its pods and its GPUs shows now."""
    node = ctx.node.api.node(ctx.node.name)
    labels = node["metadata"]["labels"]
    assert record.final_state == labels.get("nvidia.com/mig.config.state")
    assert record.left_cordoned == bool(node["spec"].get("unschedulable"))
    paused = {k.removeprefix("nvidia.com/gpu.deploy.") for k, v in labels.items() if v == "paused-for-mig-change"}
    assert set(record.left_paused) == paused
    alive = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in ctx.node.api.pods(ctx.node.name)
        if not p["metadata"].get("deletionTimestamp")
    }
    for name, uid in ctx.workloads_before.items():
        if name in record.kept_running:
            assert alive.get(name) == uid, f"{name} reported kept running but is not"
        else:
            assert name in (*record.evicted, *record.deleted), f"{name} neither kept nor reported gone"
            assert alive.get(name) != uid, f"{name} reported gone but still runs"
    on_disk = SimNodeState.load(ctx.node.state_path)
    uuids = {ci.uuid for gpu in on_disk.gpus for gi in gpu.gpu_instances for ci in gi.compute_instances}
    assert {d.uuid for d in record.kept} <= uuids
    before = ctx.gpus_before
    assert before is not None
    assert record.destroyed == len(before.devices) - len(record.kept)
    old = {d.uuid for d in before.devices}
    changed = {d.gpu for d in before.devices if d.uuid not in uuids}
    changed |= {i for i, gpu in enumerate(on_disk.gpus) for gi in gpu.gpu_instances for ci in gi.compute_instances[:1]
                if ci.uuid not in old}  # fmt: skip
    assert set(record.gpus_touched) == changed
    if record.succeeded:
        advertised = {k: int(v) for k, v in node["status"]["allocatable"].items() if k.startswith("nvidia.com/mig-")}
        assert {k: v for k, v in advertised.items() if v} == ctx.expected(TARGET)
        assert labels["nvidia.com/mig.config"] == TARGET


def _both(
    control_plane: ControlPlane,
    managers: dict[str, Manager],
    scenario: str,
    tmp_path: Path,
    *,
    also: Callable[[RunContext, RunRecord], None] | None = None,
    names: tuple[str, ...] = BOTH,
) -> dict[str, tuple[RunRecord, str]]:
    """The scenario for each of `names`, checked by `_observed` (and `also`); each record with its manager's log."""
    results = {}
    for name in names:
        manager = managers[name]
        logs: list[str] = []

        def inspect(ctx: RunContext, record: RunRecord, logs: list[str] = logs, name: str = name) -> None:
            _observed(ctx, record)
            if also is not None:
                also(ctx, record)
            logs.append((ctx.workdir / "manager" / f"{name}.log").read_text(encoding="utf-8", errors="replace"))

        record = run_one(
            control_plane, manager, scenario, workdir=tmp_path / name, node=NODE, settings=SETTINGS,
            inspect=inspect,
        )  # fmt: skip
        results[name] = (record, logs[0])
    return results


def test_no_pods_both_reach_the_layout_on_gpus_0_to_3_and_migagent_keeps_the_instances_that_fit(
    control_plane: ControlPlane, managers: dict[str, Manager], tmp_path: Path
) -> None:
    results = _both(control_plane, managers, "no-pods", tmp_path)
    for name, (record, _) in results.items():
        assert record.succeeded, name
        assert record.gpus_touched == (0, 1, 2, 3), name
        assert record.advertised_s is not None, name
    assert len(results["migagent"][0].kept) == 28 + 4 * 2, "two 1g.10gb kept on each changed GPU"
    assert len(results["mig-manager"][0].kept) == 28, "each changed GPU rebuilt from empty"
    assert "Updating to MIG config: half-balanced" in results["mig-manager"][1]


def test_pods_migagent_evicts_only_the_pod_on_a_destroyed_instance_and_mig_manager_fails_in_use(
    control_plane: ControlPlane, managers: dict[str, Manager], tmp_path: Path
) -> None:
    results = _both(control_plane, managers, "pods", tmp_path, names=MANAGERS)
    ours, _ = results["migagent"]
    assert ours.succeeded
    assert ours.evicted == ("infer-gpu0-changed",)
    assert ours.kept_running == ("infer-gpu5-untouched", "train-gpu0-kept")
    theirs, log = results["mig-manager"]
    assert theirs.final_state == "failed"
    assert (theirs.evicted, theirs.deleted) == ((), ())
    assert len(theirs.kept_running) == 3
    assert "IN_USE" in log
    drained, _ = results["mig-manager+drain"]
    assert drained.succeeded
    assert drained.evicted == ("infer-gpu0-changed", "infer-gpu5-untouched", "train-gpu0-kept")
    assert (drained.cordon_episodes, drained.left_cordoned) == (1, False)


def test_pdb_for_a_while_migagent_evicts_only_once_the_budget_allows(
    control_plane: ControlPlane, managers: dict[str, Manager], tmp_path: Path
) -> None:
    def evicted_after_release(ctx: RunContext, record: RunRecord) -> None:
        for gone in ctx.node.recorder.gone(ctx.origin):
            if gone.name == "inference-0":
                assert gone.evicted
                assert gone.t >= SETTINGS.pdb_release_s, "evicted before the budget allowed it"

    results = _both(control_plane, managers, "pdb-for-a-while", tmp_path, also=evicted_after_release)
    assert results["migagent"][0].succeeded
    assert results["migagent"][0].evicted == ("inference-0",)
    assert results["mig-manager"][0].final_state == "failed"


def test_pdb_for_ever_both_fail_and_migagent_leaves_the_node_as_it_found_it(
    control_plane: ControlPlane, managers: dict[str, Manager], tmp_path: Path
) -> None:
    results = _both(control_plane, managers, "pdb-for-ever", tmp_path, names=MANAGERS)
    for name in BOTH:
        record, _ = results[name]
        assert record.final_state == "failed", name
        assert record.kept_running == ("inference-0",), name
    ours, _ = results["migagent"]
    assert (ours.left_cordoned, ours.left_paused, ours.gpus_touched) == (False, (), ())
    drained, _ = results["mig-manager+drain"]
    assert drained.notes["admin"].startswith("the admin gave up"), "the drain cannot pass a budget that never allows"
    assert (drained.final_state, drained.gpus_touched, drained.left_cordoned) == ("success", (), False)


def test_typo_then_fix_both_fail_the_typo_without_touching_a_gpu_and_apply_the_fix(
    control_plane: ControlPlane, managers: dict[str, Manager], tmp_path: Path
) -> None:
    results = _both(control_plane, managers, "typo-then-fix", tmp_path)
    for name, (record, _) in results.items():
        assert record.succeeded, name
        assert record.notes["typo"].startswith("state failed after"), name
        assert record.notes["typo"].endswith("GPUs untouched"), name


def test_killed_mid_change_both_finish_the_change_after_a_restart(
    control_plane: ControlPlane, managers: dict[str, Manager], tmp_path: Path
) -> None:
    results = _both(control_plane, managers, "killed-mid-change", tmp_path)
    for name, (record, _) in results.items():
        assert record.notes["killed"].startswith("at +"), f"{name} was not killed mid-change"
        assert record.succeeded, name
        assert record.gpus_touched == (0, 1, 2, 3), name


def test_three_fast_both_end_on_the_last_label(
    control_plane: ControlPlane, managers: dict[str, Manager], tmp_path: Path
) -> None:
    results = _both(control_plane, managers, "three-fast", tmp_path)
    for name, (record, _) in results.items():
        assert record.succeeded, name
        assert record.success_entries >= 1, name
