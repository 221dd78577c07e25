"""One manager through one scenario on a fresh node, and what the harness read off it (`RunRecord`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.head_to_head.gpus import GpuSnapshot, MigDevice, compare, describe_node
from bench.head_to_head.managers import Manager, ManagerProcess
from bench.head_to_head.node import OPERATOR_NAMESPACE, SimulatedNode, expected_advertisement, start_layout
from bench.head_to_head.recorder import PodGone
from bench.head_to_head.timeline import (
    NodeSample,
    advertised_entries,
    cordon_episodes,
    entries,
    events,
    pause_episodes,
    success_entries,
)
from migagent.layout.parse import load_layout_file
from migagent_sim.cluster_config import SimClusterConfig
from migagent_sim.deadline import wait_until
from tests.realkube.control_plane import ControlPlane

QUIET_S = 2.0
"""A run has settled when its end state has held this long with nothing changing on the Node."""


@dataclass(frozen=True)
class Outcome:
    """What a scenario hands back: the layout it ends on, the label write the time is measured from."""

    target: str
    measured_from: float
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    scenario: str
    manager: str
    success_s: float | None
    """From the measured label write to the state label's last entry into `success` for the target."""
    advertised_s: float | None
    """From the measured label write to Node allocatable holding the target's resources (last entry)."""
    failed_s: float | None
    """From the measured label write to the state label's first `failed`."""
    final_state: str | None
    evicted: tuple[str, ...]
    deleted: tuple[str, ...]
    kept_running: tuple[str, ...]
    operand_restarts: int
    """Operand pods (gpu-operator namespace) that left the node."""
    gpus_touched: tuple[int, ...]
    kept: tuple[MigDevice, ...]
    destroyed: int
    created: int
    success_entries: int
    """How often the state label went to `success` for the target after the measured write (more than once:
    a success was reported under the target's label before the GPUs held it)."""
    cordon_episodes: int
    pause_episodes: int
    left_cordoned: bool
    left_paused: tuple[str, ...]
    gpus_after: str
    advertised_after: int
    """MIG devices in Node allocatable at the end."""
    events: tuple[str, ...]
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.final_state == "success" and self.success_s is not None


class RunContext:
    """A fresh node with one manager on it; the operations scenarios are written in."""

    def __init__(self, plane: ControlPlane, manager: Manager, settings: SimClusterConfig, workdir: Path) -> None:
        self.manager = manager
        self.settings = settings
        self.workdir = workdir
        self.node = SimulatedNode(plane, workdir / "node", settings).start()
        self.process: ManagerProcess | None = None
        self.origin = time.monotonic()
        self._expected: dict[str, dict[str, int]] = {}
        self._labelled = False
        self.given_up: str | None = None
        self.layouts = frozenset(load_layout_file(self.node.layout_file).names)
        self.workloads_before: dict[str, str] = {}
        self.gpus_before: GpuSnapshot | None = None

    # -- the manager ------------------------------------------------------------------------------

    def start_manager(self) -> None:
        self.process = self.manager.start(self.node, self.workdir / "manager")
        self.node.recorder.mark(f"{self.manager.name} started")

    def kill_manager(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process = None
        self.node.recorder.mark(f"{self.manager.name} killed (SIGKILL)")

    def ready(self, timeout_s: float = 180.0) -> None:
        """The manager reports the start layout and the plugin advertises it: the scenario's baseline."""
        start = start_layout(self.settings)
        expected = self.expected(start)

        def done(samples: Sequence[NodeSample]) -> bool:
            last = samples[-1]
            return last.state == "success" and last.layout == start and dict(last.advertised) == expected

        if not self.node.recorder.wait_quiet(1.0, timeout_s=timeout_s, done=done):
            raise RuntimeError(f"{self.manager.name} never reported {start}: {self.node.recorder.latest()}")
        self.baseline()

    def baseline(self) -> None:
        """The before-picture: the workload pods and the GPUs (again after a scenario added pods)."""
        self.workloads_before = {w.name: w.uid for w in self.node.kubelet.workloads()}
        self.gpus_before = self.node.gpus()

    # -- the world --------------------------------------------------------------------------------

    def expected(self, layout: str) -> dict[str, int]:
        if layout not in self._expected:
            self._expected[layout] = expected_advertisement(self.settings, layout, self.node.layout_file)
        return self._expected[layout]

    def now(self) -> float:
        return time.monotonic() - self.origin

    def label(self, layout: str) -> float:
        """Write `nvidia.com/mig.config` as an admin; the time of the write. The first write starts the clock
        and is preceded by what the admin does before a change (the manager's `before_change`), timed with it."""
        if self._labelled:
            written = self.now()
        else:
            self.origin = time.monotonic()
            self._labelled = True
            written = self.now()
            refused = self.manager.before_change(self.node)
            if refused is not None:
                self.given_up = f"the admin gave up before writing a label: {refused}"
                self.node.recorder.mark(self.given_up)
                return written
        if self.given_up is None:
            self.node.label(layout)
        return written

    def finish(self) -> None:
        """What the admin does once the scenario has settled (uncordon, for a drained node); then until the
        harness's watch has delivered the Node as a read of it shows now, so the record ends where the node
        is. An admin who gave up uncordoned before the label and nothing waited for that since."""
        if self._labelled and self.given_up is None:
            self.manager.after_change(self.node)
        self.node.recorder.catch_up(self.node.api.node(self.node.name), timeout_s=10.0)

    def settle(self, since: float, target: str, *, timeout_s: float) -> bool:
        """Until the state label moved after the write at `since` and came to rest, nothing changing for
        QUIET_S: on `failed`, or on `success` with `target` in the layout label and its resources advertised
        (a name the layout file lacks can only fail). False when `timeout_s` (stretched by the load factor)
        passed first."""
        if self.given_up is not None:
            return False
        expected = self.expected(target) if target in self.layouts else None
        written = self.origin + since

        def done(samples: Sequence[NodeSample]) -> bool:
            before = [s for s in samples if s.t < written]
            at_write = before[-1].state if before else None
            if all(s.state == at_write for s in samples if s.t >= written):
                return False  # the manager has not answered this write yet
            latest = samples[-1]
            if latest.state == "failed":
                return True
            return (
                expected is not None
                and (latest.state, latest.layout) == ("success", target)
                and dict(latest.advertised) == expected
            )

        return self.node.recorder.wait_quiet(QUIET_S, timeout_s=timeout_s, done=done)

    def wait_for(self, check: Callable[[], bool], *, timeout_s: float, poll_s: float = 0.02) -> bool:
        """Until `check()`; False once `timeout_s`, stretched by the load factor as `settle` is, has passed."""
        return wait_until(check, timeout_s, poll_s=poll_s)

    def close(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
        self.node.stop()

    # -- the record -------------------------------------------------------------------------------

    def record(self, scenario: str, outcome: Outcome) -> RunRecord:
        samples = self.node.recorder.samples(self.origin)
        gone = self.node.recorder.gone(self.origin)
        marks = self.node.recorder.marks(self.origin)
        after = self.node.gpus()
        assert self.gpus_before is not None, "ready() or baseline() before the scenario"
        change = compare(self.gpus_before, after)
        latest = samples[-1]
        since = outcome.measured_from
        successes = success_entries(samples, outcome.target, after=since)
        advertised = advertised_entries(samples, self.expected(outcome.target), after=since)
        running = {w.name: w.uid for w in self.node.kubelet.workloads()}
        return RunRecord(
            scenario=scenario,
            manager=self.manager.name,
            success_s=successes[-1] - since if successes and latest.state == "success" else None,
            advertised_s=advertised[-1] - since if advertised else None,
            failed_s=_minus(next(iter(entries(samples, _failed, after=since)), None), since),
            final_state=latest.state,
            evicted=_names(gone, evicted=True),
            deleted=_names(gone, evicted=False),
            kept_running=tuple(sorted(n for n, uid in self.workloads_before.items() if running.get(n) == uid)),
            operand_restarts=sum(1 for g in gone if g.namespace == OPERATOR_NAMESPACE),
            gpus_touched=change.touched,
            kept=change.kept,
            destroyed=len(change.destroyed),
            created=len(change.created),
            success_entries=len(successes),
            cordon_episodes=cordon_episodes([s for s in samples if s.t >= 0]),
            pause_episodes=pause_episodes([s for s in samples if s.t >= 0]),
            left_cordoned=latest.cordoned,
            left_paused=tuple(c for c, v in latest.deploy if v == "paused-for-mig-change"),
            gpus_after=describe_node(after, only=change.touched) if change.touched else "unchanged",
            advertised_after=sum(latest.advertised.values()),
            events=tuple(events([s for s in samples if s.t >= -0.001], [m for m in marks if m[0] >= 0])),
            notes={**outcome.notes, **({"admin": self.given_up} if self.given_up else {})},
        )


def _failed(sample: NodeSample) -> bool:
    return sample.state == "failed"


def _minus(t: float | None, since: float) -> float | None:
    return None if t is None else t - since


def _names(gone: Sequence[PodGone], *, evicted: bool) -> tuple[str, ...]:
    """Workload pods (not the operator's) that left, evicted or deleted."""
    return tuple(sorted({g.name for g in gone if g.evicted == evicted and g.namespace != OPERATOR_NAMESPACE}))
