"""The simulated node's state: plain, JSON-serialisable records (handles, faults and logs are not state).

These records are mutable on purpose: they are the simulated hardware, which FakeNvml changes in
place. Everything a later CLI run needs to see the same node is here; `to_dict`/`from_dict`
round-trip exactly.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migagent.catalog import GpuModel, Placement
from migagent.durable import read_bounded, sweep_stale_temp_files, write_atomically
from migagent.jsontext import decode_json

STATE_FORMAT_VERSION = 1
GI_ID_MAPS = ("standard", "xor4")
AUTO_PLACEMENT_RULES = ("inferred", "lowest-start")
MIG_DISABLE, MIG_ENABLE = 0, 1

# Fixed namespaces keep every simulated UUID reproducible from the spec alone.
_GPU_NAMESPACE = uuid.UUID("6d1f3c2a-5b7e-4c19-9a0e-2f8d4b6c1e01")
_MIG_NAMESPACE = uuid.UUID("6d1f3c2a-5b7e-4c19-9a0e-2f8d4b6c1e02")


class StateFormatError(ValueError):
    """A state file that is not a simulator state; the message names the field."""


def gpu_uuid(position: int) -> str:
    return f"GPU-{uuid.uuid5(_GPU_NAMESPACE, str(position))}"


def mig_uuid(gpu_uuid_text: str, serial: int) -> str:
    """A UUIDv5, so the third group starts with 5 as on real R470+ drivers (docs/nvml.md §3)."""
    return f"MIG-{uuid.uuid5(_MIG_NAMESPACE, f'{gpu_uuid_text}/{serial}')}"


def pci_bus_id(position: int) -> str:
    return f"00000000:{0x18 + position:02X}:00.0"


def _placement_to_list(placement: Placement) -> list[int]:
    return [placement.start, placement.size]


def _placement_from(raw: Any, where: str) -> Placement:
    if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(v, int) for v in raw)):
        raise StateFormatError(f"{where}.placement must be [start, size], got {raw!r}")
    return Placement(raw[0], raw[1])


def _field(raw: Any, name: str, kind: type, where: str) -> Any:
    if not isinstance(raw, dict) or name not in raw:
        raise StateFormatError(f"{where} lacks field {name!r}")
    value = raw[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StateFormatError(f"{where}.{name} must be {kind.__name__}, got {value!r}")
    return value


@dataclass(slots=True)
class SimProcess:
    pid: int
    used_memory_bytes: int | None = 0
    """None: NVML cannot tell (it answers NVML_VALUE_NOT_AVAILABLE, which pynvml turns into None)."""

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "used_memory_bytes": self.used_memory_bytes}

    @classmethod
    def from_dict(cls, raw: Any, where: str = "process") -> SimProcess:
        pid = _field(raw, "pid", int, where)
        if isinstance(raw, dict) and raw.get("used_memory_bytes", 0) is None:
            return cls(pid=pid, used_memory_bytes=None)
        return cls(pid=pid, used_memory_bytes=_field(raw, "used_memory_bytes", int, where))


@dataclass(slots=True)
class SimComputeInstance:
    id: int
    profile_id: int
    placement: Placement
    uuid: str
    processes: list[SimProcess] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "profile_id": self.profile_id,
            "placement": _placement_to_list(self.placement),
            "uuid": self.uuid,
            "processes": [p.to_dict() for p in self.processes],
        }

    @classmethod
    def from_dict(cls, raw: Any, where: str = "compute_instance") -> SimComputeInstance:
        return cls(
            id=_field(raw, "id", int, where),
            profile_id=_field(raw, "profile_id", int, where),
            placement=_placement_from(_field(raw, "placement", list, where), where),
            uuid=_field(raw, "uuid", str, where),
            processes=[
                SimProcess.from_dict(p, f"{where}.processes[{i}]")
                for i, p in enumerate(_field(raw, "processes", list, where))
            ],
        )


@dataclass(slots=True)
class SimGpuInstance:
    id: int
    profile_id: int
    placement: Placement
    compute_instances: list[SimComputeInstance] = field(default_factory=list)
    # A container holding the GI's device nodes makes destroy fail IN_USE even without CIs (docs/nvml.md §9).
    held_by_client: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "profile_id": self.profile_id,
            "placement": _placement_to_list(self.placement),
            "held_by_client": self.held_by_client,
            "compute_instances": [ci.to_dict() for ci in self.compute_instances],
        }

    @classmethod
    def from_dict(cls, raw: Any, where: str = "gpu_instance") -> SimGpuInstance:
        return cls(
            id=_field(raw, "id", int, where),
            profile_id=_field(raw, "profile_id", int, where),
            placement=_placement_from(_field(raw, "placement", list, where), where),
            held_by_client=_field(raw, "held_by_client", bool, where),
            compute_instances=[
                SimComputeInstance.from_dict(ci, f"{where}.compute_instances[{i}]")
                for i, ci in enumerate(_field(raw, "compute_instances", list, where))
            ],
        )

    def compute_instance(self, ci_id: int) -> SimComputeInstance | None:
        return next((ci for ci in self.compute_instances if ci.id == ci_id), None)


@dataclass(slots=True)
class SimGpu:
    """One physical GPU. `processes` are whole-GPU processes (only possible while MIG is disabled)."""

    model_key: str
    uuid: str
    pci_bus_id: str
    mig_current: int = MIG_DISABLE
    mig_pending: int = MIG_DISABLE
    client_attached: bool = False
    reset_supported: bool = True
    # Ampere: False (default) = the mode stays pending until an explicit reset (what mig-parted
    # plans for); True = the driver's own reset succeeds when the GPU is idle (docs/nvml.md §4).
    ampere_auto_reset: bool = False
    mig_uuid_serial: int = 0
    processes: list[SimProcess] = field(default_factory=list)
    gpu_instances: list[SimGpuInstance] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_key": self.model_key,
            "uuid": self.uuid,
            "pci_bus_id": self.pci_bus_id,
            "mig_current": self.mig_current,
            "mig_pending": self.mig_pending,
            "client_attached": self.client_attached,
            "reset_supported": self.reset_supported,
            "ampere_auto_reset": self.ampere_auto_reset,
            "mig_uuid_serial": self.mig_uuid_serial,
            "processes": [p.to_dict() for p in self.processes],
            "gpu_instances": [gi.to_dict() for gi in self.gpu_instances],
        }

    @classmethod
    def from_dict(cls, raw: Any, where: str = "gpu") -> SimGpu:
        return cls(
            model_key=_field(raw, "model_key", str, where),
            uuid=_field(raw, "uuid", str, where),
            pci_bus_id=_field(raw, "pci_bus_id", str, where),
            mig_current=_field(raw, "mig_current", int, where),
            mig_pending=_field(raw, "mig_pending", int, where),
            client_attached=_field(raw, "client_attached", bool, where),
            reset_supported=_field(raw, "reset_supported", bool, where),
            ampere_auto_reset=_field(raw, "ampere_auto_reset", bool, where),
            mig_uuid_serial=_field(raw, "mig_uuid_serial", int, where),
            processes=[
                SimProcess.from_dict(p, f"{where}.processes[{i}]")
                for i, p in enumerate(_field(raw, "processes", list, where))
            ],
            gpu_instances=[
                SimGpuInstance.from_dict(gi, f"{where}.gpu_instances[{i}]")
                for i, gi in enumerate(_field(raw, "gpu_instances", list, where))
            ],
        )

    def gpu_instance(self, gi_id: int) -> SimGpuInstance | None:
        return next((gi for gi in self.gpu_instances if gi.id == gi_id), None)


@dataclass(slots=True)
class SimNodeState:
    gpus: list[SimGpu]
    gi_id_map: str = "standard"
    profiles_queryable_when_disabled: bool = False
    auto_placement: str = "inferred"
    # Whether a 1g double-memory GI (1g.20gb on H100) offers CI profile 1_SLICE beside its default
    # 1_SLICE_REV1 [?: RM's listing rule says yes (docs/nvml.md §8) and NVIDIA's own
    # all-1g.20gb config needs it, as mig-parted creates 1_SLICE there; never captured on hardware].
    one_slice_ci_beside_rev1: bool = True

    def __post_init__(self) -> None:
        _check_choice("gi_id_map", self.gi_id_map, GI_ID_MAPS)
        _check_choice("auto_placement", self.auto_placement, AUTO_PLACEMENT_RULES)

    @classmethod
    def create(
        cls,
        models: Sequence[GpuModel],
        *,
        gi_id_map: str = "standard",
        profiles_queryable_when_disabled: bool = False,
        mig_enabled: bool = False,
        auto_placement: str = "inferred",
    ) -> SimNodeState:
        mode = MIG_ENABLE if mig_enabled else MIG_DISABLE
        gpus = [
            SimGpu(model.key, gpu_uuid(i), pci_bus_id(i), mig_current=mode, mig_pending=mode)
            for i, model in enumerate(models)
        ]
        return cls(gpus, gi_id_map, profiles_queryable_when_disabled, auto_placement)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": STATE_FORMAT_VERSION,
            "gi_id_map": self.gi_id_map,
            "profiles_queryable_when_disabled": self.profiles_queryable_when_disabled,
            "auto_placement": self.auto_placement,
            "one_slice_ci_beside_rev1": self.one_slice_ci_beside_rev1,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
        }

    @classmethod
    def from_dict(cls, raw: Any) -> SimNodeState:
        version = _field(raw, "format_version", int, "state")
        if version != STATE_FORMAT_VERSION:
            raise StateFormatError(f"state.format_version is {version}; this simulator reads {STATE_FORMAT_VERSION}")
        return cls(
            gpus=[SimGpu.from_dict(g, f"gpus[{i}]") for i, g in enumerate(_field(raw, "gpus", list, "state"))],
            gi_id_map=_field(raw, "gi_id_map", str, "state"),
            profiles_queryable_when_disabled=_field(raw, "profiles_queryable_when_disabled", bool, "state"),
            auto_placement=_field(raw, "auto_placement", str, "state"),
            # Optional: state files written before the setting existed mean the default.
            one_slice_ci_beside_rev1=_field(raw, "one_slice_ci_beside_rev1", bool, "state")
            if "one_slice_ci_beside_rev1" in raw
            else True,
        )

    def save(self, path: Path, *, shared: bool = False) -> None:
        """Write atomically (a uniquely named temporary file, fsync, rename) so a crash never leaves a
        half-written node; StorageError (path, errno) when the disk refuses, with no temporary file left.

        `shared`: the node many processes change through the fake library, saved after every
        mutating call: compact JSON and no fsync (the rename still makes it safe against a killed
        process; a power cut is not what the simulator simulates), ten times cheaper."""
        data = self.to_dict()
        text = json.dumps(data, separators=(",", ":")) if shared else json.dumps(data, indent=2, sort_keys=True)
        payload = text.encode("utf-8")
        write_atomically(path, payload, what="the simulated node", sync_directory=False, sync_file=not shared)

    @classmethod
    def load(cls, path: Path) -> SimNodeState:
        sweep_stale_temp_files(path)  # left by a writer killed mid-save
        try:
            raw = decode_json(read_bounded(path))
        except json.JSONDecodeError as exc:
            raise StateFormatError(f"simulator state file {path} is not JSON: {exc}") from exc
        return cls.from_dict(raw)


def _check_choice(name: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise StateFormatError(f"{name} {value!r} is not valid; valid values: {', '.join(valid)}")
