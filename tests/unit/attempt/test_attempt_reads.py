"""One attempt reads the layout file, NVML and the pods once, plans once, and the engine runs that plan."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pynvml
import pytest
import structlog

from migagent.attempt.phases import AgentPhase, PhaseOrder, PhaseOrderError
from migagent.attempt.reads import AttemptReads
from migagent.attempt.reconcile_node import NodeReconcile
from migagent.errors import InvalidLayoutError, TransientError
from migagent.layout.observed import Observation
from migagent.node.port import PodView
from migagent.nvml.driver import GpuDriver
from migagent.planning import plan
from migagent.reconcile.journal import desired_node_hash
from migagent.reconcile.machine import Planned
from migagent_sim.doubles.memory_node import MemoryNode


class CountingObserver:
    """The agent's NVML reader, counting each observation and how many Node writes preceded it."""

    def __init__(self, driver: GpuDriver, node: MemoryNode) -> None:
        self._driver = driver
        self._node = node
        self.writes_before: list[int] = []

    def observe(self) -> Observation:
        self.writes_before.append(len(self._node.kube.writes))
        return self._driver.observe()


@pytest.fixture
def node(tmp_path: Path) -> MemoryNode:
    return MemoryNode(tmp_path)


def test_a_change_observes_nvml_and_lists_the_pods_once_before_its_first_write(node: MemoryNode) -> None:
    node.set_label("all-balanced")
    observer = CountingObserver(node.driver, node)
    ports = replace(node.ports(), driver=observer)

    with structlog.testing.capture_logs() as logs:
        report = NodeReconcile(ports, node.settings, current_label=lambda: node.label).run()

    assert report.outcome.value == "applied"
    assert observer.writes_before.count(0) == 1, "NVML observed more than once before the first write"
    first_write = node.kube.calls.index(next(c for c in node.kube.calls if c.startswith(("patch", "set_", "emit"))))
    assert node.kube.calls[:first_write].count("list_pods_on_node") == 1
    events = [entry["event"] for entry in logs]
    assert "plan_reused" in events, "the engine planned again though the GPUs had not changed"
    assert "plan_computed" not in events


def test_a_held_attempt_whose_inputs_changed_reuses_the_digests_reads(node: MemoryNode) -> None:
    node.set_label("all-balanced")
    node.fake.sim_inject_fault("nvmlDeviceCreateGpuInstanceWithPlacement", pynvml.NVML_ERROR_UNKNOWN, times=None)
    failed = node.agent()
    assert failed.reconcile_once().value == "failed"
    assert failed.last_report is not None
    assert failed.last_report.hold is not None
    node.fake.sim_clear_faults()
    node.layout_file.write_text(node.layout_file.read_text() + "\n# edited\n", encoding="utf-8")  # lifts the hold
    observer = CountingObserver(node.driver, node)
    writes = len(node.kube.writes)

    hold = failed.last_report.hold
    ports = replace(node.ports(), driver=observer)
    report = NodeReconcile(ports, node.settings, current_label=lambda: node.label, hold=hold).run()

    assert report.outcome.value == "applied"
    assert observer.writes_before.count(writes) == 1, "the back-off's digest and the attempt observed twice"


def test_the_engine_plans_again_when_the_gpus_changed_since_the_plan(node: MemoryNode) -> None:
    observation = node.driver.observe()
    reads = AttemptReads("all-7g", config_file=node.layout_file, observe=lambda: observation, list_pods=list)
    desired = reads.desired()
    emptied = replace(observation.gpus[0], gpu_instances=())
    stale = Observation(gpus=(emptied, *observation.gpus[1:]))  # planned on GPUs that no longer look like this

    with structlog.testing.capture_logs() as logs:
        result = node.engine.apply(
            desired,
            layout_hash=desired_node_hash(desired),
            config_name="all-7g",
            planned=Planned(plan(stale, desired), stale),
        )

    assert result.converged, result.error
    assert [e["event"] for e in logs if e["event"].startswith("plan_")] == ["plan_computed"]


def test_reads_are_made_once_and_a_failed_read_is_tried_again(tmp_path: Path) -> None:
    layouts = tmp_path / "layouts.yaml"
    layouts.write_text("version: v1\nmig-configs:\n  disabled:\n    - devices: all\n      mig-enabled: false\n")
    observed: list[int] = []
    listed: list[int] = []

    def observe() -> Observation:
        observed.append(1)
        if len(observed) == 1:
            raise TransientError("NVML not ready")
        return Observation(gpus=())

    def list_pods() -> list[PodView]:
        listed.append(1)
        return []

    reads = AttemptReads("disabled", config_file=layouts, observe=observe, list_pods=list_pods)
    first = reads.layout_bytes
    layouts.write_text("changed")
    assert reads.layout_bytes == first, "the file was read again within one attempt"
    assert reads.layout().names == ("disabled",)
    with pytest.raises(TransientError):
        reads.observation()
    assert reads.observation() == reads.observation()
    assert reads.pods() == reads.pods() == ()
    assert (len(observed), len(listed)) == (2, 1)


def test_an_unreadable_layout_file_is_one_error_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    reads = AttemptReads("x", config_file=missing, observe=lambda: Observation(gpus=()), list_pods=list)
    assert reads.layout_bytes == b""
    with pytest.raises(InvalidLayoutError, match=r"absent\.yaml: cannot read layout file"):
        reads.layout()


def test_the_phase_order_is_enforced_as_the_attempt_runs() -> None:
    order = PhaseOrder()
    for phase in (AgentPhase.OBSERVE, AgentPhase.PLAN, AgentPhase.PLAN, AgentPhase.CORDON, AgentPhase.DRAIN):
        order.enter(phase)
    order.enter(AgentPhase.OBSERVE)  # a label superseded during the drain: observe and plan again
    with pytest.raises(PhaseOrderError, match="phase cordon cannot follow the start"):
        PhaseOrder().enter(AgentPhase.CORDON)
    drained = PhaseOrder()
    for phase in (AgentPhase.OBSERVE, AgentPhase.PLAN, AgentPhase.CORDON):
        drained.enter(phase)
    with pytest.raises(PhaseOrderError, match="phase plan cannot follow cordon"):
        drained.enter(AgentPhase.PLAN)
