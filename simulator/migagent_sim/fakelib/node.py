"""The simulated node behind the fake libnvidia-ml.so.1 when no FakeNvml is bound in-process.

Every process that loads the library (migagent, the fake nvidia-smi, doctor) shares one node
through the `--state` file named by MIGAGENT_FAKE_NVML_STATE. Each NVML call runs under an
exclusive lock on `<state>.lock`: re-read the file if another process changed it, run the call,
and save atomically right after a call that changed the node, so a SIGKILL at any instant leaves
the GPUs as far along as real ones would be. Handles of a GPU that another process changed
(a reset, instances created elsewhere) are dropped, as a reset makes real ones stale.

`<state>.clients` records which processes hold NVML initialised (pid -> nvmlInit refcount),
so the fake nvidia-smi can refuse a reset while another NVML client is attached, as the real one
does. A process killed without nvmlShutdown stops counting once its pid is gone.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from migagent.catalog import UnknownGpuModelError
from migagent.durable import write_atomically
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.spec import NodeSpecError
from migagent.sim.state import SimNodeState, StateFormatError
from migagent.sim.state_check import check_profiles

STATE_ENV = "MIGAGENT_FAKE_NVML_STATE"
SPEC_ENV = "MIGAGENT_FAKE_NVML_SPEC"
_LIFETIME_DELTAS = {"init": 1, "shutdown": -1}


class NodeConfigError(RuntimeError):
    """The environment does not describe a usable simulated node; the message says how to fix it."""


def node_from_environment() -> StateFileNode:
    state = os.environ.get(STATE_ENV, "")
    if not state:
        raise NodeConfigError(
            f"{STATE_ENV} is not set: name the simulator state file (the --state format), and set"
            f" {SPEC_ENV} (e.g. 2xA100-80GB) to create it when it does not exist"
        )
    return StateFileNode(Path(state), spec=os.environ.get(SPEC_ENV) or None)


@dataclass(frozen=True)
class _Signature:
    inode: int
    mtime_ns: int
    size: int


def _signature(path: Path) -> _Signature:
    stat = path.stat()
    return _Signature(stat.st_ino, stat.st_mtime_ns, stat.st_size)


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


class NvmlClients:
    """pid -> nvmlInit refcount of the processes using the node, in `<state>.clients`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[int, int]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return {int(pid): int(count) for pid, count in raw.items()} if isinstance(raw, dict) else {}

    def change(self, pid: int, delta: int) -> None:
        clients = self.read()
        count = max(0, clients.get(pid, 0) + delta)
        if count:
            clients[pid] = count
        else:
            clients.pop(pid, None)
        _write_atomically(self.path, json.dumps({str(p): c for p, c in sorted(clients.items())}))

    def live(self, *, exclude: int) -> list[int]:
        """Processes other than `exclude` that hold NVML and still exist."""
        return sorted(pid for pid, count in self.read().items() if count > 0 and pid != exclude and _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_atomically(path: Path, text: str) -> None:
    write_atomically(path, text.encode("utf-8"), what="the simulated node's NVML clients", sync_directory=False)


class StateFileNode:
    def __init__(self, path: Path, *, spec: str | None) -> None:
        self.path = path
        self.spec = spec
        self.clients = NvmlClients(path.with_name(f"{path.name}.clients"))
        self._lock_path = path.with_name(f"{path.name}.lock")
        self._fake: FakeNvml | None = None
        self._seen: _Signature | None = None

    @contextmanager
    def session(self, op: str) -> Iterator[FakeNvml]:
        """The node, current and locked for one call; saved if the call changed it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive(self._lock_path):
            fake = self._current()
            mutations = len(fake.sim_mutations)
            yield fake
            # Reached only when the call succeeded: a failed NVML call changes nothing.
            if len(fake.sim_mutations) != mutations:
                fake.state.save(self.path)
                self._seen = _signature(self.path)
            if op in _LIFETIME_DELTAS:
                self.clients.change(os.getpid(), _LIFETIME_DELTAS[op])

    def current_state(self) -> SimNodeState:
        """The node as it is now (created from the spec when the file does not exist yet)."""
        with self.session("read") as fake:
            return fake.state

    def _current(self) -> FakeNvml:
        if not self.path.exists():
            self._create()
        signature = _signature(self.path)
        if self._fake is None or signature != self._seen:
            self._fake = self._reloaded(self._fake)
            self._seen = signature
        return self._fake

    def _create(self) -> None:
        if self.spec is None:
            raise NodeConfigError(f"{self.path} does not exist; set {SPEC_ENV} (e.g. 2xA100-80GB) to create it")
        try:
            FakeNvml.from_spec(self.spec).save(self.path)
        except NodeSpecError as exc:
            raise NodeConfigError(f"{SPEC_ENV}: {exc}") from exc

    def _reloaded(self, previous: FakeNvml | None) -> FakeNvml:
        try:
            state = SimNodeState.load(self.path)
            check_profiles(state)
            fresh = FakeNvml(state)
        except (OSError, UnicodeDecodeError, StateFormatError, UnknownGpuModelError) as exc:
            raise NodeConfigError(f"{STATE_ENV}={self.path}: cannot load the simulated node: {exc}") from exc
        if previous is None:
            return fresh
        if [g.model_key for g in previous.state.gpus] != [g.model_key for g in state.gpus]:
            fresh._init_count = previous._init_count  # another node entirely: every handle is stale
            return fresh
        # Same GPUs: keep this process's handles and refcount, except on GPUs another process changed.
        for index, (old, new) in enumerate(zip(previous.state.gpus, state.gpus, strict=True)):
            if old.to_dict() != new.to_dict():
                previous._handles.forget_gpu(index)
        previous.state = state
        return previous
