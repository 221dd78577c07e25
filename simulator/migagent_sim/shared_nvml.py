"""The simulated kubelet's view of a node that other processes change through the fake libnvidia-ml.so.1.

When the GPU managers under test run as their own processes (NVIDIA's mig-manager and mig-parted in
Go, `migagent agent` in Python), the node lives in the state file named by MIGAGENT_FAKE_NVML_STATE
(migagent_sim.fakelib.node): each of their NVML calls takes `<state>.lock`, re-reads the file and
saves it after a change. `SharedFakeNvml` lets the simulated kubelet and device plugin, which read a
FakeNvml's `state` directly, share that node the same way: `state` is the file's current node, and
the kubelet's own changes (a workload's process starting or ending on a MIG device) are made under
the same lock and saved at once, so a manager's next NVML call sees them.
"""

from __future__ import annotations

from pathlib import Path

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import SimNodeState
from migagent_sim.fakelib.node import StateFileNode


class SharedFakeNvml(FakeNvml):
    """A FakeNvml over the state file at `path` (which must exist), shared with other processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._node = StateFileNode(path, spec=None)
        super().__init__(self._node.current_state())

    @property  # an attribute in FakeCore; here always the file's current node
    def state(self) -> SimNodeState:
        return self._node.current_state()

    @state.setter
    def state(self, value: SimNodeState) -> None:
        """FakeCore's constructor sets it; the node stays the file's."""

    def sim_attach_process(self, mig_uuid: str, *, pid: int, used_memory_bytes: int | None = 0) -> None:
        with self._node.session("attach") as node:
            node.sim_attach_process(mig_uuid, pid=pid, used_memory_bytes=used_memory_bytes)
            node.save(self.path)

    def sim_detach_process(self, pid: int) -> None:
        with self._node.session("detach") as node:
            node.sim_detach_process(pid)
            node.save(self.path)


def write_node(fake: FakeNvml, path: Path) -> None:
    """Put `fake`'s node in the state file at `path`, as the processes that share it will read it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(f"{path.name}.clients").unlink(missing_ok=True)  # NVML clients of an earlier run
    fake.save(path)
