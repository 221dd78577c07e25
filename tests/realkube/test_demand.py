"""The autopilot on the real control plane, with kube-scheduler deciding where every pod runs.

A pool of three simulated nodes (2x H100, all-1g.10gb; the first two labelled for the autopilot), their
agents under the gpu-operator overlay, the autopilot as its own service account under
deploy/components/autopilot. Pods are created unbound; kube-scheduler places them (the simulated kubelet
then starts them on a device of the kind they ask): that a waiting pod runs after a change is the
scheduler's own decision, read from the pod's binding and its `Scheduled` event.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from migagent.autopilot.controller import Autopilot, load, save
from migagent.autopilot.decide import Guardrails
from migagent.autopilot.state import Verdict
from migagent.clock import SystemClock
from migagent.node.names import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from migagent_sim.deadline import Deadline
from tests.integration.rollout.support import Recorder
from tests.realkube.control_plane import ControlPlane
from tests.realkube.deployment import Deployer
from tests.realkube.pool import RealPool

ONE_G = "nvidia.com/mig-1g.10gb"
THREE_G = "nvidia.com/mig-3g.40gb"
SEVEN_G = "nvidia.com/mig-7g.80gb"
HOST = "kubernetes.io/hostname"
CLOCK = SystemClock()


@pytest.fixture(scope="session")
def scheduler(control_plane: ControlPlane) -> ControlPlane:
    control_plane.start_scheduler()
    return control_plane


def _started(plane: ControlPlane, deployer: Deployer, workdir: Path, opted_in: tuple[int, ...]) -> Iterator[RealPool]:
    started = RealPool(plane, deployer, workdir, opted_in=opted_in).start()
    try:
        eventually(lambda: all(started.labels(n).get(MIG_CONFIG_STATE_LABEL) == "success" for n in started.names),
                   "every agent reports success")
        yield started
    finally:
        started.stop()


@pytest.fixture
def pool(scheduler: ControlPlane, deployer: Deployer, tmp_path: Path) -> Iterator[RealPool]:
    """The pool with its first two nodes opted in."""
    yield from _started(scheduler, deployer, tmp_path / "pool", (0, 1))


def eventually(check: Callable[[], bool], what: str, timeout_s: float = 90.0, pool: RealPool | None = None) -> None:
    deadline = Deadline(timeout_s)
    while not deadline.passed():
        if check():
            return
        time.sleep(0.2)
    history = [d.to_json() for d in load(pool.demand_api()).history] if pool is not None else []
    raise AssertionError(f"not within {timeout_s:g}s: {what}; the autopilot's history: {history}")


def fill(pool: RealPool, node: str, prefix: str, **pod: object) -> list[str]:
    """Every 1g.10gb device of `node` held by a pod the scheduler placed there (nodeSelector hostname)."""
    pods = [pool.submit(f"{prefix}-{i}", ONE_G, node_selector={HOST: node}, **pod) for i in range(14)]  # type: ignore[arg-type]
    eventually(lambda: len(pool.running(pods)) == len(pods), f"{prefix} pods run on {node}")
    return pods


class Running:
    """The autopilot stepping every 0.2 s in a thread, as its service account."""

    def __init__(self, pool: RealPool, guardrails: Guardrails) -> None:
        self.autopilot = Autopilot(pool.demand_api(pool.autopilot_identity()), guardrails, clock=CLOCK,
                                   listener=Recorder())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.errors: list[BaseException] = []

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.autopilot.step()
            except Exception as error:  # a refused call would show here: the test asserts there is none
                self.errors.append(error)
            CLOCK.wait(self._stop, 0.2)

    def __enter__(self) -> Running:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30.0)


def layouts(pool: RealPool) -> dict[str, str | None]:
    return {name: pool.labels(name).get(MIG_CONFIG_LABEL) for name in pool.names}


def scheduled_by_the_scheduler(pool: RealPool, pod: str) -> str:
    """The node named by the `Scheduled` Event kube-scheduler recorded for `pod`."""
    namespace, name = pod.split("/")
    events = pool.admin.get(f"/api/v1/namespaces/{namespace}/events",
                            fieldSelector=f"involvedObject.name={name},reason=Scheduled")["items"]
    (event,) = events
    assert event.get("reportingComponent") == "default-scheduler" or event["source"]["component"] == "default-scheduler"
    return str(event["message"]).rsplit(" to ", 1)[1]


def test_a_waiting_pod_runs_where_kube_scheduler_puts_it_once_the_autopilot_changed_an_idle_node(
    pool: RealPool,
) -> None:
    full, idle, not_opted = pool.names
    fill(pool, full, "small")
    waiting = [pool.submit(f"train-{i}", THREE_G) for i in range(2)]
    time.sleep(2.0)
    assert pool.running(waiting) == {}  # no node offers a 3g.40gb: the scheduler leaves them pending
    before = layouts(pool)
    with Running(pool, Guardrails(persist_s=1.0)) as running:
        eventually(lambda: len(pool.running(waiting)) == 2, "the waiting pods run")
        eventually(lambda: load(pool.demand_api()).rollout is None, "the rollout is recorded done")
    assert running.errors == []
    after = layouts(pool)
    assert [name for name in pool.names if after[name] != before[name]] == [idle]
    assert set(pool.running(waiting).values()) == {idle}
    assert {scheduled_by_the_scheduler(pool, pod) for pod in waiting} == {idle}
    assert [d.verdict for d in load(pool.demand_api()).history] == [Verdict.CHANGED, Verdict.ROLLOUT_DONE]
    events = pool.admin.get("/api/v1/namespaces/default/events", fieldSelector=f"involvedObject.name={idle}")
    assert "MigAutopilotChanged" in {e["reason"] for e in events["items"]}
    assert not_opted not in {e["involvedObject"]["name"] for e in events["items"]}


def test_no_pod_is_evicted_for_a_pod_of_lower_or_equal_priority(pool: RealPool) -> None:
    for name, value in (("demand-high", 1000), ("demand-mid", 100), ("demand-low", 0)):
        pool.priority_class(name, value)
    high_node, low_node, _ = pool.names
    high = fill(pool, high_node, "high", priority_class="demand-high")
    low = fill(pool, low_node, "low", priority_class="demand-low")
    equal = pool.submit("equal-0", THREE_G, priority_class="demand-low")
    mid = pool.submit("mid-0", THREE_G, priority_class="demand-mid")
    with Running(pool, Guardrails(persist_s=1.0)) as running:
        eventually(lambda: pool.running([mid]) != {}, "the mid-priority pod runs", pool=pool)
        eventually(lambda: load(pool.demand_api()).rollout is None, "the rollout is recorded done")
    assert running.errors == []
    assert pool.running([mid]) == {mid: low_node}
    assert len(pool.running(high)) == len(high)  # not one higher-priority pod went
    gone = [pod for pod in low if pool.pod(pod) is None]
    assert gone  # the change reclaimed low-priority capacity for the mid-priority pod
    assert layouts(pool)[high_node] == "all-1g.10gb"
    # The change, whatever came before it: a look between the two submissions (a loaded machine) finds
    # only the equal-priority pod waiting and records that nothing may serve it.
    (changed,) = [d for d in load(pool.demand_api()).history if d.verdict is Verdict.CHANGED]
    assert equal not in changed.nodes[low_node]["serves"]  # it gains nothing from evicting its equals


def test_a_pod_disruption_budget_is_never_drawn_below_what_it_allows(pool: RealPool) -> None:
    pool.priority_class("demand-mid", 100)
    first, second, _ = pool.names
    batch = [*fill(pool, first, "batch-a", labels={"app": "batch"}),
             *fill(pool, second, "batch-b", labels={"app": "batch"})]
    api = pool.apis[first]
    api.add_pdb("ml", "batch", match_labels={"app": "batch"}, max_unavailable=0)
    mid = pool.submit("mid-0", THREE_G, priority_class="demand-mid")
    with Running(pool, Guardrails(persist_s=1.0)) as running:
        eventually(lambda: bool(load(pool.demand_api()).history), "a decision", pool=pool)
    assert running.errors == []
    (closed,) = load(pool.demand_api()).history
    assert closed.verdict is Verdict.NO_CHANGE
    assert any("PodDisruptionBudget ml/batch allows 0 disruption(s)" in reason for reason in closed.reasons)
    assert all(pool.pod(pod) is not None for pod in batch)
    pool.admin.patch("/apis/policy/v1/namespaces/ml/poddisruptionbudgets/batch", {"spec": {"maxUnavailable": 10}})
    api.pdb_status("ml", "batch", allowed=10)
    healthy: list[tuple[int, int]] = []

    def sampled() -> bool:
        status = api.pdb_status("ml", "batch")
        healthy.append((status.get("currentHealthy", 0), status.get("desiredHealthy", 0)))
        return bool(pool.running([mid]))

    with Running(pool, Guardrails(persist_s=1.0)) as running:
        eventually(sampled, "the mid-priority pod runs", pool=pool)
    assert running.errors == []
    assert all(current >= desired for current, desired in healthy), healthy
    changed = next(d for d in load(pool.demand_api()).history if d.verdict is Verdict.CHANGED)
    (evicting,) = [node["evicts"] for node in changed.nodes.values()]
    assert 0 < len(evicting) <= 10


def test_the_guardrails_hold_a_fast_alternating_demand_and_the_pause_change_nothing(pool: RealPool) -> None:
    # Demand must persist 20 s, the pods live about 1.5 s: on a loaded machine a submission and its deletion
    # can take seconds each, and 4 s was once outlived.
    guardrails = Guardrails(persist_s=20.0)
    with Running(pool, guardrails) as running:
        for round_ in range(6):  # every 1.5 s the wanted profile flips; what is not served is withdrawn
            resource = THREE_G if round_ % 2 == 0 else SEVEN_G
            pods = [pool.submit(f"flip-{round_}-{i}", resource) for i in range(2)]
            time.sleep(1.5)
            for pod in pods:
                pool.admin.delete(f"/api/v1/namespaces/ml/pods/{pod.split('/')[1]}", {"gracePeriodSeconds": 0})
        time.sleep(2.0)
    assert running.errors == []
    assert layouts(pool) == dict.fromkeys(pool.names, "all-1g.10gb")
    assert load(pool.demand_api()).history == ()
    api = pool.demand_api()
    save(api, load(api).__class__(paused=True, resource_version=load(api).resource_version))
    waiting = pool.submit("train-0", THREE_G)
    with Running(pool, guardrails) as running:
        eventually(lambda: bool(load(pool.demand_api()).history), "a decision")
        time.sleep(2.0)
    assert running.errors == []
    (held,) = load(pool.demand_api()).history
    assert (held.verdict, held.reasons) == (Verdict.HELD, ("paused (migagent autopilot resume)",))
    assert layouts(pool) == dict.fromkeys(pool.names, "all-1g.10gb")
    assert pool.running([waiting]) == {}


@pytest.fixture
def open_pool(scheduler: ControlPlane, deployer: Deployer, tmp_path: Path) -> Iterator[RealPool]:
    """The pool with every node opted in."""
    yield from _started(scheduler, deployer, tmp_path / "pool", (0, 1, 2))


def test_at_most_the_hourly_number_of_changes_and_the_rest_is_held_with_its_reason(open_pool: RealPool) -> None:
    pool = open_pool
    full, *idle = pool.names
    fill(pool, full, "small")
    waiting = [pool.submit(f"train-{i}", THREE_G) for i in range(6)]  # one idle node serves four at most
    with Running(pool, Guardrails(persist_s=1.0, max_changes_per_hour=1)) as running:
        eventually(lambda: any(d.verdict is Verdict.HELD for d in load(pool.demand_api()).history),
                   "the next change is held", pool=pool)
        eventually(lambda: bool(pool.running(waiting)), "the pods the one change serves run", pool=pool)
    assert running.errors == []
    after = layouts(pool)
    assert sorted(name for name in idle if after[name] != "all-1g.10gb") == sorted(set(pool.running(waiting).values()))
    assert sum(1 for name in idle if after[name] != "all-1g.10gb") == 1
    held = next(d for d in load(pool.demand_api()).history if d.verdict is Verdict.HELD)
    assert any("made 1 change(s) in the last hour (--max-changes-per-hour 1)" in r for r in held.reasons), held
