"""`migagent rollout`: change the layout of a node pool in waves, budgeted in GPUs, with a canary, a
halt after --failure-budget failed nodes, and a resume.

    plan        what each node in scope would do (GPUs, GIs, evicted pods, resets), the waves, totals
                and the capacity before, during the worst wave and after (nothing is written)
    start       create the rollout's state object (ConfigMap migagent-rollout-NAME in namespace
                migagent-rollouts) and drive it; an existing one is resumed where it stopped
    status      the state of one rollout (or the list of all), from anywhere
    pause       no new wave starts; nodes in flight finish
    resume      a paused or halted rollout runs on (a halted one after its fault is cleared)
    undo        every node the rollout relabelled goes back to its previous layout, with the same budgets
    controller  drive every running rollout from inside the cluster (deploy/components/rollout-controller)

The one label it writes is `nvidia.com/mig.config`, and only from the value it expects: a node whose
label someone else changes is left alone (and said to be); each node's agent does the change and reports.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from migagent.cli.advise import add_strategy_flag, advised_state
from migagent.cli.commands import summary
from migagent.cli.pool_args import file_layouts, pool_api, pool_layouts
from migagent.cli.rollout_flags import (
    OneLineParser,
    add_budgets,
    add_cluster,
    add_driving,
    add_name,
    add_scope,
    add_start,
)
from migagent.cli.rollout_plan import print_plan, rollout_preview
from migagent.cli.rollout_status import run_status
from migagent.cli.rollout_view import JsonEvents, LiveTable, ending_lines
from migagent.cli.signals import signals_handled
from migagent.cli.values import POSITIVE_SECONDS
from migagent.clock import Clock, SystemClock
from migagent.errors import TransientError
from migagent.kube.rollout_api import RolloutApi
from migagent.layout.parse import select_config
from migagent.node.port import NodeView
from migagent.rollout.codec import decode, encode
from migagent.rollout.controller import run_controller
from migagent.rollout.driver import RolloutDriver
from migagent.rollout.errors import HeldElsewhereError, RolloutError
from migagent.rollout.ownership import layout_label
from migagent.rollout.port import RolloutListener, create, new_holder
from migagent.rollout.scope import Targets, initial_state, one_layout, resumed, undo_state
from migagent.rollout.spec import ADVICE_LAYOUT, RolloutSpec
from migagent.rollout.state import Layouts, Mode, NodeStatus, Phase, RolloutState

_CONFLICT_TRIES = 10


def _api(args: argparse.Namespace, clock: Clock) -> RolloutApi:
    return pool_api(args, clock)


def layouts_of(args: argparse.Namespace, api: RolloutApi, given: Layouts | None) -> Layouts:
    layouts = pool_layouts(api, given)
    select_config(layouts.file, args.layout)  # an unknown -c: "did you mean", as apply and validate say it
    return layouts


def targets_of(args: argparse.Namespace, nodes: Sequence[NodeView]) -> Targets:
    """The rollout's input: which layout each selected node moves to (`-c`: the same for all;
    `--from-advice` hands its own per node, cli/advise.advised_state)."""
    return one_layout(nodes, args.layout)


# --- plan ---------------------------------------------------------------------------------------------


def _run_plan(args: argparse.Namespace) -> int:
    given = file_layouts(args)
    api = _api(args, SystemClock())
    result = rollout_preview(args, api, layouts_of(args, api, given))
    print_plan(result, as_json=args.output == "json")
    return 0


# --- start, resume, undo: drive ------------------------------------------------------------------


def _listener(args: argparse.Namespace, clock: Clock) -> RolloutListener:
    if args.output == "json" or (args.output is None and not sys.stdout.isatty()):
        return JsonEvents(clock)
    return LiveTable(clock, redraw=sys.stdout.isatty())


def _drive(args: argparse.Namespace, api: RolloutApi, clock: Clock, holder: str) -> int:
    listener = _listener(args, clock)
    driver = RolloutDriver(api, args.name, clock=clock, listener=listener, poll_s=args.poll, holder=holder)
    try:
        final = driver.run()
    except HeldElsewhereError as error:
        print(f"migagent rollout: {error}", file=sys.stderr)
        return 1
    return _ending(final, listener)


def _ending(state: RolloutState, listener: RolloutListener) -> int:
    if isinstance(listener, JsonEvents):
        listener.event("summary", rollout=state.name, phase=str(state.phase), mode=str(state.mode),
                       reasons=list(state.reasons),
                       nodes={r.node: {"status": str(r.status), "wave": r.wave, "predicted": list(r.predicted),
                                       "evicted": list(r.evicted), "reason": r.reason} for r in state.nodes.values()})
    else:
        for line in ending_lines(state):
            print(line)
    return 1 if state.phase is Phase.HALTED or state.in_status(NodeStatus.FAILED) else 0


def _existing(args: argparse.Namespace, spec: RolloutSpec, state: RolloutState) -> None:
    """A start of a rollout that exists resumes it, if it is the same rollout and may run on."""
    differs = [f"{theirs} (not {ours})" for theirs, ours in zip(state.spec.flags(), spec.flags(), strict=True)
               if theirs != ours]
    if differs:
        raise RolloutError(
            f"rollout {args.name} exists with {', '.join(differs)}; start it with those (it resumes), or a new NAME"
        )
    if state.phase is Phase.HALTED:
        raise RolloutError(
            f"rollout {args.name} is halted ({'; '.join(state.reasons)}); clear the fault, then"
            f" `migagent rollout resume {args.name}`"
        )


def _run_start(args: argparse.Namespace) -> int:
    given = file_layouts(args)
    clock = SystemClock()
    return run_start(args, _api(args, clock), clock, given)


def run_start(args: argparse.Namespace, api: RolloutApi, clock: Clock, given: Layouts | None) -> int:
    """Create the rollout (or find it) and drive it; of two starts that find no object, one drives and the
    other is told who does (AlreadyStartedError)."""
    holder = new_holder()
    spec = RolloutSpec(
        selector=args.selector, layout=ADVICE_LAYOUT if args.from_advice else args.layout,
        max_unavailable=args.max_unavailable, canary=args.canary, soak_s=args.soak,
        failure_budget=args.failure_budget, lease_s=args.lease,
    )
    stored = api.read_state(args.name)
    if stored is None:
        if args.from_advice:
            state = advised_state(args, spec, clock, given)
        else:
            layouts = layouts_of(args, api, given)
            nodes = api.list_nodes(args.selector)
            state = initial_state(args.name, spec, layouts, nodes, targets_of(args, nodes))
        create(api, state, holder=None if args.detach else holder, now=clock.wall())
    else:
        state = decode(args.name, stored)
        _existing(args, spec, state)
        if state.phase is Phase.DONE:
            print(f"rollout {args.name} is done{' (undone)' if state.mode is Mode.UNDO else ''}")
            return 0
    if args.detach:
        print(f"rollout {args.name} created; a `migagent rollout controller` drives it")
        return 0
    return _drive(args, api, clock, holder)


def _update(api: RolloutApi, name: str, change: Callable[[RolloutState], RolloutState]) -> RolloutState:
    """Read, change, write conditionally; again on a conflict."""
    for _ in range(_CONFLICT_TRIES):
        stored = api.read_state(name)
        if stored is None:
            raise RolloutError(f"no rollout {name}")
        state = decode(name, stored)
        changed = change(state)
        try:
            version = api.replace_state(name, encode(changed), state.resource_version)
        except TransientError:
            continue
        return replace(changed, resource_version=version)
    raise RolloutError(f"rollout {name}: its state kept changing; try again")


def _run_pause(args: argparse.Namespace) -> int:
    api = _api(args, SystemClock())

    def pause(state: RolloutState) -> RolloutState:
        if state.phase is not Phase.RUNNING:
            raise RolloutError(f"rollout {args.name} is {state.phase}, not running")
        return replace(state, phase=Phase.PAUSED)

    _update(api, args.name, pause)
    print(f"rollout {args.name} paused: no new wave starts; nodes in flight finish")
    return 0


def _then_drive(args: argparse.Namespace, api: RolloutApi, clock: Clock, state: RolloutState, done: str) -> int:
    print(done)
    holder = new_holder()
    if args.detach or state.held_by_other(holder, clock.wall()):
        if state.holder:
            print(f"driven by {state.holder}")
        return 0
    return _drive(args, api, clock, holder)


def _run_resume(args: argparse.Namespace) -> int:
    clock = SystemClock()
    api = _api(args, clock)

    def resume(state: RolloutState) -> RolloutState:
        if state.phase not in (Phase.PAUSED, Phase.HALTED):
            raise RolloutError(f"rollout {args.name} is {state.phase}: nothing to resume")
        return resumed(state)

    state = _update(api, args.name, resume)
    return _then_drive(args, api, clock, state, f"rollout {args.name} resumed")


def _run_undo(args: argparse.Namespace) -> int:
    clock = SystemClock()
    api = _api(args, clock)

    def undo(state: RolloutState) -> RolloutState:
        return undo_state(state, {node.name: layout_label(node) for node in api.list_nodes(state.spec.selector)})

    state = _update(api, args.name, undo)
    back = len(state.in_status(NodeStatus.PENDING))
    kept = len(state.in_status(NodeStatus.OVERRIDDEN))
    note = f"; {kept} changed by someone else, left as they are" if kept else ""
    return _then_drive(args, api, clock, state,
                       f"rollout {args.name}: {back} node(s) go back to their previous layout{note}")


def _run_status(args: argparse.Namespace) -> int:
    clock = SystemClock()
    return run_status(args, _api(args, clock), clock)


# --- controller ----------------------------------------------------------------------------------------


def _run_controller(args: argparse.Namespace) -> int:
    clock = SystemClock()
    stop = threading.Event()
    if args.run_for is not None:
        threading.Timer(args.run_for, stop.set).start()
    with signals_handled({signal.SIGTERM: stop.set, signal.SIGINT: stop.set}):
        run_controller(_api(args, clock), clock=clock, listener=JsonEvents(clock), poll_s=args.poll, stop=stop)
    return 0


# --- flags --------------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("rollout", help=summary("rollout"), description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=OneLineParser)

    plan = verbs.add_parser("plan", help="what each node would do, the waves, and the capacity meanwhile")
    add_scope(plan)
    plan.add_argument("-o", "--output", choices=("table", "json"), default="table")
    add_budgets(plan)
    add_cluster(plan, layouts=True)
    plan.set_defaults(handler=_run_plan)

    start = verbs.add_parser("start", help="create the rollout and drive it (resumes an existing one)")
    add_name(start)
    add_scope(start, from_advice=True)
    add_strategy_flag(start)
    add_budgets(start)
    add_start(start)
    add_driving(start)
    add_cluster(start, layouts=True)
    start.set_defaults(handler=_run_start)

    for verb, handler, text in (("resume", _run_resume, "a paused or halted rollout runs on (and is driven here)"),
                                ("undo", _run_undo, "relabel every changed node to its previous layout, in waves")):
        sub = verbs.add_parser(verb, help=text)
        add_name(sub)
        add_driving(sub)
        add_cluster(sub)
        sub.set_defaults(handler=handler)

    pause = verbs.add_parser("pause", help="no new wave starts; nodes in flight finish")
    add_name(pause)
    add_cluster(pause)
    pause.set_defaults(handler=_run_pause)

    status = verbs.add_parser("status", help="one rollout's state (or every rollout's headline)")
    add_name(status, optional=True)
    status.add_argument("-o", "--output", choices=("table", "json"), default="table")
    add_cluster(status)
    status.set_defaults(handler=_run_status)

    controller = verbs.add_parser("controller", help="drive every running rollout from inside the cluster")
    controller.add_argument("--poll", type=POSITIVE_SECONDS, default=2.0, metavar="SECONDS", help="how often to look")
    controller.add_argument("--run-for", type=POSITIVE_SECONDS, default=None, metavar="SECONDS",
                            help=argparse.SUPPRESS)
    controller.set_defaults(handler=_run_controller, log_level=logging.INFO)
    add_cluster(controller)
