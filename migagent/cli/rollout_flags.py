"""The flags of `migagent rollout`, each checked when it is parsed, before anything is read or written:
a value no rollout can run with is one line naming the flag and what would be valid, exit 2. The
rules are the rollout's own (rollout/spec.py, rollout/budget.py), also applied to a state object read
back, so a flag and a hand-edited object are held to the same.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import NoReturn

from migagent.cli.flags import Parser
from migagent.cli.values import COUNT, POSITIVE_SECONDS, SECONDS, checked
from migagent.durable import read_bounded
from migagent.node.names import LAYOUTS_NAMESPACE, ROLLOUT_NAMESPACE
from migagent.rollout.budget import MaxUnavailable
from migagent.rollout.spec import namespace_name, rollout_name


class OneLineParser(Parser):
    """A verb's parser whose refusal is the one line that says what is wrong (no usage block above it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _same(text: str) -> str:
    return text


NAME = checked(_same, rollout_name, "a rollout name")
NAMESPACE = checked(_same, namespace_name, "a namespace")
MAX_UNAVAILABLE = checked(_same, MaxUnavailable.parse, "N, Ngpus, Nnodes or N%")


@dataclass(frozen=True)
class LayoutText:
    """`-f FILE` as read when the flags are parsed (an unreadable file is a flag error)."""

    path: str
    text: str


def layout_file(path: str) -> LayoutText:
    try:
        return LayoutText(path, read_bounded(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise argparse.ArgumentTypeError(f"cannot read {path}: {reason}") from None


def add_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)"
    )
    parser.add_argument("--api-server", help="API server URL, e.g. the simulator's http://127.0.0.1:PORT")


def add_layouts_namespace(
    parser: argparse.ArgumentParser, *aliases: str, default: str | None = LAYOUTS_NAMESPACE
) -> None:
    parser.add_argument("--layouts-namespace", *aliases, dest="layouts_namespace", type=NAMESPACE, default=default,
                        help="where the agents' layouts ConfigMap is, without -f"
                        + (f" (default {default})" if default else " (default: --namespace)"))


def add_cluster(parser: argparse.ArgumentParser, *, layouts: bool = False) -> None:
    add_server(parser)
    parser.add_argument("--namespace", type=NAMESPACE, default=ROLLOUT_NAMESPACE,
                        help=f"where rollout state objects live (default {ROLLOUT_NAMESPACE})")
    if layouts:
        add_layouts_namespace(parser)


def _selector(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty selector selects every node (an unset shell variable?); for that,"
                                         " give --all instead")
    return text


def add_selector(parser: argparse.ArgumentParser, *, default: str | None = None, what: str = "the nodes") -> None:
    """-l SELECTOR, or --all for every node: as kubectl drain, an empty -l does not stand for every node."""
    scope = parser.add_mutually_exclusive_group(required=default is None)
    scope.add_argument("-l", "--selector", type=_selector, default=default,
                       help=f"{what}, as kubectl -l (e.g. pool=a100)")
    scope.add_argument("--all", dest="selector", action="store_const", const="", help="every node of the cluster")


def add_scope(parser: argparse.ArgumentParser, *, from_advice: bool = False) -> None:
    """-l or --all, -c (or, where `from_advice`, --from-advice instead: each node's target from `migagent advise`),
    -f."""
    add_selector(parser)
    target = parser.add_mutually_exclusive_group(required=True) if from_advice else parser
    target.add_argument("-c", "--layout", required=not from_advice, help="the layout name (a key of the layout file)")
    if from_advice:
        target.add_argument("--from-advice", action="store_true",
                            help="each node to the layout `migagent advise -l SELECTOR` proposes for it")
    add_layout_file(parser)


def add_layout_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--layout-file", type=layout_file,
                        help="layout file (default: the cluster's migagent-layouts ConfigMap)")


def add_budgets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-unavailable", type=MAX_UNAVAILABLE, default="8", metavar="N|Nnodes|N%",
        help="GPUs out of service at once (default 8); or nodes (2nodes); or a share of the pool's GPUs (25%%)",
    )
    parser.add_argument("--canary", type=COUNT, default=1, metavar="N", help="nodes in the first wave (default 1)")


def add_start(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--soak", type=SECONDS, default=0.0, metavar="SECONDS", help="wait after the canary succeeds")
    parser.add_argument("--failure-budget", type=COUNT, default=1, metavar="N",
                        help="halt after N failed nodes (default 1)")
    parser.add_argument("--lease", type=POSITIVE_SECONDS, default=30.0, metavar="SECONDS",
                        help="how long a killed driver keeps others from taking over (default 30)")


def add_driving(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json"), default=None,
                        help="live table (default on a terminal) or one JSON event per line (default otherwise)")
    parser.add_argument("--poll", type=POSITIVE_SECONDS, default=1.0, metavar="SECONDS",
                        help="how often to look (default 1)")
    parser.add_argument("--detach", action="store_true", help="only write the state; a controller drives it")


def add_name(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    parser.add_argument("name", metavar="NAME", type=NAME, nargs="?" if optional else None)
