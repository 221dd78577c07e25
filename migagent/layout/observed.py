"""What the node has right now, as read through NVML: the input every plan starts from.

These are plain values so that the pure planner can consume them without knowing NVML; the
`migagent.nvml.GpuDriver` builds them from pynvml (or the simulator's FakeNvml).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from migagent.catalog.model import Placement, ProfileTable


@dataclass(frozen=True)
class ObservedProcess:
    """A process running on one MIG device (compute instance)."""

    pid: int
    used_memory_bytes: int = 0


@dataclass(frozen=True)
class ObservedCi:
    id: int
    profile_id: int
    placement: Placement
    uuid: str
    processes: tuple[ObservedProcess, ...] = ()


@dataclass(frozen=True)
class ObservedGi:
    id: int
    profile_id: int
    placement: Placement
    compute_instances: tuple[ObservedCi, ...] = ()

    @property
    def ci_profile_ids(self) -> tuple[int, ...]:
        return tuple(sorted(ci.profile_id for ci in self.compute_instances))

    @property
    def processes(self) -> tuple[tuple[str, ObservedProcess], ...]:
        """(MIG UUID, process) for every process on this GI."""
        return tuple((ci.uuid, p) for ci in self.compute_instances for p in ci.processes)


@dataclass(frozen=True)
class ObservedGpu:
    index: int
    uuid: str
    name: str
    pci_bus_id: str
    pci_device_id: int
    mig_capable: bool
    mig_current: bool
    mig_pending: bool
    gpu_instances: tuple[ObservedGi, ...] = ()
    profiles: ProfileTable | None = None
    # Ampere activates a mode change only through a GPU reset; Hopper and later do it in place.
    mode_change_needs_reset: bool = False
    # PCI subsystem id (0xSSSSVVVV) for device-filters with a ':' qualifier; None when not known.
    pci_subsystem_id: int | None = None
    # Processes on the whole GPU, read while MIG is off (with MIG on they belong to compute instances).
    processes: tuple[ObservedProcess, ...] = ()

    def gi_at(self, placement: Placement) -> ObservedGi | None:
        return next((gi for gi in self.gpu_instances if gi.placement == placement), None)

    @property
    def mode_change_pending(self) -> bool:
        return self.mig_current != self.mig_pending


@dataclass(frozen=True)
class Observation:
    gpus: tuple[ObservedGpu, ...]

    def gpu(self, index: int) -> ObservedGpu:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise KeyError(f"no GPU with index {index} on this node")

    def same_instances(self, other: Observation) -> bool:
        """Both show the same GPUs, MIG modes, GPU and compute instances; processes aside (a drained GPU
        instance is the same instance): a plan made on one still fits the other."""
        return _without_processes(self) == _without_processes(other)


def _without_processes(observation: Observation) -> Observation:
    def gi(instance: ObservedGi) -> ObservedGi:
        cis = tuple(replace(ci, processes=()) for ci in instance.compute_instances)
        return replace(instance, compute_instances=cis)

    gpus = tuple(replace(g, processes=(), gpu_instances=tuple(map(gi, g.gpu_instances))) for g in observation.gpus)
    return Observation(gpus=gpus)
