"""What the GPU Operator's components need around a MIG change, step for step as its mig-manager does.

NVIDIA's mig-manager (mig-parted deployments/container/reconfigure-mig.sh), after pausing the
operands and before the GPUs change:
  1. deletes the operator's CUDA and device-plugin validator pods on the node (workloads that may
     hold a GPU: `app=nvidia-cuda-validator`, `app=nvidia-device-plugin-validator`);
  2. stops the host GPU clients (systemd units) it is told about.
After the GPUs hold the new layout, and before the operands are resumed:
  3. with CDI enabled: runs `nvidia-smi` (the driver creates missing device nodes), then
     `nvidia-ctk system create-device-nodes --control-devices`, then regenerates the management
     CDI spec (`nvidia-ctk cdi generate --mode=management`, vendor management.nvidia.com, class gpu)
     into /var/run/cdi/management.nvidia.com-gpu.yaml;
  4. starts the host GPU clients again;
  5. deletes the operator validator pod (`app=nvidia-operator-validator`), whose DaemonSet
     re-creates it and so re-runs every validation against the new MIG devices.
Resuming the operands (device plugin, GFD, DCGM) is attempt.window.deviceplugin's job, right after this.

Each step is optional (flags); the gpu-operator overlay turns them on. Where the driver root in
this container differs from the driver root on the host (a host-installed driver mounted at
/host), the spec's paths are rewritten with `nvidia-ctk cdi transform root`, as mig-manager does.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from migagent.attempt.window.services import HostClients, run_command
from migagent.errors import PermanentError
from migagent.node.port import KubePort

log = structlog.get_logger(__name__)

VALIDATORS_BEFORE_CHANGE = ("app=nvidia-cuda-validator", "app=nvidia-device-plugin-validator")
OPERATOR_VALIDATOR = "app=nvidia-operator-validator"
MANAGEMENT_SPEC = Path("/var/run/cdi/management.nvidia.com-gpu.yaml")


class CommandOutcome(Protocol):
    @property
    def returncode(self) -> int: ...

    @property
    def output(self) -> str: ...


Runner = Callable[[Sequence[str]], CommandOutcome]


class PostChangeError(PermanentError):
    """A step the operator's components need after a change failed (CDI spec, validator restart)."""


@dataclass(frozen=True)
class CdiSettings:
    """How to regenerate the management CDI spec (`nvidia-ctk cdi generate --mode=management`)."""

    driver_root: str = "/run/nvidia/driver"
    """The driver's root in this container."""
    host_driver_root: str | None = None
    """The same directory on the host, when it differs (host driver at / mounted at /host)."""
    output: Path = MANAGEMENT_SPEC
    nvidia_ctk: str = "nvidia-ctk"
    nvidia_smi: tuple[str, ...] = ("nvidia-smi",)
    """argv that runs nvidia-smi (e.g. `chroot /run/nvidia/driver nvidia-smi`)."""
    cdi_hook_path: str | None = None
    """Host path of nvidia-cdi-hook, written into the spec (the operator's toolkit install dir)."""


@dataclass(frozen=True)
class ChangeContext:
    """What `before_change` did, for `after_change` and the undo."""

    stopped_units: tuple[str, ...] = ()


class PostChangeSteps:
    """The operator-facing steps around a change; see the module docstring for the order."""

    def __init__(
        self,
        *,
        api: KubePort,
        namespace: str,
        restart_validators: bool = False,
        cdi: CdiSettings | None = None,
        host_clients: HostClients | None = None,
        run: Runner = run_command,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._restart_validators = restart_validators
        self._cdi = cdi
        self._host_clients = host_clients
        self._run = run

    @property
    def stops_host_clients(self) -> bool:
        return self._host_clients is not None and bool(self._host_clients.units)

    def before_change(self) -> ChangeContext:
        if self._restart_validators:
            for selector in VALIDATORS_BEFORE_CHANGE:
                self._delete_pods(selector)
        stopped = self._host_clients.stop_all() if self._host_clients is not None else ()
        return ChangeContext(stopped_units=stopped)

    def after_change(self, context: ChangeContext) -> None:
        if self._cdi is not None:
            self._regenerate_cdi(self._cdi)
        self.restart_host_clients(context)
        if self._restart_validators:
            self._delete_pods(OPERATOR_VALIDATOR)

    def restart_host_clients(self, context: ChangeContext) -> None:
        """Start the units `before_change` stopped (also the undo of a failed attempt)."""
        if self._host_clients is None or not context.stopped_units:
            return
        failed = self._host_clients.start_all(context.stopped_units)
        if failed:
            raise PostChangeError(f"host GPU clients did not start again: {', '.join(failed)}")

    def _delete_pods(self, selector: str) -> None:
        pods = self._api.list_pods_on_node(label_selector=selector, namespace=self._namespace)
        for pod in pods:
            self._api.delete_pod(pod.ref)
        if pods:
            log.info("operator_pods_restarted", selector=selector, pods=[str(p.ref) for p in pods])

    def _regenerate_cdi(self, cdi: CdiSettings) -> None:
        self._check([*cdi.nvidia_smi])
        dev_root = f"--dev-root={cdi.driver_root}"
        self._check([cdi.nvidia_ctk, "system", "create-device-nodes", "--control-devices", dev_root])
        cdi.output.parent.mkdir(parents=True, exist_ok=True)
        moved = cdi.host_driver_root is not None and cdi.host_driver_root != cdi.driver_root
        with tempfile.TemporaryDirectory(prefix="migagent-cdi-") as scratch:
            generated = Path(scratch) / "management.yaml" if moved else cdi.output
            generate = [
                cdi.nvidia_ctk, "cdi", "generate", "--mode=management",
                f"--driver-root={cdi.driver_root}", dev_root,
                "--vendor=management.nvidia.com", "--class=gpu", f"--output={generated}",
            ]
            if cdi.cdi_hook_path:
                generate.append(f"--nvidia-cdi-hook-path={cdi.cdi_hook_path}")
            self._check(generate)
            if moved:
                self._check([
                    cdi.nvidia_ctk, "cdi", "transform", "root", f"--from={cdi.driver_root}",
                    f"--to={cdi.host_driver_root}", f"--input={generated}", f"--output={cdi.output}",
                ])
        log.info("cdi_spec_regenerated", output=str(cdi.output))

    def _check(self, argv: Sequence[str]) -> None:
        result = self._run(argv)
        if result.returncode != 0:
            detail = f": {result.output}" if result.output else ""
            raise PostChangeError(f"`{' '.join(argv)}` failed (exit {result.returncode}){detail}")
