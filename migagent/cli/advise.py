"""`migagent advise`: which layout changes would let the pending GPU pods run, and at what price.

Reads the pods that wait for `nvidia.com/mig-*` (or `nvidia.com/gpu` on `single` nodes) with their node
selectors, required node affinity, tolerations and priority; what each node's agent reports (GPUs,
GPU instances, the pods on each); the PodDisruptionBudgets; and the layout file. Proposes per node a
layout from the file (with --generate, one built for the node) that lets the most pending pods run
for the fewest evictions and GPUs changed, never evicting a pod of equal or higher priority than the
pods it helps, never past a PodDisruptionBudget, never touching a node whose agent has not reported.
Nothing is written; `migagent rollout start NAME --from-advice` turns the advice into a rollout.
"""

from __future__ import annotations

import argparse
import json
from contextlib import closing
from typing import TYPE_CHECKING

from migagent.cli.advise_view import render
from migagent.cli.commands import summary
from migagent.cli.flags import HelpFormatter
from migagent.cli.pool_args import file_layouts, pool_api, pool_layouts
from migagent.cli.rollout_flags import add_layout_file, add_layouts_namespace, add_server
from migagent.clock import Clock, SystemClock
from migagent.demand.advice import Advice
from migagent.demand.advise import AdviseOptions, DemandView, advise
from migagent.errors import UsageError
from migagent.layout.strategy import MigStrategy
from migagent.node.scheduling import DemandNode
from migagent.rollout.errors import RolloutError
from migagent.rollout.scope import initial_state
from migagent.rollout.spec import RolloutSpec
from migagent.rollout.state import Layouts, RolloutState

if TYPE_CHECKING:
    from migagent.kube.demand_api import DemandApi

STRATEGIES = ("auto", MigStrategy.MIXED.value, MigStrategy.SINGLE.value)


class DescribedHelp(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """The description as written (it lists verbs and rules), and every default shown (HelpFormatter)."""


def advice_for(
    args: argparse.Namespace, api: DemandApi, clock: Clock, *, generate: bool = False, given: Layouts | None = None
) -> tuple[Advice, Layouts, list[DemandNode]]:
    """The advice for the nodes -l selects, with the layouts it was computed from (`given`: -f, already
    parsed) and those nodes."""
    layouts = pool_layouts(api, given or file_layouts(args))
    layout = layouts.file
    nodes = api.list_demand_nodes(args.selector or "")
    if not nodes:
        raise UsageError(f"-l {args.selector}: selects no node")
    strategy = None if args.mig_strategy == "auto" else MigStrategy(args.mig_strategy)
    view = DemandView(nodes=nodes, pods=api.list_gpu_pods(), layout=layout, budgets=api.list_pdbs(), now=clock.wall())
    return advise(view, AdviseOptions(generate=generate, strategy=strategy)), layouts, nodes


def advised_state(args: argparse.Namespace, spec: RolloutSpec, clock: Clock, given: Layouts | None) -> RolloutState:
    """`rollout start NAME --from-advice`: a rollout of each node the advice changes, to its target (the
    targets the rollout takes, checked against the layouts as any are: rollout/scope.initial_state)."""
    with closing(pool_api(args, clock)) as api:
        advice, layouts, nodes = advice_for(args, api, clock, given=given)
    if not advice.changes:
        unserved = sum(1 for pod in advice.pods if pod.node is None)
        raise RolloutError(f"the advice changes no node ({len(advice.pods)} pending pod(s), {unserved} unserved):"
                           " see `migagent advise`")
    return initial_state(args.name, spec, layouts, [node.view for node in nodes], advice.changes)


def _run_advise(args: argparse.Namespace) -> int:
    clock = SystemClock()
    with closing(pool_api(args, clock)) as api:
        advice, _, _ = advice_for(args, api, clock, generate=args.generate)
    if args.output == "json":
        print(json.dumps(advice.to_json(), indent=2, sort_keys=True))
    else:
        for line in render(advice):
            print(line)
    return 0


def add_strategy_flag(parser: argparse.ArgumentParser) -> None:
    """Shared with `rollout start --from-advice`."""
    parser.add_argument("--mig-strategy", choices=STRATEGIES, default="auto",
                        help="the device plugin's strategy on the nodes (auto: read from what each advertises)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("advise", help=summary("advise"), description=__doc__, formatter_class=DescribedHelp)
    parser.add_argument("-l", "--selector", help="the nodes that may change, as kubectl -l (default: every node)")
    add_layout_file(parser)
    add_strategy_flag(parser)
    parser.add_argument("--generate", action="store_true",
                        help="also consider a layout built per node from the demand (printed, to add to the file)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    add_server(parser)
    add_layouts_namespace(parser, "--namespace")  # --namespace: its older spelling
    parser.set_defaults(handler=_run_advise)
