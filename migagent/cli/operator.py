"""`migagent agent` flags for GPU Operator nodes: ready markers, CDI spec, validator, host GPU clients.

Each is off unless asked for; deploy/overlays/gpu-operator turns them on (see attempt.window.post_change
and loops.operator_ready for what they do and why, step for step against NVIDIA's mig-manager).
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence
from pathlib import Path

from migagent.attempt.report.status import StatusReporter
from migagent.attempt.window.post_change import MANAGEMENT_SPEC, CdiSettings, PostChangeSteps
from migagent.attempt.window.services import CommandResult, HostClients, SystemctlServiceManager, run_command
from migagent.cli.flags import add_host_clients_argument
from migagent.cli.values import POSITIVE_SECONDS
from migagent.clock import Clock
from migagent.kube.adapter import KubeApi
from migagent.loops.operator_ready import DEFAULT_VALIDATIONS_DIR, wait_for_ready_markers
from migagent.node.names import ConditionReason
from migagent.nvml.driver_root import DEFAULT_DRIVER_ROOT, find_driver_files

HOST_CLIENTS_STATE = Path("/var/lib/migagent/host-clients-stopped.json")


def add_operator_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("GPU Operator nodes (all off by default; the gpu-operator overlay sets them)")
    group.add_argument(
        "--wait-for-operator", action="store_true",
        help=f"before the first NVML call, wait for the operator's driver-ready and toolkit-ready markers"
        f" (in --validations-dir, default {DEFAULT_VALIDATIONS_DIR})",
    )
    group.add_argument(
        "--validations-dir", default=str(DEFAULT_VALIDATIONS_DIR), metavar="DIR",
        help="where the operator's validator writes its ready markers",
    )
    group.add_argument(
        "--operator-ready-timeout", type=POSITIVE_SECONDS, default=600.0, metavar="SECONDS",
        help="how long --wait-for-operator waits before failing (the pod then restarts and waits again)",
    )
    group.add_argument(
        "--cdi", action="store_true",
        help="after a change, regenerate the management CDI spec with nvidia-ctk, as mig-manager does",
    )
    group.add_argument("--cdi-spec", default=str(MANAGEMENT_SPEC), metavar="FILE", help="the spec --cdi writes")
    group.add_argument(
        "--host-driver-root", metavar="DIR",
        help="the driver root as the host sees it, when --driver-root is a different path in this container"
        " (a host driver at / mounted at /host): the CDI spec is rewritten to host paths",
    )
    group.add_argument("--nvidia-cdi-hook-path", metavar="PATH", help="host path of nvidia-cdi-hook for the spec")
    group.add_argument(
        "--nvidia-ctk", default="nvidia-ctk", metavar="PATH",
        help="the nvidia-ctk to run for --cdi (not in the image: the operator's toolkit installs one on the host)",
    )
    group.add_argument(
        "--restart-operator-validator", action="store_true",
        help="delete the operator's CUDA/plugin validator pods before a change and its operator-validator pod"
        " after, so the validations re-run against the new MIG devices (needs pods delete in its namespace)",
    )
    add_host_clients_argument(
        group,
        help_text="comma-separated host systemd units using the GPUs (mig-manager's gpu-clients), stopped before"
        " and started after a change through the host root (--host-root)",
    )
    group.add_argument("--host-root", default="/host", metavar="DIR", help="the host's / mounted in this pod")


def wait_for_operator(args: argparse.Namespace, *, api: KubeApi, clock: Clock, stop: threading.Event) -> None:
    if not args.wait_for_operator:
        return
    status = StatusReporter(api)
    wait_for_ready_markers(
        Path(args.validations_dir),
        timeout_s=args.operator_ready_timeout,
        clock=clock,
        report=lambda message: status.progress(ConditionReason.WAITING_FOR_DRIVER, message),
        stop=stop,
    )


def post_change_from_args(args: argparse.Namespace, api: KubeApi) -> PostChangeSteps | None:
    units = [unit.strip() for unit in args.host_gpu_clients.split(",") if unit.strip()]
    if not (args.cdi or args.restart_operator_validator or units):
        return None
    cdi = None
    if args.cdi:
        driver_root = args.driver_root or DEFAULT_DRIVER_ROOT
        cdi = CdiSettings(
            driver_root=driver_root,
            host_driver_root=args.host_driver_root,
            output=Path(args.cdi_spec),
            nvidia_ctk=args.nvidia_ctk,
            nvidia_smi=find_driver_files(Path(driver_root)).nvidia_smi_argv(),
            cdi_hook_path=args.nvidia_cdi_hook_path,
        )
    clients = None
    if units:
        host_root = args.host_root

        def on_host(argv: Sequence[str]) -> CommandResult:
            return run_command(["chroot", host_root, *argv])

        clients = HostClients(SystemctlServiceManager(run=on_host), units, state_file=HOST_CLIENTS_STATE)
    return PostChangeSteps(
        api=api,
        namespace=args.operator_namespace,
        restart_validators=args.restart_operator_validator,
        cdi=cdi,
        host_clients=clients,
    )
