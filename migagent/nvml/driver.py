"""`GpuDriver`: everything migagent does to GPUs, over the pynvml function surface.

Every public method re-acquires the device handle by index: GI/CI/MIG handles and even device
handles are invalidated by a reset or a mode change, so none is kept between calls. Profile
tables are cached per (GPU UUID, current MIG mode), and the CI profiles offered inside a GI of each
profile per GPU while MIG stays on, since NVML documents them as immutable for the lifetime of a MIG
mode; observations never are.

NVML is initialised only inside a session (`nvml.session`): every public method opens one, and a
caller running a unit of work (an observe, an apply, a doctor run) opens one around all of its
calls with `driver.session()`. `with GpuDriver(...)` holds a session for the block (one-shot CLI
commands); the agent and host mode never do, so an idle agent holds NVML on no device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from ctypes import byref
from dataclasses import replace
from functools import wraps
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

import pynvml
import structlog

from migagent.catalog import CiProfile, Placement, ProfileTable
from migagent.errors import InUseError, MigAgentError, NotSupportedError, PermanentError
from migagent.layout.observed import Observation, ObservedGi, ObservedGpu, ObservedProcess
from migagent.nvml.device import Device, acquire, mode_change_needs_reset, read_mig_mode
from migagent.nvml.errors import classify, nvml_call, nvml_error_name, nvml_probe
from migagent.nvml.floor import check_driver_floor
from migagent.nvml.inspect import (
    GpuReport,
    NodeReport,
    capture_gpu,
    check_capturable,
    inspect_node,
    read_ci_profiles,
)
from migagent.nvml.lib import Handle, NvmlLib
from migagent.nvml.mode import ModeActivation, activation_of
from migagent.nvml.observe import CiProfileCounts, compute_instances_of, read_gpu_instances, read_processes
from migagent.nvml.profiles import read_profile_table
from migagent.nvml.reset import GroupResetRunner, ResetRunner
from migagent.nvml.reset_checks import HostResetChecks
from migagent.nvml.session import NvmlSession

_INSTANCE_GONE = frozenset({pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_ERROR_INVALID_ARGUMENT})
_NODE = "node"
# A setting NVML cannot tell on this GPU or driver: treated as off / unknown, never an error.
_UNKNOWN_SETTING = frozenset(
    {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_NO_PERMISSION}
)
log = structlog.get_logger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


def _in_session(method: Callable[Concatenate[GpuDriver, P], R]) -> Callable[Concatenate[GpuDriver, P], R]:
    """Run the method inside an NVML session (a no-op when the caller already holds one)."""

    @wraps(method)
    def wrapper(self: GpuDriver, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.session():
            return method(self, *args, **kwargs)

    return wrapper


def _changes_the_node(method: Callable[Concatenate[GpuDriver, P], R]) -> Callable[Concatenate[GpuDriver, P], R]:
    """Inside an NVML session, after checking (once) that the driver is new enough to change MIG."""

    @wraps(method)
    def wrapper(self: GpuDriver, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.session():
            self._require_driver_floor()
            return method(self, *args, **kwargs)

    return wrapper


class GpuDriver:
    def __init__(
        self, lib: NvmlLib, *, reset_runner: ResetRunner, reset_checks: HostResetChecks | None = None
    ) -> None:
        self._lib = lib
        self._reset_runner = reset_runner
        # None: no host to inspect (the simulator); production passes the host's /proc and /sys.
        self._reset_checks = reset_checks
        self._profile_tables: dict[tuple[str, bool], ProfileTable] = {}
        self._ci_profiles: dict[str, CiProfileCounts] = {}
        """Per GPU UUID while MIG is on: the CI profiles NVML offers in a GI of each profile."""

        # (GPU UUID, GI profile id) -> the CI profiles NVML reported inside a GI of that profile. They
        # replace the catalog's rows: the catalog serves planning only until a GI of the profile exists.
        self._nvml_ci_profiles: dict[tuple[str, int], tuple[CiProfile, ...]] = {}
        self._sessions = NvmlSession(lib)
        self._driver_floor_checked = False

    @property
    def nvml_held(self) -> bool:
        """Whether this driver holds NVML initialised now (False between units of work)."""
        return self._sessions.held

    def session(self) -> AbstractContextManager[None]:
        """NVML initialised for the block; nested sessions (and every method inside) share one init."""
        return self._sessions.open()

    def __enter__(self) -> GpuDriver:
        self._sessions.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._sessions.release(quiet=exc is not None)

    def _require_driver_floor(self) -> None:
        if self._driver_floor_checked:
            return
        with nvml_call("nvmlSystemGetDriverVersion", _NODE):
            version = str(self._lib.nvmlSystemGetDriverVersion())
        check_driver_floor(version)
        self._driver_floor_checked = True

    # --- reading -------------------------------------------------------------------------------

    @_in_session
    def observe(self) -> Observation:
        """A fresh read of every GPU: identity, MIG mode, GIs at their placements, CIs, processes."""
        with nvml_call("nvmlDeviceGetCount", _NODE):
            count = self._lib.nvmlDeviceGetCount()
        return Observation(gpus=tuple(self.observe_gpu(index) for index in range(count)))

    @_in_session
    def inspect(self) -> NodeReport:
        """Versions, MIG modes and every profile NVML reports, read with query calls only (`doctor`)."""
        return inspect_node(self._lib)

    @_changes_the_node
    def capture(self) -> NodeReport:
        """`doctor --capture`: `inspect`, with every GPU's CI profiles read through a GI of each profile
        created and destroyed in turn. Every GPU is checked (MIG on, no GI) before any is touched."""
        report = inspect_node(self._lib)
        for gpu in report.gpus:
            if gpu.mig_capable:
                check_capturable(self._lib, gpu)
        gpus: tuple[GpuReport, ...] = tuple(
            capture_gpu(self._lib, gpu.index) if gpu.mig_capable else gpu for gpu in report.gpus
        )
        return replace(report, gpus=gpus)

    @_in_session
    def profile_table(self, gpu: int) -> ProfileTable:
        device = acquire(self._lib, gpu)
        mode = read_mig_mode(self._lib, device)
        if mode is None:
            raise NotSupportedError(f"{device.label} is not MIG capable (nvmlDeviceGetMigMode: NOT_SUPPORTED)")
        uuid = self._uuid(device)
        table = self._table(device, uuid=uuid, mig_enabled=mode[0])
        if table is None:
            raise NotSupportedError(_no_table_message(device, mig_enabled=mode[0]))
        return self._with_nvml_ci_profiles(table, uuid=uuid)

    @_in_session
    def observe_gpu(self, index: int) -> ObservedGpu:
        """A fresh read of one GPU (what checking one step of a plan needs)."""
        device = acquire(self._lib, index)
        uuid = self._uuid(device)
        with nvml_call("nvmlDeviceGetName", device.label):
            name = str(self._lib.nvmlDeviceGetName(device.handle))
        mode = read_mig_mode(self._lib, device)
        current, pending = mode if mode is not None else (False, False)
        table = self._table(device, uuid=uuid, mig_enabled=current) if mode is not None else None
        gpu_instances: tuple[ObservedGi, ...] = ()
        processes: tuple[ObservedProcess, ...] = ()
        if current:
            if table is None:
                raise NotSupportedError(_no_table_message(device, mig_enabled=True))
            gpu_instances = read_gpu_instances(self._lib, device, table, self._ci_profiles.setdefault(uuid, {}))
            for gi in gpu_instances:
                self._learn_ci_profiles(device, uuid=uuid, gi_id=gi.id, gi_profile_id=gi.profile_id)
            table = self._with_nvml_ci_profiles(table, uuid=uuid)
        else:
            self._ci_profiles.pop(uuid, None)  # read again once MIG is on again (another mode, maybe a driver)
            # A mode change must not pull the GPU from under these: the safety gate names them.
            processes = read_processes(self._lib, device.handle, what="whole GPU", gpu_label=device.label)
        return ObservedGpu(
            index=index,
            uuid=uuid,
            name=name,
            pci_bus_id=device.pci_bus_id,
            pci_device_id=device.pci_device_id,
            pci_subsystem_id=device.pci_subsystem_id,
            mig_capable=mode is not None,
            mig_current=current,
            mig_pending=pending,
            gpu_instances=gpu_instances,
            processes=processes,
            profiles=table,
            mode_change_needs_reset=mode_change_needs_reset(device.pci_device_id),
        )

    def _uuid(self, device: Device) -> str:
        with nvml_call("nvmlDeviceGetUUID", device.label):
            return str(self._lib.nvmlDeviceGetUUID(device.handle))

    def _table(self, device: Device, *, uuid: str, mig_enabled: bool) -> ProfileTable | None:
        key = (uuid, mig_enabled)
        if key not in self._profile_tables:
            table = read_profile_table(self._lib, device, mig_enabled=mig_enabled)
            if table is None:
                return None
            self._profile_tables[key] = table
        return self._profile_tables[key]

    def _learn_ci_profiles(self, device: Device, *, uuid: str, gi_id: int, gi_profile_id: int) -> None:
        """Read NVML's CI profiles through GI `gi_id` the first time a GI of its profile is seen."""
        if (uuid, gi_profile_id) in self._nvml_ci_profiles:
            return
        handle = self._gpu_instance(device, gi_id)
        try:
            profiles = read_ci_profiles(self._lib, device, handle)
        except NotSupportedError:
            return  # a driver older than R510 cannot list CI placements: the catalog's rows stay
        if profiles:
            self._nvml_ci_profiles[(uuid, gi_profile_id)] = profiles

    def _with_nvml_ci_profiles(self, table: ProfileTable, *, uuid: str) -> ProfileTable:
        if not any((uuid, gi.id) in self._nvml_ci_profiles for gi in table.gi_profiles):
            return table
        learned = [
            replace(gi, ci_profiles=self._nvml_ci_profiles[(uuid, gi.id)])
            if (uuid, gi.id) in self._nvml_ci_profiles
            else gi
            for gi in table.gi_profiles
        ]
        return replace(table, gi_profiles=tuple(learned))

    # --- MIG mode and reset --------------------------------------------------------------------

    @_changes_the_node
    def set_mig_mode(self, gpu: int, *, enabled: bool) -> ModeActivation:
        device = acquire(self._lib, gpu)
        wanted = pynvml.NVML_DEVICE_MIG_ENABLE if enabled else pynvml.NVML_DEVICE_MIG_DISABLE
        what = f"nvmlDeviceSetMigMode({'enable' if enabled else 'disable'})"
        with nvml_call(what, device.label):
            status = int(self._lib.nvmlDeviceSetMigMode(device.handle, wanted))
        # nvml.h: activating a mode may unbind or reset the device; the handle used above may be stale.
        mode = read_mig_mode(self._lib, acquire(self._lib, gpu))
        if mode is None:
            raise NotSupportedError(f"{device.label} is not MIG capable (nvmlDeviceGetMigMode: NOT_SUPPORTED)")
        return activation_of(status, mode=mode, enabled=enabled, what=what, gpu_label=device.label)

    @_changes_the_node
    def reset_gpu(self, gpu: int) -> None:
        """Reset one GPU (destroys its GIs/CIs, applies a pending mode). Invalidates every handle."""
        self.reset_gpus((gpu,))

    @_changes_the_node
    def reset_gpus(self, gpus: Sequence[int]) -> None:
        """Reset GPUs in one `nvidia-smi -r -i A,B,...` (as mig-parted does: NVLink peers reset together).

        What would block the reset (nvidia_drm, persistence mode without persistenced, processes on
        /dev/nvidia*) is checked first and refused with each reason and its fix. `nvidia-smi -r`
        refuses while any NVML client holds the GPU, this process included, so NVML is shut down
        around it and initialised again after (as mig-parted does); no handle survives it.
        """
        devices = [acquire(self._lib, gpu) for gpu in gpus]
        labels = ", ".join(device.label for device in devices)
        if self._reset_checks is not None:
            persistent = [device.pci_bus_id for device in devices if self._persistence_mode_on(device)]
            blockers = self._reset_checks.blockers(persistence_mode_on=persistent)
            if blockers:
                raise InUseError(f"{labels}: a reset would be refused: " + " | ".join(map(str, blockers)))
        with self._sessions.released(labels):
            runner = self._reset_runner
            if len(devices) > 1 and isinstance(runner, GroupResetRunner):
                runner.reset_together([device.pci_bus_id for device in devices])
            else:
                for device in devices:
                    runner.reset(device.pci_bus_id)

    def _persistence_mode_on(self, device: Device) -> bool:
        mode = nvml_probe(
            lambda: self._lib.nvmlDeviceGetPersistenceMode(device.handle),
            absent=_UNKNOWN_SETTING,
            what="nvmlDeviceGetPersistenceMode",
            gpu_label=device.label,
        )
        return mode is not None and int(mode) == pynvml.NVML_FEATURE_ENABLED

    # --- instances -----------------------------------------------------------------------------

    @_changes_the_node
    def create_gpu_instance(self, gpu: int, *, profile_id: int, placement: Placement) -> int:
        device = acquire(self._lib, gpu)
        # pynvml passes `placement` straight to a `const nvmlGpuInstancePlacement_t*` parameter.
        placement_struct = pynvml.c_nvmlGpuInstancePlacement_t(placement.start, placement.size)
        what = f"nvmlDeviceCreateGpuInstanceWithPlacement(profile {profile_id} at {placement})"
        with nvml_call(what, device.label):
            gi = self._lib.nvmlDeviceCreateGpuInstanceWithPlacement(device.handle, profile_id, byref(placement_struct))
        with nvml_call(f"nvmlGpuInstanceGetInfo(new GI of profile {profile_id})", device.label):
            return int(self._lib.nvmlGpuInstanceGetInfo(gi).id)

    @_changes_the_node
    def create_compute_instance(
        self, gpu: int, *, gi_id: int, profile_id: int, placement: Placement | None = None
    ) -> int:
        device = acquire(self._lib, gpu)
        gi = self._gpu_instance(device, gi_id)
        try:
            ci = self._create_ci(device, gi, gi_id=gi_id, profile_id=profile_id, placement=placement)
        except PermanentError:
            # Refused (not a transient error, which the engine retries with the GI in place).
            self._destroy_if_without_cis(device, gi, gi_id=gi_id)
            raise
        with nvml_call(f"nvmlComputeInstanceGetInfo(new CI in GI {gi_id})", device.label):
            return int(self._lib.nvmlComputeInstanceGetInfo(ci).id)

    def _create_ci(
        self, device: Device, gi: Handle, *, gi_id: int, profile_id: int, placement: Placement | None
    ) -> Handle:
        # What NVML offers in this GI is learned before the create: a refused catalog row is then
        # replaced by NVML's own for the next plan (the agent's next attempt resolves with it).
        with nvml_call(f"nvmlGpuInstanceGetInfo(GI {gi_id})", device.label):
            gi_profile_id = int(self._lib.nvmlGpuInstanceGetInfo(gi).profileId)
        self._learn_ci_profiles(device, uuid=self._uuid(device), gi_id=gi_id, gi_profile_id=gi_profile_id)
        if placement is None:
            with nvml_call(f"nvmlGpuInstanceCreateComputeInstance(GI {gi_id}, profile {profile_id})", device.label):
                return self._lib.nvmlGpuInstanceCreateComputeInstance(gi, profile_id)
        placement_struct = pynvml.c_nvmlComputeInstancePlacement_t(placement.start, placement.size)
        what = f"nvmlGpuInstanceCreateComputeInstanceWithPlacement(GI {gi_id}, profile {profile_id} at {placement})"
        with nvml_call(what, device.label):
            return self._lib.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, profile_id, byref(placement_struct))

    def _destroy_if_without_cis(self, device: Device, gi: Handle, *, gi_id: int) -> None:
        """A GI whose first CI could not be created is destroyed in the same step: none is left without CIs."""
        try:
            if compute_instances_of(self._lib, device, gi, gi_id=gi_id):
                return
            with nvml_call(f"nvmlGpuInstanceDestroy(GI {gi_id}, left without CIs)", device.label):
                self._lib.nvmlGpuInstanceDestroy(gi)
        except MigAgentError as exc:
            # The create's own error is the one to report; the next observe shows the GI and plans again.
            log.warning("gi_without_cis_not_destroyed", gpu=device.label, gi_id=gi_id, error=str(exc))
            return
        log.warning("gi_without_cis_destroyed", gpu=device.label, gi_id=gi_id)

    @_changes_the_node
    def destroy_compute_instance(self, gpu: int, *, gi_id: int, ci_id: int) -> None:
        device = acquire(self._lib, gpu)
        gi = self._gpu_instance(device, gi_id)
        ci = _lookup(
            lambda: self._lib.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id),
            what=f"nvmlGpuInstanceGetComputeInstanceById(GI {gi_id}, CI {ci_id})",
            missing=f"compute instance {ci_id} of GPU instance {gi_id}",
            device=device,
        )
        with nvml_call(f"nvmlComputeInstanceDestroy(GI {gi_id}, CI {ci_id})", device.label):
            self._lib.nvmlComputeInstanceDestroy(ci)

    @_changes_the_node
    def destroy_gpu_instance(self, gpu: int, *, gi_id: int) -> None:
        device = acquire(self._lib, gpu)
        gi = self._gpu_instance(device, gi_id)
        with nvml_call(f"nvmlGpuInstanceDestroy(GI {gi_id})", device.label):
            self._lib.nvmlGpuInstanceDestroy(gi)

    def _gpu_instance(self, device: Device, gi_id: int) -> Handle:
        return _lookup(
            lambda: self._lib.nvmlDeviceGetGpuInstanceById(device.handle, gi_id),
            what=f"nvmlDeviceGetGpuInstanceById({gi_id})",
            missing=f"GPU instance {gi_id}",
            device=device,
        )


def _lookup(call: Callable[[], Handle], *, what: str, missing: str, device: Device) -> Handle:
    """A GI/CI handle by id. A missing instance is an error here: the engine checks `is_done` first."""
    try:
        return call()
    except pynvml.NVMLError as exc:
        code = int(exc.value)
        if code in _INSTANCE_GONE:
            raise PermanentError(
                f"{device.label}: {missing} does not exist ({what} answered {nvml_error_name(code)}); "
                "re-observe the GPU before acting on it"
            ) from exc
        raise classify(exc, what=what, gpu_label=device.label) from exc


def _no_table_message(device: Device, *, mig_enabled: bool) -> str:
    if mig_enabled:
        return f"{device.label}: NVML reports no GPU instance profiles although MIG mode is enabled"
    return (
        f"{device.label}: this driver answers no MIG profile queries while MIG mode is disabled and "
        f"the catalog has no model with PCI device id {device.pci_device_id:#010x}; "
        "enable MIG mode first, or add the model to the catalog"
    )
