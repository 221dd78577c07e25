"""`migagent rollout status`: one rollout's state from its object (or every rollout's headline), from
anywhere. An object that cannot be read is said in one line (exit 1); the others are still listed."""

from __future__ import annotations

import argparse
import json
import sys

from migagent.cli.rollout_view import headline, node_rows, table
from migagent.clock import Clock
from migagent.kube.rollout_api import RolloutApi
from migagent.rollout.codec import decode
from migagent.rollout.errors import CorruptStateError, RolloutError
from migagent.rollout.state import RolloutState


def run_status(args: argparse.Namespace, api: RolloutApi, clock: Clock) -> int:
    """One rollout's headline, reasons and node table (or JSON); without NAME, every rollout's headline."""
    if args.name is None:
        return _status_all(args, api)
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


def _status_all(args: argparse.Namespace, api: RolloutApi) -> int:
    """Every rollout's headline; one that cannot be read is said on stderr (exit 1), the others listed."""
    states: list[RolloutState] = []
    unreadable = 0
    for stored in api.list_states():
        try:
            states.append(decode(stored.rollout, stored))
        except CorruptStateError as error:
            print(f"migagent rollout: {error}", file=sys.stderr)
            unreadable += 1
    if args.output == "json":
        print(json.dumps([s.to_json() for s in states], indent=2, sort_keys=True))
    else:
        for state in states:
            print(headline(state))
    return 1 if unreadable else 0
