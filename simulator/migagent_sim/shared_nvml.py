"""The simulated kubelet's view of a node that other processes change through the fake libnvidia-ml.so.1.

When the GPU managers under test run as their own processes (NVIDIA's mig-manager and mig-parted in
Go, `migagent agent` in Python), the node lives in the state file named by MIGAGENT_FAKE_NVML_STATE
(migagent.sim.fakelib_node): each of their NVML calls takes `<state>.lock`, re-reads the file and
saves it after a change. `SharedFakeNvml` lets the simulated kubelet and device plugin, which read a
FakeNvml's `state` directly, share that node: `state` is re-read whenever the file changed, and the
kubelet's own changes (a workload's process starting or ending on a MIG device) are made under the
same lock and saved at once, so a manager's next NVML call sees them.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import SimNodeState

Signature = tuple[int, int, int]


def _signature(path: Path) -> Signature:
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


class SharedFakeNvml(FakeNvml):
    """A FakeNvml over the state file at `path` (which must exist), shared with other processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.with_name(f"{path.name}.lock")
        self._seen: Signature = _signature(path)
        super().__init__(SimNodeState.load(path))

    @property  # an attribute in FakeCore, re-read from the file here
    def state(self) -> SimNodeState:
        signature = _signature(self.path)
        if signature != self._seen:
            # The file is replaced atomically, so a read never sees half of a save.
            self._state = SimNodeState.load(self.path)
            self._seen = signature
        return self._state

    @state.setter
    def state(self, value: SimNodeState) -> None:
        self._state = value

    def sim_attach_process(self, mig_uuid: str, *, pid: int, used_memory_bytes: int | None = 0) -> None:
        with self._changing():
            super().sim_attach_process(mig_uuid, pid=pid, used_memory_bytes=used_memory_bytes)

    def sim_detach_process(self, pid: int) -> None:
        with self._changing():
            super().sim_detach_process(pid)

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Under the node's lock: the newest state, changed by the caller, then saved (not on an error)."""
        with self._lock_path.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                self._state = SimNodeState.load(self.path)
                yield
                self._state.save(self.path)
                self._seen = _signature(self.path)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def write_node(fake: FakeNvml, path: Path) -> None:
    """Put `fake`'s node in the state file at `path`, as the processes that share it will read it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(f"{path.name}.clients").unlink(missing_ok=True)  # NVML clients of an earlier run
    fake.save(path)
