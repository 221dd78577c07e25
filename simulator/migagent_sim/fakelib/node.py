"""The simulated node behind the fake libnvidia-ml.so.1 when no FakeNvml is bound in-process.

Every process that loads the library (migagent, NVIDIA's tools, the fake nvidia-smi, doctor)
shares one node through the `--state` file named by MIGAGENT_FAKE_NVML_STATE. Each NVML call runs
under an exclusive lock (a thread lock in the process, a flock on `<state>.lock` between
processes): re-read the file if another process changed it, run the call, and save atomically
right after a call that changed the node, so a SIGKILL at any instant leaves the GPUs as far
along as real ones would be. Handles of a GPU that another process changed
(a reset, instances created elsewhere) are dropped, as a reset makes real ones stale.

`<state>.clients` (NvmlClients) records which processes hold NVML initialised, so the fake
nvidia-smi can refuse a reset while another NVML client is attached, as the real one does.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from migagent.catalog import UnknownGpuModelError
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.spec import NodeSpecError
from migagent.sim.state import SimNodeState, StateFormatError
from migagent.sim.state_check import check_profiles

STATE_ENV = "MIGAGENT_FAKE_NVML_STATE"
SPEC_ENV = "MIGAGENT_FAKE_NVML_SPEC"
_LIFETIME_OPS = ("init", "shutdown")


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


class _NodeLock:
    """One call at a time on the node: a thread lock inside this process, an exclusive flock on
    `<state>.lock` between processes. The lock file stays open (one descriptor per process, reopened
    in a forked child, which must not share its parent's lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._threads = threading.Lock()
        self._fd: int | None = None
        self._pid = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._threads:
            if self._fd is None or self._pid != os.getpid():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd, self._pid = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644), os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)


class NvmlClients:
    """The processes holding NVML initialised on the node: one empty file per process, named by its
    pid, in the directory `<state>.clients`, present while its nvmlInit count is above zero.

    Only a process's own 0 -> 1 and 1 -> 0 transitions touch the directory (a create, an unlink: no
    rewrite of a shared file, no fsync), so clients that init and shut down per call (mig-parted
    does, a hundred times a run) stay cheap. A process killed without nvmlShutdown stops counting
    once its pid is gone."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[int, int]:
        """pid -> 1 for each registered process (the count itself stays in its process)."""
        try:
            names = [entry.name for entry in self.path.iterdir()]
        except (FileNotFoundError, NotADirectoryError):
            return {}
        return {int(name): 1 for name in names if name.isdigit()}

    def mark(self, pid: int, *, holding: bool) -> None:
        entry = self.path / str(pid)
        if holding:
            self.path.mkdir(parents=True, exist_ok=True)
            entry.touch()
        else:
            entry.unlink(missing_ok=True)

    def live(self, *, exclude: int) -> list[int]:
        """Processes other than `exclude` that hold NVML and still exist."""
        return sorted(pid for pid in self.read() if pid != exclude and _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StateFileNode:
    def __init__(self, path: Path, *, spec: str | None) -> None:
        self.path = path
        self.spec = spec
        self.clients = NvmlClients(path.with_name(f"{path.name}.clients"))
        self._lock = _NodeLock(path.with_name(f"{path.name}.lock"))
        self._fake: FakeNvml | None = None
        self._seen: _Signature | None = None
        self._registered = False  # whether this process's file is in `clients`

    @contextmanager
    def session(self, op: str) -> Iterator[FakeNvml]:
        """The node, current and locked for one call; saved if the call changed it."""
        with self._lock.held():
            fake = self._current()
            mutations = len(fake.sim_mutations)
            yield fake
            # Reached only when the call succeeded: a failed NVML call changes nothing.
            if len(fake.sim_mutations) != mutations:
                fake.state.save(self.path, shared=True)
                self._seen = _signature(self.path)
            if op in _LIFETIME_OPS and (fake.sim_nvml_clients > 0) != self._registered:
                self._registered = fake.sim_nvml_clients > 0
                self.clients.mark(os.getpid(), holding=self._registered)

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
