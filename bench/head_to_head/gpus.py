"""What the simulated GPUs hold, and what a change did to them: touched GPUs, MIG devices kept by UUID."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from migagent.planning.naming import gi_name
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import MIG_ENABLE


@dataclass(frozen=True, order=True)
class MigDevice:
    """One GPU instance, named by its profile and slot, and the UUID of its MIG device (first CI)."""

    gpu: int
    start: int
    profile: str
    uuid: str


@dataclass(frozen=True)
class GpuSnapshot:
    devices: tuple[MigDevice, ...]
    mig_enabled: tuple[bool, ...]

    def on(self, gpu: int) -> tuple[MigDevice, ...]:
        return tuple(d for d in self.devices if d.gpu == gpu)


def snapshot(fake: FakeNvml) -> GpuSnapshot:
    state = fake.state  # one read of the node: another process may change it meanwhile
    devices: list[MigDevice] = []
    for index, gpu in enumerate(state.gpus):
        table = fake.model(index).profiles
        for gi in gpu.gpu_instances:
            uuid = gi.compute_instances[0].uuid if gi.compute_instances else "-"
            devices.append(MigDevice(index, gi.placement.start, gi_name(table, gi.profile_id), uuid))
    enabled = tuple(gpu.mig_current == MIG_ENABLE for gpu in state.gpus)
    return GpuSnapshot(tuple(sorted(devices)), enabled)


@dataclass(frozen=True)
class GpuChange:
    touched: tuple[int, ...]
    """GPUs whose MIG devices (by UUID) or MIG mode differ."""
    kept: tuple[MigDevice, ...]
    destroyed: tuple[MigDevice, ...]
    created: tuple[MigDevice, ...]


def compare(before: GpuSnapshot, after: GpuSnapshot) -> GpuChange:
    old = {d.uuid: d for d in before.devices}
    new = {d.uuid: d for d in after.devices}
    kept = tuple(sorted(old[u] for u in old.keys() & new.keys()))
    destroyed = tuple(sorted(old[u] for u in old.keys() - new.keys()))
    created = tuple(sorted(new[u] for u in new.keys() - old.keys()))
    moved = {d.gpu for d in (*destroyed, *created)}
    moded = {i for i, (a, b) in enumerate(zip(before.mig_enabled, after.mig_enabled, strict=True)) if a != b}
    return GpuChange(tuple(sorted(moved | moded)), kept, destroyed, created)


def count_text(devices: Iterable[MigDevice]) -> str:
    """`1g.10gb x2 + 2g.20gb + 3g.40gb` (largest first), or `none`."""
    counts = Counter(d.profile for d in devices)
    if not counts:
        return "none"
    ordered = sorted(counts.items(), key=lambda item: (-int(item[0].split("g.")[0]), item[0]))
    return " + ".join(name if n == 1 else f"{name} x{n}" for name, n in ordered)


def gpu_ranges(gpus: Iterable[int]) -> str:
    """`0-3, 5` for [0, 1, 2, 3, 5]; `none` when empty."""
    ordered = sorted(set(gpus))
    if not ordered:
        return "none"
    runs: list[list[int]] = [[ordered[0], ordered[0]]]
    for gpu in ordered[1:]:
        if gpu == runs[-1][1] + 1:
            runs[-1][1] = gpu
        else:
            runs.append([gpu, gpu])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def describe_node(node: GpuSnapshot, *, only: Iterable[int] | None = None) -> str:
    """Each GPU's instances, GPUs with the same content grouped: `GPUs 0-3: 1g.10gb x7; GPU 4: none`."""
    gpus = sorted(set(only)) if only is not None else list(range(len(node.mig_enabled)))
    groups: dict[str, list[int]] = {}
    for gpu in gpus:
        text = count_text(node.on(gpu)) if node.mig_enabled[gpu] else "MIG off"
        groups.setdefault(text, []).append(gpu)
    parts = []
    for text, members in groups.items():
        label = "GPU" if len(members) == 1 else "GPUs"
        parts.append(f"{label} {gpu_ranges(members)}: {text}")
    return "; ".join(parts)
