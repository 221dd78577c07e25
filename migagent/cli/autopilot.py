"""`migagent autopilot`: layouts that follow demand, on the nodes labelled for it, within guardrails.

    run      the controller (deploy/components/autopilot): each --poll, the pods that waited --persist
             seconds are the demand; the advice for the opted-in nodes not in their --cooldown, in a
             pool with changes left this hour (--max-changes-per-hour), becomes one rollout it drives
    history  every decision, acted on or not, with its reasons (-o json for all of it)
    pause    no new change starts, and a rollout it drives stops after the wave in flight; `resume` lifts it

Opt a node in with `kubectl label node NODE migagent.io/autopilot=enabled`; out by removing the label.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import signal
import threading
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from typing import TYPE_CHECKING

from migagent.autopilot.controller import Autopilot, RolloutBudgets, load, save
from migagent.autopilot.decide import OPT_IN_SELECTOR, Guardrails
from migagent.autopilot.state import AutopilotState, Decision
from migagent.cli.advise import DescribedHelp
from migagent.cli.commands import summary
from migagent.cli.pool_args import pool_api
from migagent.cli.rollout_flags import (
    NAMESPACE,
    OneLineParser,
    add_budgets,
    add_layout_file,
    add_layouts_namespace,
    add_selector,
    add_server,
    add_start,
)
from migagent.cli.rollout_view import JsonEvents
from migagent.cli.signals import signals_handled
from migagent.cli.values import COUNT, POSITIVE_SECONDS, SECONDS
from migagent.clock import SystemClock
from migagent.errors import TransientError
from migagent.node.names import AUTOPILOT_NAMESPACE

if TYPE_CHECKING:
    from migagent.kube.demand_api import DemandApi

_CONFLICT_TRIES = 10


def _guardrails(args: argparse.Namespace) -> Guardrails:
    return Guardrails(
        selector=args.selector, pool_label=args.pool_label, persist_s=args.persist,
        max_changes_per_hour=args.max_changes_per_hour, max_gpus_per_look=args.max_gpus_per_look,
        cooldown_s=args.cooldown, dry_run=args.dry_run,
    )


def _run(args: argparse.Namespace) -> int:
    clock = SystemClock()
    listener = JsonEvents(clock)
    budgets = RolloutBudgets(max_unavailable=args.max_unavailable, canary=args.canary, soak_s=args.soak,
                             failure_budget=args.failure_budget, lease_s=args.lease)
    api = pool_api(args, clock)
    api.watch(args.selector)  # nodes, pods and budgets: one list, then their events
    autopilot = Autopilot(api, _guardrails(args), clock=clock, listener=listener, budgets=budgets)
    stop = threading.Event()
    timer = None if args.run_for is None else threading.Timer(args.run_for, stop.set)
    with closing(api), signals_handled({signal.SIGTERM: stop.set, signal.SIGINT: stop.set}):
        if timer is not None:
            timer.start()
        try:
            autopilot.run(stop, args.poll)
        finally:
            if timer is not None:  # a run that ends early (its state unreadable) does not wait out --run-for
                timer.cancel()
                timer.join()
    return 0


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe(decision: Decision) -> list[str]:
    head = f"{_when(decision.at)}  {decision.verdict}"
    if decision.rollout:
        head += f"  rollout {decision.rollout}"
    if decision.waiting:
        head += f"  ({decision.waiting} pod(s) waited long enough)"
    lines = [head]
    for node, detail in sorted(decision.nodes.items()):
        evicts = detail.get("evicts") or []
        status = f" [{detail['status']}]" if detail.get("status") else ""
        serves = f"serves {len(detail['serves'])} pod(s), " if "serves" in detail else ""
        lines.append(f"  {node}: {detail.get('from')} -> {detail.get('to')}{status}; {serves}"
                     f"evicts {len(evicts)}{': ' + ', '.join(evicts) if evicts else ''}")
    lines += [f"  reason: {reason}" for reason in decision.reasons]
    return lines


def _history(args: argparse.Namespace) -> int:
    with closing(pool_api(args, SystemClock())) as api:
        state = load(api)
    shown = state.history[-args.limit:] if args.limit else state.history
    if args.output == "json":
        print(json.dumps({"paused": state.paused, "rollout": state.rollout,
                          "history": [d.to_json() for d in shown]}, indent=2, sort_keys=True))
        return 0
    print(f"autopilot: {'paused' if state.paused else 'active'}"
          f"{'; driving rollout ' + state.rollout if state.rollout else ''}")
    for decision in shown:
        for line in describe(decision):
            print(line)
    if not shown:
        print("no decision recorded yet")
    return 0


def _update(api: DemandApi, change: Callable[[AutopilotState], AutopilotState]) -> AutopilotState:
    for _ in range(_CONFLICT_TRIES):
        state = load(api)
        try:
            return save(api, change(state))
        except TransientError:
            continue
    raise TransientError("the autopilot's state kept changing; try again")


def _pause(args: argparse.Namespace) -> int:
    with closing(pool_api(args, SystemClock())) as api:
        _update(api, lambda state: replace(state, paused=True))
    print("autopilot paused: no new change starts; a rollout it drives stops after the wave in flight")
    return 0


def _resume(args: argparse.Namespace) -> int:
    with closing(pool_api(args, SystemClock())) as api:
        _update(api, lambda state: replace(state, paused=False))
    print("autopilot resumed")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    add_server(parser)
    parser.add_argument("--namespace", type=NAMESPACE, default=AUTOPILOT_NAMESPACE,
                        help="where its object (ConfigMap migagent-autopilot), the layouts and rollouts live")


def _run_flags(parser: argparse.ArgumentParser) -> None:
    add_selector(parser, default=OPT_IN_SELECTOR, what="the opted-in nodes")
    parser.add_argument("--pool-label", metavar="KEY",
                        help="nodes sharing this label's value form a pool (default: all opted-in nodes are one)")
    parser.add_argument("--persist", type=SECONDS, default=300.0, metavar="SECONDS",
                        help="a pending pod counts as demand once it has waited this long")
    parser.add_argument("--max-changes-per-hour", type=COUNT, default=2, metavar="N",
                        help="node changes per pool in any trailing hour")
    parser.add_argument("--max-gpus-per-look", type=COUNT, default=16, metavar="N",
                        help="GPUs the changes one look starts may change, across the pool")
    parser.add_argument("--cooldown", type=SECONDS, default=3600.0, metavar="SECONDS",
                        help="after a node changes, it may not change again for this long")
    parser.add_argument("--dry-run", action="store_true", help="record and announce decisions; change nothing")
    parser.add_argument("--poll", type=POSITIVE_SECONDS, default=15.0, metavar="SECONDS", help="how often to look")
    add_budgets(parser)  # each rollout's, as `rollout start`
    add_start(parser)
    parser.add_argument("--run-for", type=POSITIVE_SECONDS, default=None, metavar="SECONDS", help=argparse.SUPPRESS)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("autopilot", help=summary("autopilot"), description=__doc__,
                                   formatter_class=DescribedHelp)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=OneLineParser)
    run = verbs.add_parser("run", help="the controller: follow demand within the guardrails")
    _run_flags(run)
    _common(run)
    add_layout_file(run)  # with --dry-run, tried before deploying: against any API server (`demo --linger`'s)
    add_layouts_namespace(run, default=None)
    run.set_defaults(handler=_run, log_level=logging.INFO)
    history = verbs.add_parser("history", help="every decision, acted on or not, with its reasons")
    history.add_argument("-o", "--output", choices=("text", "json"), default="text")
    history.add_argument("--limit", type=int, default=0, metavar="N", help="only the last N decisions")
    _common(history)
    history.set_defaults(handler=_history)
    for verb, handler, text in (("pause", _pause, "no new change starts"), ("resume", _resume, "lift the pause")):
        sub = verbs.add_parser(verb, help=text)
        _common(sub)
        sub.set_defaults(handler=handler)
