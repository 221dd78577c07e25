"""`migagent plan`, `apply` and `assert`: mig-parted's verbs, flags and messages, on our engine.

`plan` shows what an apply would do (offline on empty catalog GPUs with --gpu-model, else against
the node); `apply` runs mig-parted's hook sequence around the journaled engine; `assert` checks
that the selected layout is applied on the GPUs it covers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from migagent.cli.apply_outcome import StopRequested, StopSignals, finished, print_report, stopped
from migagent.cli.commands import summary
from migagent.cli.conflicts import Conflict, refuse_together
from migagent.cli.flags import add_output_argument
from migagent.cli.layout_args import add_config_file_argument, add_selected_config_argument, read_layout
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
from migagent.cli.signals import signals_handled
from migagent.cli.values import env_flag
from migagent.clock import SystemClock
from migagent.errors import UsageError
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.layout.parse import select_config
from migagent.layout.resolve import check_listed_devices, identity_of, resolve_config, resolve_entries
from migagent.layout.spec import LayoutFile
from migagent.planning import empty_observation, plan, plan_to_json, render_plan
from migagent.reconcile.assertion import config_mismatches, mode_mismatches
from migagent.reconcile.hooks import HookRunner, flag_environment, load_hooks_file
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.ports import NodeDriver
from migagent.reconcile.session import ApplySession, RebootPendingError
from migagent.sim.spec import NodeSpecError, parse_node_spec

EXIT_REBOOT_REQUESTED = 3


def _desired_on_node(layout: LayoutFile, name: str | None, observation: Observation) -> DesiredNode:
    return resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus])


def _config_name(layout: LayoutFile, name: str | None) -> str:
    select_config(layout, name)  # raises the mig-parted style error for a missing or ambiguous name
    return name if name is not None else layout.names[0]


# -- plan -------------------------------------------------------------------------------------------


def _offline_observation(specs: list[str]) -> Observation:
    try:
        models = [model for spec in specs for model in parse_node_spec(spec)]
    except NodeSpecError as exc:
        raise UsageError(f"--gpu-model: {exc}") from exc
    return empty_observation(models)


def _run_plan(args: argparse.Namespace) -> int:
    layout = read_layout(args.config_file)
    name = _config_name(layout, args.selected_config)
    if args.gpu_model:
        observation = _offline_observation(args.gpu_model)
        identities = [identity_of(gpu) for gpu in observation.gpus]
        entries = select_config(layout, name)
        check_listed_devices(layout.path, name, entries, identities)  # the offline node's GPUs are 0..n-1
        desired = resolve_entries(entries, identities, config_name=name)
    else:
        with open_node(args) as driver:
            observation = driver.observe()
        desired = _desired_on_node(layout, name, observation)
    result = plan(observation, desired)
    if args.output == "json":
        print(json.dumps(plan_to_json(result, observation), indent=2))
    else:
        print(f"config {name}:")
        print(render_plan(result, observation), end="")
    if not desired.gpus:
        print(f"warning: config {name} selects none of the GPUs planned for", file=sys.stderr)
    return 0


# -- apply ------------------------------------------------------------------------------------------


def _hook_runner(args: argparse.Namespace, config_name: str) -> HookRunner | None:
    if not args.hooks_file:
        return None
    env = flag_environment(
        config_file=args.config_file,
        selected_config=config_name,
        hooks_file=args.hooks_file,
        skip_reset=args.skip_reset,
        mode_only=args.mode_only,
    )
    return HookRunner(load_hooks_file(Path(args.hooks_file)), flag_env=env)


def _engine(args: argparse.Namespace, driver: NodeDriver) -> ApplyEngine:
    return ApplyEngine(
        driver,
        journal_for(args),
        clock=SystemClock(),
        allow_reboot=args.allow_reboot,
        reboot_requester=reboot_requester_for(args),
        skip_reset=args.skip_reset,
    )


def _run_apply(args: argparse.Namespace) -> int:
    layout = read_layout(args.config_file)
    name = _config_name(layout, args.selected_config)
    hooks = _hook_runner(args, name)
    stop = StopSignals()
    with state_locked(args, "migagent apply"), open_node(args) as driver, signals_handled(stop.actions()):
        desired = _desired_on_node(layout, name, driver.observe())
        engine = _engine(args, driver)
        session = ApplySession(engine=engine, observe=driver.observe, hooks=hooks, checkpoint=stop.checkpoint)
        try:
            report = session.run(desired, config_name=name, mode_only=args.mode_only)
        except RebootPendingError as exc:
            print(f"migagent apply: {exc}", file=sys.stderr)
            return EXIT_REBOOT_REQUESTED
        except StopRequested:
            return stopped(stop, engine)
        after = driver.observe()  # names the profiles of GPUs whose MIG mode just changed
    print_report(report, after)
    print("MIG mode settings applied successfully" if args.mode_only else "MIG configuration applied successfully")
    return finished(stop)


# -- assert -----------------------------------------------------------------------------------------


def _run_assert(args: argparse.Namespace) -> int:
    layout = read_layout(args.config_file)
    name = _config_name(layout, args.selected_config)
    if args.valid_config:
        print("Selected MIG configuration is valid")
        return 0
    with open_node(args) as driver:
        observation = driver.observe()
    desired = _desired_on_node(layout, name, observation)
    check = mode_mismatches if args.mode_only else config_mismatches
    reasons = check(observation, desired)
    if reasons:
        for reason in reasons:
            print(reason, file=sys.stderr)
        print("Assertion failure: selected configuration not currently applied", file=sys.stderr)
        return 1
    if args.mode_only:
        print("Selected MIG mode settings from configuration currently applied")
    else:
        print("Selected MIG configuration currently applied")
    return 0


# -- registration -----------------------------------------------------------------------------------


def _layout_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_file_argument(parser)
    add_selected_config_argument(parser)


def _mode_only_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m",
        "--mode-only",
        action="store_true",
        default=env_flag("MIG_PARTED_MODE_CHANGE_ONLY"),
        help="only the MIG mode part (env MIG_PARTED_MODE_CHANGE_ONLY)",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register_plan(subparsers)
    register_apply(subparsers)
    register_assert(subparsers)


def register_plan(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("plan", help=summary("plan"))
    _layout_arguments(parser)
    parser.add_argument(
        "--gpu-model",
        action="append",
        metavar="KEY",
        help="plan offline on empty GPUs of these catalog models (repeatable; '2xA100-40GB' gives two)",
    )
    add_output_argument(parser, choices=("text", "json"), default="text")
    add_node_arguments(parser)
    refuse_together(parser, Conflict(
        "--gpu-model", ("--simulate", "--state", "--driver-root"),
        "--gpu-model plans offline on empty catalog GPUs, the other names the node to plan on",
    ))
    parser.set_defaults(handler=_run_plan)


def register_apply(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("apply", help=summary("apply"))
    _layout_arguments(parser)
    parser.add_argument(
        "-k",
        "--hooks-file",
        default=os.environ.get("MIG_PARTED_HOOKS_FILE"),
        help="mig-parted hooks file (env MIG_PARTED_HOOKS_FILE)",
    )
    parser.add_argument(
        "-s",
        "--skip-reset",
        action="store_true",
        default=env_flag("MIG_PARTED_SKIP_RESET"),
        help="leave a MIG mode change pending instead of resetting the GPU (env MIG_PARTED_SKIP_RESET)",
    )
    _mode_only_argument(parser)
    parser.add_argument(
        "--journal-dir",
        default=os.environ.get("MIGAGENT_JOURNAL_DIR"),
        help=f"where progress is journaled for crash recovery (env MIGAGENT_JOURNAL_DIR; default"
        f" {DEFAULT_JOURNAL_DIR}; next to --state for a simulated node, next to MIGAGENT_FAKE_NVML_STATE for the"
        " fake NVML library)",
    )
    add_reboot_arguments(parser)
    add_lock_arguments(parser)
    add_node_arguments(parser)
    refuse_together(parser, Conflict(
        "--skip-reset", ("--allow-reboot",),
        "--skip-reset leaves a MIG mode change pending until the next reset or reboot, --allow-reboot reboots the"
        " node to activate it now",
    ))
    parser.set_defaults(handler=_run_apply, progress=True)  # each step as it starts and ends, see progress_log


def register_assert(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("assert", help=summary("assert"))
    _layout_arguments(parser)
    _mode_only_argument(parser)
    parser.add_argument(
        "-a",
        "--valid-config",
        action="store_true",
        default=env_flag("MIG_PARTED_VALID_CONFIG"),
        help="only check that the file parses and the config exists (env MIG_PARTED_VALID_CONFIG)",
    )
    add_node_arguments(parser)
    refuse_together(parser, Conflict(
        "--valid-config", ("--simulate", "--state", "--driver-root"),
        "--valid-config checks the file alone and reads no node, the other asks about the node",
    ))
    parser.set_defaults(handler=_run_assert)
