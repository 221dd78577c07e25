"""Chaos suite: `python -m bench.chaos [--quick] [--scale 60] [--seed 14]`.

The production agent (its real wiring, loop, Lease and state lock) on the simulator, with every
production timing divided by `--scale` (60: one simulated hour is one real minute; a 300 s drain
timeout lasts 5 s, the 30 s first retry 0.5 s). Figures, not assertions (bench/README.md):
1. persistent failures, each for a simulated hour (`--quick`: ten minutes): a PDB that blocks "for
   now" for ever, two PDBs on one pod, minAvailable 50% of a single pod, a strategy mismatch, a host
   process on a GI to destroy, a 403 on every status write. Per scenario: cordon episodes, share of
   the time the node was cordoned or its GPU Operator operands paused, evictions against the plan,
   and attempts against what the back-off schedule allows (and how many started early);
2. two agents started together on one node: which changed the GPUs;
3. the agent killed (nothing undone, as by SIGKILL) at random instants of a change: a random phase or
   a random NVML mutation; a restarted agent must converge with no pod evicted twice;
4. the label flipped to a typo (or removed) as each phase starts: are the GPUs left consistent (every
   GPU instance with its compute instances), is the node left cordoned, does fixing the label converge.
"""

from __future__ import annotations

import argparse
import logging
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.chaos_metrics import AttemptLog, NodeTimeline, check_backoff, evicted_pods, evictions
from bench.tables import Cell, percent, render_table
from migagent.attempt.advertise.expectation import advertisement_matches
from migagent.attempt.advertise.expected import expected_resources
from migagent.attempt.listener import AgentPhase, Outcome
from migagent.catalog import Placement
from migagent.layout.strategy import MigStrategy
from migagent.nvml.driver import GpuDriver
from migagent.nvml.mode import ModeActivation
from migagent.plumbing.logging import configure_logging
from migagent.reconcile.ports import NodeDriver
from migagent.reconcile.retry import RetryPolicy
from migagent.sim.reset import SimResetRunner
from migagent.sources.node_label import WatchSettings
from migagent.wiring import AgentOptions
from migagent_sim.cluster import PDB_BLOCKING_FOR_NOW, SimCluster, SimClusterConfig
from migagent_sim.deadline import wait_until
from migagent_sim.fakelib.backend import nvml_for

NODE = SimClusterConfig(spec="2xH100-80GB-SXM", start_layout="all-1g.10gb")
TARGET = "all-balanced"
"""From all-1g.10gb it destroys the 1g.10gb GPU instances at slots 4, 5 and 6 of each GPU."""
EXPECTED = {"all-1g.10gb": {"nvidia.com/mig-1g.10gb": 14}, TARGET: {
    "nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 2, "nvidia.com/mig-3g.40gb": 2}}
PRODUCTION_RETRY = RetryPolicy(failure_backoff_initial=30.0, failure_backoff_max=1800.0)
KILLABLE = tuple(phase for phase in AgentPhase if phase is not AgentPhase.UNDO)


class Killed(BaseException):
    """The agent process dies here: a BaseException, so nothing in the agent undoes anything."""


def scaled_options(cluster: SimCluster, scale: float) -> AgentOptions:
    """The agent's production defaults, every timing divided by `scale` (never below simulator speed)."""

    def s(seconds: float) -> float:
        return max(0.05, seconds / scale)

    base = cluster.options()
    settings = replace(
        base.settings,
        drain_timeout_s=s(300), readvertise_timeout_s=s(300), readvertise_poll_s=s(2), plugin_settle_s=s(60),
        resync_period_s=s(300), heartbeat_s=s(30),
        retry=RetryPolicy(
            failure_backoff_initial=s(PRODUCTION_RETRY.failure_backoff_initial),
            failure_backoff_max=s(PRODUCTION_RETRY.failure_backoff_max),
        ),
    )
    return replace(
        base, settings=settings, plugin_timeout_s=s(300), poll_interval_s=s(1),
        lease_duration_s=max(1, round(30 / scale)), request_timeout_s=max(2.0, 30 / scale),
        watch=WatchSettings(resync_period_s=s(300), watch_timeout_s=s(300), backoff_initial_s=s(0.5),
                            backoff_max_s=s(30), request_timeout_s=max(2.0, 30 / scale)),
    )


# -- 1. persistent failures --------------------------------------------------------------------------


@dataclass(frozen=True)
class Persistent:
    name: str
    setup: Callable[[SimCluster], None]
    target: str | None = TARGET
    """The label the scenario sets (None: the node already holds its layout)."""
    planned_evictions: int = 1
    config: SimClusterConfig = NODE
    strategy: MigStrategy | None = None
    """The agent's --mig-strategy when it differs from the plugin's."""


def _guarded_pod(cluster: SimCluster, *, labels: dict[str, str]) -> None:
    cluster.kubelet.run_workload("ml", "guarded", mig_uuid=cluster.mig_uuid(0, 6), labels=labels)


def _pdb_for_now(cluster: SimCluster) -> None:
    _guarded_pod(cluster, labels={"app": "web"})
    cluster.api.add_pdb("ml", "web", match_labels={"app": "web"}, disruptions_allowed=0)
    cluster.api.set_pdb_status("ml", "web", PDB_BLOCKING_FOR_NOW)


def _two_pdbs(cluster: SimCluster) -> None:
    _guarded_pod(cluster, labels={"app": "web", "tier": "x"})
    cluster.api.add_pdb("ml", "by-app", match_labels={"app": "web"}, disruptions_allowed=1)
    cluster.api.add_pdb("ml", "by-tier", match_labels={"tier": "x"}, disruptions_allowed=1)


def _half_of_one(cluster: SimCluster) -> None:
    _guarded_pod(cluster, labels={"app": "solo"})
    cluster.api.add_pdb("ml", "half", match_labels={"app": "solo"}, disruptions_allowed=0)
    cluster.api.update_pdb("ml", "half", lambda pdb: pdb["spec"].__setitem__("minAvailable", "50%"))
    cluster.api.set_pdb_status("ml", "half", {**PDB_BLOCKING_FOR_NOW, "expectedPods": 1})


def _host_process(cluster: SimCluster) -> None:
    cluster.fake.sim_attach_process(cluster.mig_uuid(0, 6), pid=4242, used_memory_bytes=1 << 20)


def _status_forbidden(cluster: SimCluster) -> None:
    cluster.api.inject_fault("PATCH", r"/api/v1/nodes/[^/]+/status", 403, times=10**9)


PERSISTENT = (
    Persistent("pdb-blocks-for-now", _pdb_for_now),
    Persistent("two-pdbs-one-pod", _two_pdbs),
    Persistent("minavailable-50%-of-1", _half_of_one),
    Persistent("strategy-mismatch", lambda cluster: None, target=None, planned_evictions=0,
               config=replace(NODE, mig_strategy=MigStrategy.SINGLE), strategy=MigStrategy.MIXED),
    Persistent("host-process-on-gi", _host_process, planned_evictions=0),
    Persistent("status-write-403", _status_forbidden, target=None, planned_evictions=0),
)


@dataclass(frozen=True)
class PersistentResult:
    name: str
    cordons: int
    share_disturbed: float
    evictions: Counter[str]
    planned_evictions: int
    attempts: int
    allowed: int
    early: int

    def row(self) -> list[Cell]:
        return [
            self.name, self.cordons, percent(self.share_disturbed), f"{self.evictions['201']}/{self.planned_evictions}",
            sum(self.evictions.values()), f"{self.attempts}/{self.allowed}", self.early,
        ]


def run_persistent(workdir: Path, scenario: Persistent, *, scale: float, window_s: float) -> PersistentResult:
    with SimCluster(workdir, scenario.config) as cluster:
        scenario.setup(cluster)
        options = scaled_options(cluster, scale)
        if scenario.strategy is not None:
            options = replace(options, settings=replace(options.settings, mig_strategy=scenario.strategy))
        timeline, log = NodeTimeline(cluster), AttemptLog()
        running = cluster.start_agent(options, listener=log)
        if scenario.target is not None:
            cluster.label(scenario.target)
        time.sleep(window_s)
        ended = time.monotonic()
        running.stop(timeout_s=max(5.0, 3 * options.settings.drain_timeout_s))
        backoff = check_backoff(log, options.settings.retry, window_s=window_s)
        return PersistentResult(
            scenario.name, timeline.cordon_episodes(), timeline.share_disturbed(ended), evictions(cluster),
            scenario.planned_evictions, backoff.attempts, backoff.allowed, backoff.early,
        )


# -- 2. two agents ------------------------------------------------------------------------------------


class CountingDriver(GpuDriver):
    """A GPU driver that counts its mutating calls and can die (Killed) after the `kill_after`-th one."""

    def __init__(
        self,
        cluster: SimCluster,
        *,
        kill_after: int | None = None,
        on_mutation: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(nvml_for(cluster.fake), reset_runner=SimResetRunner(cluster.fake))
        self.mutations = 0
        self._kill_after = kill_after
        self._on_mutation = on_mutation

    def _count(self) -> None:
        self.mutations += 1
        if self._on_mutation is not None:
            self._on_mutation(self.mutations)
        if self._kill_after is not None and self.mutations >= self._kill_after:
            raise Killed(f"killed after NVML mutation {self.mutations}")

    def set_mig_mode(self, gpu: int, *, enabled: bool) -> ModeActivation:
        result = super().set_mig_mode(gpu, enabled=enabled)
        self._count()
        return result

    def reset_gpu(self, gpu: int) -> None:
        super().reset_gpu(gpu)
        self._count()

    def create_gpu_instance(self, gpu: int, *, profile_id: int, placement: Placement) -> int:
        result = super().create_gpu_instance(gpu, profile_id=profile_id, placement=placement)
        self._count()
        return result

    def create_compute_instance(
        self, gpu: int, *, gi_id: int, profile_id: int, placement: Placement | None = None
    ) -> int:
        result = super().create_compute_instance(gpu, gi_id=gi_id, profile_id=profile_id, placement=placement)
        self._count()
        return result

    def destroy_compute_instance(self, gpu: int, *, gi_id: int, ci_id: int) -> None:
        super().destroy_compute_instance(gpu, gi_id=gi_id, ci_id=ci_id)
        self._count()

    def destroy_gpu_instance(self, gpu: int, *, gi_id: int) -> None:
        super().destroy_gpu_instance(gpu, gi_id=gi_id)
        self._count()


def _opened(driver: CountingDriver) -> CountingDriver:
    driver.__enter__()
    return driver


def _always(driver: CountingDriver) -> Callable[[GpuDriver], NodeDriver]:
    """For `wrap_driver`: the agent gets this driver instead of the one the cluster opened."""
    return lambda _: driver


def _settled(cluster: SimCluster, layout: str) -> bool:
    labels = cluster.node()["metadata"].get("labels", {})
    advertised = {k: v for k, v in cluster.kubelet.advertised().items() if v}
    return labels.get("nvidia.com/mig.config.state") == "success" and advertised == EXPECTED[layout]


def run_two_agents(workdir: Path, *, scale: float) -> list[Cell]:
    with SimCluster(workdir, NODE) as cluster:
        options = scaled_options(cluster, scale)
        drivers = [_opened(CountingDriver(cluster)) for _ in range(2)]
        timeline = NodeTimeline(cluster)
        for index, driver in enumerate(drivers):
            cluster.start_agent(replace(options, holder_identity=f"agent-{index}"), wrap_driver=_always(driver))
        cluster.kubelet.run_workload("ml", "moves", mig_uuid=cluster.mig_uuid(0, 6))
        cluster.label(TARGET)
        converged = wait_until(lambda: _settled(cluster, TARGET), 60.0)
        changed = sum(1 for d in drivers if d.mutations)
        return ["two-agents-together", timeline.cordon_episodes(), "yes" if converged else "NO",
                f"{changed} agent(s) changed GPUs", sum(evicted_pods(cluster).values())]


# -- 3. kills -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillReport:
    changes: int
    kills: int
    """Agents that died mid-change (a kill point past the end of a short change kills nothing)."""
    converged: int
    evicted_twice: int
    restarts_needed: Counter[int]
    cordon_episodes: int


def run_kills(workdir: Path, *, kills: int, seed: int, scale: float) -> KillReport:
    """`kills` changes, each with the agent killed at a random instant, then restarted until it converges."""
    rng = random.Random(seed)
    converged = killed = 0
    restarts: Counter[int] = Counter()
    with SimCluster(workdir, NODE) as cluster:
        options = scaled_options(cluster, scale)
        timeline = NodeTimeline(cluster)
        layouts = ("all-1g.10gb", TARGET)
        for index in range(kills):
            target = layouts[(index + 1) % 2]
            cluster.kubelet.run_workload("ml", f"w-{index}", mig_uuid=cluster.mig_uuid(0, 4))
            cluster.label(target)
            at_phase = rng.random() < 0.5
            phase = rng.choice(KILLABLE)
            doomed_driver = _opened(CountingDriver(cluster, kill_after=None if at_phase else rng.randint(1, 12)))

            def hook(current: AgentPhase, phase: AgentPhase = phase, at_phase: bool = at_phase) -> None:
                if at_phase and current is phase:
                    raise Killed(f"killed as {phase.value} started")

            doomed, _ = cluster.build_agent(options, phase_hook=hook, wrap_driver=_always(doomed_driver))
            try:
                doomed.reconcile_once()
            except Killed:
                killed += 1
            for attempt in range(1, 6):
                agent, _ = cluster.build_agent(options)
                if agent.reconcile_once() in (Outcome.APPLIED, Outcome.UNCHANGED) and _settled(cluster, target):
                    converged += 1
                    restarts[attempt] += 1
                    break
        twice = sum(1 for count in evicted_pods(cluster).values() if count > 1)
        return KillReport(kills, killed, converged, twice, restarts, timeline.cordon_episodes())


# -- 4. label flips -----------------------------------------------------------------------------------


def _gpus_consistent(cluster: SimCluster) -> bool:
    return all(gi.compute_instances for gpu in cluster.fake.state.gpus for gi in gpu.gpu_instances)


def _advertisement_agrees(cluster: SimCluster) -> bool:
    """Whether Node allocatable shows what the GPUs hold now (mixed strategy)."""
    expected = expected_resources(cluster.driver().observe(), strategy=MigStrategy.MIXED)
    return advertisement_matches(cluster.kubelet.plugin_resources(), expected)[0]


def run_flip(workdir: Path, at: AgentPhase | int, flip_to: str | None, *, scale: float) -> list[Cell]:
    """The label flipped to `flip_to` (None: removed) as phase `at` starts, or right after NVML mutation `at`."""
    with SimCluster(workdir, NODE) as cluster:
        options = scaled_options(cluster, scale)
        cluster.kubelet.run_workload("ml", "moves", mig_uuid=cluster.mig_uuid(0, 6))
        flipped: list[bool] = []

        def flip() -> None:
            if not flipped:
                flipped.append(True)
                cluster.label(flip_to)

        def hook(current: AgentPhase) -> None:
            if current is at:
                flip()

        def after(mutation: int) -> None:
            if mutation == at:
                flip()

        driver = _opened(CountingDriver(cluster, on_mutation=after))
        agent, _ = cluster.build_agent(options, phase_hook=hook, wrap_driver=_always(driver))
        cluster.label(TARGET)
        outcome = agent.reconcile_once()
        consistent = _gpus_consistent(cluster)
        cordoned = bool(cluster.node()["spec"].get("unschedulable"))
        agrees = _advertisement_agrees(cluster)
        cluster.label(TARGET)
        fixed = False
        for _ in range(4):
            fresh, _ = cluster.build_agent(options)
            if fresh.reconcile_once() in (Outcome.APPLIED, Outcome.UNCHANGED) and _settled(cluster, TARGET):
                fixed = True
                break
        label = "typo" if flip_to else "removed"
        where = f"at {at.value}" if isinstance(at, AgentPhase) else f"after NVML call {at}"
        return [f"{label} {where}", outcome.value, "yes" if consistent else "NO",
                "yes" if cordoned else "no", "yes" if agrees or cordoned else "NO", "yes" if fixed else "NO"]


# -- main ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="ten simulated minutes per failure, fewer kills")
    parser.add_argument("--scale", type=float, default=60.0, help="production seconds per real second (default 60)")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args(argv)
    configure_logging(json_logs=False, level=logging.CRITICAL)
    simulated_s = 600.0 if args.quick else 3600.0
    window = simulated_s / args.scale
    kills = 12 if args.quick else 50
    flips: tuple[str | None, ...] = ("all-balancedd",) if args.quick else ("all-balancedd", None)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="migagent-chaos-") as tmp:
        root = Path(tmp)
        rows = [run_persistent(root / s.name, s, scale=args.scale, window_s=window).row() for s in PERSISTENT]
        print(f"persistent failures, {simulated_s / 60:g} simulated minutes each (x{args.scale:g} time)")
        print(render_table(
            ["scenario", "cordons", "cordoned|paused", "evicted/plan", "eviction requests", "attempts/allowed",
             "early"], rows))
        print()
        two = run_two_agents(root / "two", scale=args.scale)
        print(render_table(["scenario", "cordons", "converged", "GPU changes", "evicted"], [two]))
        print()
        report = run_kills(root / "kills", kills=kills, seed=args.seed, scale=args.scale)
        print(render_table(
            ["changes", "agents killed", "converged", "pods evicted twice", "restarts to converge", "cordons"],
            [[report.changes, report.kills, report.converged, report.evicted_twice,
              " ".join(f"{k}:{v}" for k, v in sorted(report.restarts_needed.items())), report.cordon_episodes]]))
        print()
        # all-1g.10gb -> all-balanced makes 20 NVML calls: flips between them, too (the issue's 13-of-14 case).
        points: tuple[AgentPhase | int, ...] = (*KILLABLE, 1, 7, 14)
        flip_rows = [
            run_flip(root / f"flip-{i}-{j}", at, to, scale=args.scale)
            for i, to in enumerate(flips)
            for j, at in enumerate(points)
        ]
        print(render_table(
            ["label flip", "outcome", "GPUs consistent", "left cordoned", "uncordoned only if advertised",
             "fix converges"], flip_rows))
    print(f"\n{time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
