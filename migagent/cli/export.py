"""`migagent export`: the node's current layout as mig-parted v1 YAML (or JSON)."""

from __future__ import annotations

import argparse
import json
import os
import sys

import yaml

from migagent.cli.commands import summary
from migagent.cli.flags import add_output_argument
from migagent.cli.node import add_node_arguments, open_node
from migagent.errors import MigAgentError
from migagent.layout.export import ExportError, export_layout, instances_not_shown


def _run(args: argparse.Namespace) -> int:
    with open_node(args) as driver:
        observation = driver.observe()
    try:
        document = export_layout(observation, label=args.config_label)
    except ExportError as exc:
        raise MigAgentError(str(exc)) from exc
    if args.output == "json":
        print(json.dumps(document, indent=2))
    else:
        print(yaml.safe_dump(document, sort_keys=False, default_flow_style=False), end="")
    hidden = instances_not_shown(observation)
    if hidden is not None:  # the document stays mig-parted's; what it cannot hold is said beside it
        print(f"migagent export: warning: {hidden}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("export", help=summary("export"))
    add_output_argument(
        parser, choices=("yaml", "json"), default=os.environ.get("MIG_PARTED_OUTPUT_FORMAT", "yaml"),
        aliases=("--output-format",),  # mig-parted's spelling
    )
    parser.add_argument(
        "-l", "--config-label", default=os.environ.get("MIG_PARTED_CONFIG_LABEL", "current"),
        help="name of the exported config (default: current)",
    )
    add_node_arguments(parser)
    parser.set_defaults(handler=_run)

