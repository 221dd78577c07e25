"""`migagent rollout`: change the layout of a node pool in waves, budgeted in GPUs, with a canary, a
halt after --failure-budget failed nodes, and a resume.

    plan        what each node in scope would do (GPUs, GIs, evicted pods, resets), the waves, totals
                and the capacity before, during the worst wave and after (nothing is written)
    start       create the rollout's state object (ConfigMap migagent-rollout-NAME) and drive it; an
                existing one is resumed where it stopped
    status      the state of one rollout (or the list of all), from anywhere
    pause       no new wave starts; nodes in flight finish
    resume      a paused or halted rollout runs on (a halted one after its fault is cleared)
    undo        every node the rollout relabelled goes back to its previous layout, with the same budgets
    controller  drive every running rollout from inside the cluster (deploy/components/rollout-controller)

The one label it writes is `nvidia.com/mig.config`; each node's agent does the change and reports.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace

from migagent.cli.advise import add_strategy_flag, advised_state
from migagent.cli.commands import summary
from migagent.cli.pool_args import layouts_text, pool_api
from migagent.cli.rollout_view import JsonEvents, LiveTable, evictions_report, headline, node_rows, table
from migagent.cli.signals import signals_handled
from migagent.clock import Clock, SystemClock
from migagent.demand.advice import ADVICE_LAYOUT
from migagent.errors import TransientError, UsageError
from migagent.kube.rollout_api import RolloutApi
from migagent.layout.parse import parse_layout
from migagent.rollout.budget import MaxUnavailable
from migagent.rollout.driver import (
    HeldElsewhereError,
    RolloutDriver,
    RolloutError,
    RolloutListener,
    decode,
    encode,
    gpu_pods,
    impact_of,
    initial_state,
    new_holder,
    resumed,
    undo_state,
)
from migagent.rollout.impact import with_pods_now
from migagent.rollout.preview import Preview, preview
from migagent.rollout.state import NodeStatus, Phase, RolloutSpec, RolloutState

_CONFLICT_TRIES = 10


def _api(args: argparse.Namespace, clock: Clock) -> RolloutApi:
    return pool_api(args, clock)


def _layouts(args: argparse.Namespace, api: RolloutApi) -> str:
    return layouts_text(args, api)


def _budget(text: str) -> MaxUnavailable:
    return MaxUnavailable.parse(text)


# --- plan ---------------------------------------------------------------------------------------------


def _preview(args: argparse.Namespace, api: RolloutApi) -> Preview:
    layouts = _layouts(args, api)
    layout = parse_layout(layouts, source=args.layout_file or "the migagent-layouts ConfigMap")
    if args.layout not in layout.configs:
        raise UsageError(f"-c {args.layout}: no such layout; valid: {', '.join(layout.names) or 'none'}")
    nodes = api.list_nodes(args.selector)
    if not nodes:
        raise UsageError(f"-l {args.selector}: selects no node")
    impacts = []
    labels: dict[str, dict[str, str]] = {}
    for node in nodes:
        impact = impact_of(node, layout, args.layout)
        if impact.plannable:
            pods = api.list_pods_on_node(node.name)
            impact = with_pods_now(impact, gpu_pods(pods))
            labels.update((str(pod.ref), dict(pod.labels)) for pod in pods)
        impacts.append(impact)
    return preview(impacts, max_unavailable=_budget(args.max_unavailable), canary=args.canary,
                   budgets=api.list_pdbs(), pod_labels=labels)


def _capacity_lines(result: Preview) -> list[str]:
    names = sorted(set(result.before) | set(result.after) | set(result.worst))
    rows = [("RESOURCE", "BEFORE", "WORST WAVE", "AFTER")] + [
        (name, str(result.before.get(name, 0)), str(result.worst.get(name, 0)), str(result.after.get(name, 0)))
        for name in names
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _run_plan(args: argparse.Namespace) -> int:
    api = _api(args, SystemClock())
    result = _preview(args, api)
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
        return 0
    rows = [("NODE", "GPUS CHANGED", "GIS KEPT", "DESTROYED", "CREATED", "RESETS", "EVICTS", "PROBLEM")]
    for node in result.nodes:
        evicts = ", ".join(f"{pod}{'?' if pod in node.unreported else ''}" for pod in node.evicts)
        rows.append((
            node.node, ",".join(map(str, node.gpus_changed)) or "-", str(node.gis_kept), str(node.gis_destroyed),
            str(node.gis_created), str(node.resets), evicts or "-", node.problem or "-",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    totals = result.totals()
    print(f"\ntotals: {totals['nodes_changed']} node(s) change, {totals['nodes_unchanged']} unchanged,"
          f" {totals['nodes_problem']} cannot ({totals['gpus_changed']} GPUs changed, {totals['gis_destroyed']} GIs"
          f" destroyed, {totals['gis_kept']} kept, {totals['gis_created']} created, {totals['resets']} resets,"
          f" {totals['pods_evicted']} pod(s) evicted)")
    for index, wave in enumerate(result.waves, start=1):
        print(f"wave {index}{' (canary)' if index == 1 else ''}: {', '.join(wave)}")
    for reason in result.unplaced:
        print(f"no wave can take {reason}")
    if any(node.unreported for node in result.nodes):
        print("?: a GPU pod started since its agent last reported; which device it holds is not known yet, so it"
              " counts as evicted")
    print()
    for line in _capacity_lines(result):
        print(line)
    return 0


# --- start, resume, undo: drive ------------------------------------------------------------------


def _listener(args: argparse.Namespace, clock: Clock) -> RolloutListener:
    if args.output == "json" or (args.output is None and not sys.stdout.isatty()):
        return JsonEvents(clock)
    return LiveTable(clock, redraw=sys.stdout.isatty())


def _drive(args: argparse.Namespace, api: RolloutApi, clock: Clock, listener: RolloutListener) -> int:
    driver = RolloutDriver(api, args.name, clock=clock, listener=listener, poll_s=args.poll, holder=new_holder())
    try:
        final = driver.run()
    except HeldElsewhereError as error:
        print(f"migagent rollout: {error}", file=sys.stderr)
        return 1
    return _ending(args, final, listener)


def _ending(args: argparse.Namespace, state: RolloutState, listener: RolloutListener) -> int:
    failed = state.in_status(NodeStatus.FAILED)
    if isinstance(listener, JsonEvents):
        listener.event("summary", rollout=state.name, phase=str(state.phase), mode=str(state.mode),
                       reasons=list(state.reasons),
                       nodes={r.node: {"status": str(r.status), "wave": r.wave, "predicted": list(r.predicted),
                                       "evicted": list(r.evicted)} for r in state.nodes.values()})
    else:
        print()
        for line in evictions_report(state):
            print(line)
        print(f"\nrollout {state.name}: {state.phase}")
        for reason in state.reasons:
            print(f"  {reason}")
        if state.phase is Phase.HALTED:
            print(f"clear the fault, then: migagent rollout resume {state.name}")
        elif state.phase is Phase.PAUSED:
            print(f"paused; continue with: migagent rollout resume {state.name}")
    return 1 if state.phase is Phase.HALTED or failed else 0


def _run_start(args: argparse.Namespace) -> int:
    clock = SystemClock()
    api = _api(args, clock)
    _budget(args.max_unavailable)  # a bad value is refused before anything is read or written
    spec = RolloutSpec(
        selector=args.selector, layout=ADVICE_LAYOUT if args.from_advice else args.layout,
        max_unavailable=args.max_unavailable.strip(),
        canary=args.canary, soak_s=args.soak, failure_budget=args.failure_budget, lease_s=args.lease,
    )
    stored = api.read_state(args.name)
    if stored is None and args.from_advice:
        state = advised_state(args, spec, clock)
        api.create_state(args.name, encode(state))
    elif stored is None:
        state = initial_state(args.name, spec, _layouts(args, api), api.list_nodes(args.selector))
        api.create_state(args.name, encode(state))
    else:
        state = decode(args.name, stored)
        if (state.spec.selector, state.spec.layout) != (spec.selector, spec.layout) and state.mode.value == "rollout":
            raise RolloutError(
                f"rollout {args.name} exists with -l {state.spec.selector} -c {state.spec.layout}; start it with"
                " those (it resumes), or give a new NAME"
            )
        if state.phase is Phase.HALTED:
            raise RolloutError(
                f"rollout {args.name} is halted ({'; '.join(state.reasons)}); clear the fault, then"
                f" `migagent rollout resume {args.name}`"
            )
        if state.phase is Phase.DONE:
            print(f"rollout {args.name} is done")
            return 0
    if args.detach:
        print(f"rollout {args.name} created; a `migagent rollout controller` drives it")
        return 0
    return _drive(args, api, clock, _listener(args, clock))


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
    if args.detach or state.held_by_other(new_holder(), clock.wall()):
        if state.holder:
            print(f"driven by {state.holder}")
        return 0
    return _drive(args, api, clock, _listener(args, clock))


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
    state = _update(api, args.name, undo_state)
    back = len(state.in_status(NodeStatus.PENDING))
    return _then_drive(args, api, clock, state, f"rollout {args.name}: {back} node(s) go back to their previous layout")


def _run_status(args: argparse.Namespace) -> int:
    clock = SystemClock()
    api = _api(args, clock)
    if args.name is None:
        states = [decode(stored.name, stored) for stored in api.list_states()]
        if args.output == "json":
            print(json.dumps([s.to_json() for s in states], indent=2, sort_keys=True))
        for state in states if args.output != "json" else ():
            print(headline(state))
        return 0
    stored = api.read_state(args.name)
    if stored is None:
        raise RolloutError(f"no rollout {args.name}")
    state = decode(args.name, stored)
    if args.output == "json":
        print(json.dumps(state.to_json(), indent=2, sort_keys=True))
        return 0
    print(headline(state))
    if state.holder and state.holder_expires > clock.wall():
        print(f"driven by {state.holder}")
    for reason in state.reasons:
        print(f"  {reason}")
    for line in table(node_rows(state, {}, clock.wall())):
        print(line)
    return 0


# --- controller ----------------------------------------------------------------------------------------


def run_controller(
    api: RolloutApi, *, clock: Clock, listener: RolloutListener, poll_s: float, stop: threading.Event
) -> None:
    """Every running rollout, one step each per look, under this controller's own lease, until `stop`.

    A rollout another driver holds (a person's `rollout start`, another replica) is left to it; one
    whose driver died is taken over when that lease expires."""
    holder = new_holder()
    drivers: dict[str, RolloutDriver] = {}
    while not stop.is_set():
        try:
            stored_states = api.list_states()
        except TransientError as error:
            listener.event("controller_list_failed", error=str(error))
            clock.wait(stop, poll_s)
            continue
        for stored in stored_states:
            state = decode(stored.name, stored)
            if state.phase is Phase.DONE or state.held_by_other(holder, clock.wall()):
                continue
            if state.phase in (Phase.PAUSED, Phase.HALTED) and not state.in_status(NodeStatus.IN_FLIGHT):
                continue
            driver = drivers.setdefault(
                stored.name, RolloutDriver(api, stored.name, clock=clock, listener=listener, holder=holder)
            )
            try:
                after = driver.step()
                if after.phase is Phase.DONE or (
                    after.phase is Phase.HALTED and not after.in_status(NodeStatus.IN_FLIGHT)
                ):
                    driver.release()
            except (TransientError, HeldElsewhereError) as error:
                listener.event("controller_step_retried", rollout=stored.name, error=str(error))
        clock.wait(stop, poll_s)
    for driver in drivers.values():  # stopped (SIGTERM): hand the rollouts over now, not at lease expiry
        try:
            driver.release()
        except (TransientError, RolloutError) as error:
            listener.event("controller_release_failed", error=str(error))


def _run_controller(args: argparse.Namespace) -> int:
    clock = SystemClock()
    stop = threading.Event()
    if args.run_for is not None:
        threading.Timer(args.run_for, stop.set).start()
    with signals_handled({signal.SIGTERM: stop.set, signal.SIGINT: stop.set}):
        run_controller(_api(args, clock), clock=clock, listener=JsonEvents(clock), poll_s=args.poll, stop=stop)
    return 0


# --- flags --------------------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)"
    )
    parser.add_argument("--api-server", help="API server URL, e.g. the simulator's http://127.0.0.1:PORT")
    parser.add_argument("--namespace", default="migagent", help="where rollout state objects live (default migagent)")


def _budgets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-unavailable", default="8", metavar="N|Nnodes|N%",
        help="GPUs out of service at once (default 8); or nodes (2nodes); or a share of the pool's GPUs (25%%)",
    )
    parser.add_argument("--canary", type=int, default=1, metavar="N", help="nodes in the first wave (default 1)")


def _driving(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json"), default=None,
                        help="live table (default on a terminal) or one JSON event per line (default otherwise)")
    parser.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="how often to look (default 1)")
    parser.add_argument("--detach", action="store_true", help="only write the state; a controller drives it")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("rollout", help=summary("rollout"), description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    plan = verbs.add_parser("plan", help="what each node would do, the waves, and the capacity meanwhile")
    plan.add_argument("-l", "--selector", required=True, help="the nodes, as kubectl -l (e.g. pool=a100)")
    plan.add_argument("-c", "--layout", required=True, help="the layout name (a key of the layout file)")
    plan.add_argument("-f", "--layout-file", help="layout file (default: the cluster's migagent-layouts ConfigMap)")
    plan.add_argument("-o", "--output", choices=("table", "json"), default="table")
    _budgets(plan)
    _common(plan)
    plan.set_defaults(handler=_run_plan)

    start = verbs.add_parser("start", help="create the rollout and drive it (resumes an existing one)")
    start.add_argument("name", metavar="NAME")
    start.add_argument("-l", "--selector", required=True, help="the nodes, as kubectl -l (e.g. pool=a100)")
    target = start.add_mutually_exclusive_group(required=True)
    target.add_argument("-c", "--layout", help="the layout name (a key of the layout file)")
    target.add_argument("--from-advice", action="store_true",
                        help="each node to the layout `migagent advise -l SELECTOR` proposes for it")
    add_strategy_flag(start)
    start.add_argument("-f", "--layout-file", help="layout file (default: the cluster's migagent-layouts ConfigMap)")
    _budgets(start)
    start.add_argument("--soak", type=float, default=0.0, metavar="SECONDS", help="wait after the canary succeeds")
    start.add_argument("--failure-budget", type=_positive, default=1, metavar="N",
                       help="halt after N failed nodes (default 1)")
    start.add_argument("--lease", type=float, default=30.0, metavar="SECONDS",
                       help="how long a killed driver keeps others from taking over (default 30)")
    _driving(start)
    _common(start)
    start.set_defaults(handler=_run_start)

    for verb, handler, text in (("resume", _run_resume, "a paused or halted rollout runs on (and is driven here)"),
                                ("undo", _run_undo, "relabel every changed node to its previous layout, in waves")):
        sub = verbs.add_parser(verb, help=text)
        sub.add_argument("name", metavar="NAME")
        _driving(sub)
        _common(sub)
        sub.set_defaults(handler=handler)

    pause = verbs.add_parser("pause", help="no new wave starts; nodes in flight finish")
    pause.add_argument("name", metavar="NAME")
    _common(pause)
    pause.set_defaults(handler=_run_pause)

    status = verbs.add_parser("status", help="one rollout's state (or every rollout's headline)")
    status.add_argument("name", metavar="NAME", nargs="?")
    status.add_argument("-o", "--output", choices=("table", "json"), default="table")
    _common(status)
    status.set_defaults(handler=_run_status)

    controller = verbs.add_parser("controller", help="drive every running rollout from inside the cluster")
    controller.add_argument("--poll", type=float, default=2.0, metavar="SECONDS", help="how often to look")
    controller.add_argument("--run-for", type=float, default=None, metavar="SECONDS", help=argparse.SUPPRESS)
    controller.set_defaults(handler=_run_controller, log_level=logging.INFO)
    _common(controller)
