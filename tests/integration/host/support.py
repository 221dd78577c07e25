"""A host-mode agent on a simulated node, wired like `migagent host` but observable from a test.

The agent runs in a thread with the real file watch on files under tmp_path and the real clock
(its loop blocks on events). The apply engine under it gets a fake clock, so step retries do not
wait. Service calls land in a RecordingServiceManager, and each one is put on a timeline together
with the number of NVML mutations made so far.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from migagent.attempt.window.services import HostClients, RecordingServiceManager, ServiceCall
from migagent.clock import FakeClock, SystemClock
from migagent.layout.observed import Observation
from migagent.layout.parse import load_layout_file
from migagent.layout.resolve import identity_of, resolve_config
from migagent.loops.host import HostAgent, HostSettings, Selection
from migagent.nvml.driver import GpuDriver
from migagent.plumbing.sdnotify import Notifier
from migagent.reconcile.assertion import config_mismatches, mode_mismatches
from migagent.reconcile.bootid import FixedBootId
from migagent.reconcile.journal import FileJournal
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.retry import RetryPolicy
from migagent.reconcile.session import ApplySession
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent.sources.files import FileWatch, read_selected_layout
from migagent_sim.deadline import Deadline
from migagent_sim.doubles.notifier import RecordingNotifier

LAYOUTS = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  a100-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
  a100-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
"""

WAIT_S = 30.0  # a bound on waiting for the agent thread, never an expectation of speed


def wait_until(condition: Callable[[], bool], *, what: Callable[[], str], timeout: float = WAIT_S) -> None:
    deadline = Deadline(timeout)
    pause = threading.Event()
    while not condition():
        if deadline.passed():
            raise AssertionError(f"timed out waiting for {what()}")
        pause.wait(0.01)


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` the way editors and config tools do: write a temporary file, rename it over."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class HostHarness:
    def __init__(
        self,
        tmp_path: Path,
        *,
        spec: str = "A100-40GB",
        selected: str | None = "a100-balanced",
        clients: Sequence[str] = (),
        active: Sequence[str] | None = None,
        failing: Sequence[str] = (),
        notifier: Notifier | None = None,
        retry_interval_s: float = 300.0,
        on_service_call: Callable[[ServiceCall], None] | None = None,
    ) -> None:
        # One policy for the loop's retry timer and the sessions' engines, as cli/host.py wires it.
        self.retry = RetryPolicy(
            step_attempts=3, failure_backoff_initial=retry_interval_s, failure_backoff_max=8 * retry_interval_s
        )
        self.fake = FakeNvml.from_spec(spec)
        self.driver = GpuDriver(self.fake, reset_runner=SimResetRunner(self.fake)).__enter__()
        etc = tmp_path / "etc"
        etc.mkdir()
        self.layout_file = etc / "layouts.yaml"
        self.selected_file = etc / "migagent.env"
        self.layout_file.write_text(LAYOUTS, encoding="utf-8")
        if selected is not None:
            self.select(selected)
        self.journal_dir = tmp_path / "journal"
        self.clients_state = tmp_path / "run" / "stopped-clients.json"
        self.timeline: list[tuple[ServiceCall, int]] = []
        self._also_on_service_call = on_service_call
        self.services = RecordingServiceManager(
            active=clients if active is None else active, failing=failing, on_call=self._on_service_call
        )
        self.clients = HostClients(self.services, clients, state_file=self.clients_state)
        self.notifier = notifier if notifier is not None else RecordingNotifier()
        self.agent = HostAgent(
            observe=self.driver.observe,
            read_selection=self._read_selection,
            sessions=self._session,
            clients=self.clients,
            notifier=self.notifier,
            clock=SystemClock(),
            settings=HostSettings(debounce_s=0.05, retry=self.retry, max_apply_s=600.0),
        )
        self._watch = FileWatch([self.layout_file, self.selected_file], on_change=self.agent.request_reconcile)
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    # -- wiring -------------------------------------------------------------------------------------

    def _on_service_call(self, call: ServiceCall) -> None:
        self.timeline.append((call, len(self.fake.sim_mutations)))
        if self._also_on_service_call is not None:
            self._also_on_service_call(call)

    def _read_selection(self) -> Selection:
        return Selection(load_layout_file(self.layout_file), read_selected_layout(self.selected_file))

    def _session(self, config_name: str) -> ApplySession:
        engine = ApplyEngine(
            self.driver,
            FileJournal(self.journal_dir),
            clock=FakeClock(),
            boot_id_provider=FixedBootId(),
            retry=self.retry,
        )
        return ApplySession(engine=engine, observe=self.driver.observe)

    # -- control ------------------------------------------------------------------------------------

    def select(self, name: str) -> None:
        write_atomically(self.selected_file, f"# selected by the test\nMIGAGENT_LAYOUT={name}\n")

    def start(self) -> None:
        self._watch.start()
        self._thread = threading.Thread(target=self._run, name="host-agent", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.agent.run()
        except BaseException as exc:  # handed to the test thread by stop()
            self.error = exc

    def stop(self) -> None:
        self.agent.stop()
        if self._thread is not None:
            self._thread.join(WAIT_S)
            assert not self._thread.is_alive(), "host agent did not stop"
        self._watch.stop()
        if self.error is not None:
            raise self.error

    def __enter__(self) -> HostHarness:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observing ----------------------------------------------------------------------------------

    @property
    def messages(self) -> list[str]:
        assert isinstance(self.notifier, RecordingNotifier)
        return list(self.notifier.messages)

    @property
    def statuses(self) -> list[str]:
        assert isinstance(self.notifier, RecordingNotifier)
        return list(self.notifier.statuses)

    def wait_for_status(self, prefix: str, *, count: int = 1) -> None:
        wait_until(
            lambda: sum(s.startswith(prefix) for s in self.statuses) >= count,
            what=lambda: f"{count} status(es) starting with {prefix!r}; got {self.statuses}",
        )

    def status_starting(self, prefix: str) -> str:
        """The first status line starting with `prefix`."""
        return next(s for s in self.statuses if s.startswith(prefix))

    def observe(self) -> Observation:
        """Only while the agent is stopped or idle: the simulator is not made for two threads."""
        return self.driver.observe()

    def mismatches(self, config: str) -> tuple[str, ...]:
        """Why the node does not have `config` (empty when it does); the CLI's `assert` question."""
        observation = self.observe()
        layout = load_layout_file(self.layout_file)
        desired = resolve_config(layout, config, [identity_of(gpu) for gpu in observation.gpus])
        return mode_mismatches(observation, desired) + config_mismatches(observation, desired)
