"""`migagent host`: the long-running host mode run by systemd/migagent-host.service.

Wires the file watch (sources.files), the apply engine with its file journal, the host GPU clients
(systemctl, or a recording stand-in on a simulated node) and sd_notify into `loops.host.HostAgent`,
and turns SIGTERM/SIGINT into a clean stop and SIGHUP into a re-apply.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from migagent.attempt.window.services import (
    HostClients,
    RecordingServiceManager,
    ServiceManager,
    SystemctlServiceManager,
)
from migagent.cli.commands import summary
from migagent.cli.flags import add_host_clients_argument
from migagent.cli.node import (
    DEFAULT_JOURNAL_DIR,
    add_lock_arguments,
    add_node_arguments,
    add_reboot_arguments,
    journal_for,
    open_node,
    reboot_requester_for,
    state_locked,
)
from migagent.cli.signals import CtrlC, signals_handled
from migagent.cli.values import POSITIVE_SECONDS
from migagent.clock import SystemClock
from migagent.layout.parse import load_layout_file
from migagent.loops.host import HostAgent, HostSettings, Selection
from migagent.nvml.driver import GpuDriver
from migagent.plumbing.sdnotify import SdNotifier
from migagent.reconcile.hooks import HookRunner, flag_environment, load_hooks_file
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.retry import RetryPolicy
from migagent.reconcile.session import ApplySession
from migagent.sources.files import FileWatch, read_selected_layout

DEFAULT_LAYOUT_FILE = "/etc/migagent/layouts.yaml"
DEFAULT_SELECTED_LAYOUT_FILE = "/etc/migagent/migagent.env"
DEFAULT_CLIENTS_STATE = "/run/migagent/stopped-clients.json"
_RETRY_MAX_S = 1800.0


def _is_simulated(args: argparse.Namespace) -> bool:
    return bool(args.simulate or args.state)


def _session_factory(
    args: argparse.Namespace, driver: GpuDriver, retry: RetryPolicy
) -> Callable[[str], ApplySession]:
    journal = journal_for(args)  # one journal for the agent's life: a crash mid-apply resumes at restart
    reboot_requester = reboot_requester_for(args)
    hooks = load_hooks_file(Path(args.hooks_file)) if args.hooks_file else None

    def session(config_name: str) -> ApplySession:
        engine = ApplyEngine(
            driver,
            journal,
            clock=SystemClock(),
            allow_reboot=args.allow_reboot,
            reboot_requester=reboot_requester,
            retry=retry,
        )
        runner = None
        if hooks is not None:
            env = flag_environment(
                config_file=args.config_file,
                selected_config=config_name,
                hooks_file=args.hooks_file,
                skip_reset=False,
                mode_only=False,
            )
            runner = HookRunner(hooks, flag_env=env)
        return ApplySession(engine=engine, observe=driver.observe, hooks=runner)

    return session


def _host_clients(args: argparse.Namespace) -> HostClients:
    units = [unit.strip() for unit in args.host_gpu_clients.split(",") if unit.strip()]
    # A simulated node has no real services to stop: record (and log) what would have happened.
    manager: ServiceManager = (
        RecordingServiceManager(active=units) if _is_simulated(args) else SystemctlServiceManager()
    )
    state_file = args.clients_state_file
    if state_file is None:  # a simulated node leaves the real host's /run alone
        state_file = "" if _is_simulated(args) else DEFAULT_CLIENTS_STATE
    state = Path(state_file) if state_file else None
    return HostClients(manager, units, state_file=state)


def _settings(args: argparse.Namespace) -> HostSettings:
    retry = RetryPolicy(
        failure_backoff_initial=args.retry_interval, failure_backoff_max=max(args.retry_interval, _RETRY_MAX_S)
    )
    return HostSettings(debounce_s=args.debounce, retry=retry, max_apply_s=args.max_apply_seconds)


def _run_host(args: argparse.Namespace) -> int:
    layout_file, selected_file = Path(args.config_file), Path(args.selected_layout_file)
    settings = _settings(args)
    notifier = SdNotifier.from_environment(os.environ, pid=os.getpid())

    def read_selection() -> Selection:
        return Selection(layout=load_layout_file(layout_file), config_name=read_selected_layout(selected_file))

    with state_locked(args, "migagent host"), open_node(args, held=False) as driver:
        host = HostAgent(
            observe=driver.observe,
            read_selection=read_selection,
            sessions=_session_factory(args, driver, settings.retry),
            clients=_host_clients(args),
            notifier=notifier,
            clock=SystemClock(),
            settings=settings,
        )
        ctrl_c = CtrlC(host.stop)
        with FileWatch([layout_file, selected_file], on_change=host.request_reconcile), signals_handled(
            {signal.SIGTERM: host.stop, signal.SIGINT: ctrl_c, signal.SIGHUP: host.request_reconcile}
        ):
            host.run()
    return ctrl_c.exit_code()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("host", help=summary("host"))
    env = os.environ.get
    parser.add_argument(
        "-f",
        "--config-file",
        default=env("MIG_PARTED_CONFIG_FILE", DEFAULT_LAYOUT_FILE),
        help=f"layout file, watched (env MIG_PARTED_CONFIG_FILE; default {DEFAULT_LAYOUT_FILE})",
    )
    parser.add_argument(
        "--selected-layout-file",
        default=env("MIGAGENT_SELECTED_LAYOUT_FILE", DEFAULT_SELECTED_LAYOUT_FILE),
        help="file whose MIGAGENT_LAYOUT=<name> line selects the config, watched"
        f" (env MIGAGENT_SELECTED_LAYOUT_FILE; default {DEFAULT_SELECTED_LAYOUT_FILE})",
    )
    add_host_clients_argument(
        parser,
        help_text="comma-separated systemd units using the GPUs, stopped around a change, e.g."
        " nvidia-dcgm.service,dcgm-exporter.service",
    )
    parser.add_argument(
        "--clients-state-file",
        default=env("MIGAGENT_CLIENTS_STATE_FILE"),
        help="where the stopped clients are remembered, to restart them after a crash"
        f" (default {DEFAULT_CLIENTS_STATE}, none on a simulated node; '' to disable)",
    )
    parser.add_argument(
        "-k",
        "--hooks-file",
        default=env("MIG_PARTED_HOOKS_FILE"),
        help="mig-parted hooks file (env MIG_PARTED_HOOKS_FILE)",
    )
    parser.add_argument(
        "--journal-dir",
        default=env("MIGAGENT_JOURNAL_DIR"),
        help=f"apply journal directory (env MIGAGENT_JOURNAL_DIR; default {DEFAULT_JOURNAL_DIR})",
    )
    add_reboot_arguments(parser)
    add_lock_arguments(parser, default_s=600.0)
    parser.add_argument("--debounce", type=POSITIVE_SECONDS, default=2.0, metavar="SECONDS",
                        help="quiet time after a file change")
    parser.add_argument(
        "--retry-interval", type=POSITIVE_SECONDS, default=300.0, metavar="SECONDS",
        help=f"retry a failed apply after this long, doubled per consecutive failure up to {_RETRY_MAX_S:g}s",
    )
    parser.add_argument(
        "--max-apply-seconds",
        type=POSITIVE_SECONDS,
        default=1800.0,
        metavar="SECONDS",
        help="an apply running longer counts as hung: systemd's watchdog then restarts the agent",
    )
    add_node_arguments(parser)
    parser.set_defaults(handler=_run_host, log_level=logging.INFO)
