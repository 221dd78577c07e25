"""`migagent status`: one table for the fleet, a row per MIG node, read from the Nodes alone.

Desired layout (label), state (label), the MigConfigReady condition's reason and age, what each GPU
holds (the agent's migagent.io/observed annotation), what the node advertises (allocatable
nvidia.com/mig-*, else nvidia.com/gpu) and the last error. It needs only `list` and `watch` on
nodes. `--watch` prints a line per change after the table (one JSON object per line with -o json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from migagent.attempt.report.fleet_rows import FleetRow, GpuHolding, fleet_row, is_mig_node
from migagent.cli.commands import summary
from migagent.cli.conflicts import Needs, refuse_together
from migagent.cli.values import POSITIVE_SECONDS
from migagent.clock import Clock, SystemClock
from migagent.errors import TransientError
from migagent.kube.client import make_api_client
from migagent.kube.fleet import FleetReader
from migagent.node.port import NodeView, WatchExpired

COLUMNS = ("NODE", "DESIRED", "STATE", "REASON", "AGE", "GPUS", "ADVERTISED", "LAST ERROR")
_ERROR_WIDTH = 100  # the table cuts long errors; -o json has them whole
_WATCH_CHUNK_S = 300.0


def _age(since: str | None, now: float) -> str:
    if not since:
        return "-"
    try:
        then = datetime.datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
    except ValueError:
        return "?"
    seconds = max(0, int(now - then))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _gpus(gpus: tuple[GpuHolding, ...] | None) -> str:
    """Runs of consecutive GPUs holding the same are merged: `0-5: 1g.10gbx2+3g.40gb; 6-7: MIG disabled`."""
    if gpus is None:
        return "not reported"
    runs: list[tuple[int, int, str]] = []
    for gpu in sorted(gpus, key=lambda g: g.index):
        text = gpu.describe()
        if runs and runs[-1][2] == text and runs[-1][1] == gpu.index - 1:
            runs[-1] = (runs[-1][0], gpu.index, text)
        else:
            runs.append((gpu.index, gpu.index, text))
    return "; ".join(f"{first}{'' if first == last else f'-{last}'}: {text}" for first, last, text in runs) or "none"


def _cells(row: FleetRow, now: float) -> tuple[str, ...]:
    error = row.last_error if len(row.last_error) <= _ERROR_WIDTH else row.last_error[: _ERROR_WIDTH - 3] + "..."
    advertised = " ".join(f"{name}={count}" for name, count in row.advertised.items())
    return (
        row.node, row.desired or "-", row.state or "-", row.reason or "-", _age(row.since, now),
        _gpus(row.gpus), advertised or "-", error or "-",
    )


class TablePrinter:
    """Aligned columns; on --watch, later lines keep the widths the table started with (or grow)."""

    def __init__(self) -> None:
        self._widths = [len(title) for title in COLUMNS]

    def lines(self, rows: Iterable[tuple[str, ...]], *, header: bool) -> list[str]:
        rows = list(rows)
        for cells in rows:
            self._widths = [max(w, len(c)) for w, c in zip(self._widths, cells, strict=True)]
        return [self._line(cells) for cells in ([COLUMNS] if header else []) + rows]

    def _line(self, cells: tuple[str, ...]) -> str:
        padded = [cell.ljust(width) for cell, width in zip(cells[:-1], self._widths, strict=False)]
        return "  ".join([*padded, cells[-1]]).rstrip()


def _default_kubeconfig(flag: str | None) -> str | None:
    """--kubeconfig, else $KUBECONFIG, else ~/.kube/config when it exists (as kubectl), else in-cluster."""
    if flag:
        return flag
    home_config = Path.home() / ".kube" / "config"
    return os.environ.get("KUBECONFIG") or (str(home_config) if home_config.is_file() else None)


def _mig_rows(nodes: Iterable[NodeView]) -> dict[str, FleetRow]:
    return {node.name: fleet_row(node) for node in sorted(nodes, key=lambda n: n.name) if is_mig_node(node)}


def _emit(rows: Iterable[FleetRow], *, args: argparse.Namespace, table: TablePrinter, clock: Clock,
          header: bool, event: str | None = None) -> None:
    rows = list(rows)
    if args.output == "json":
        for row in rows:
            print(json.dumps({"event": event, **row.to_json()} if event else row.to_json(), sort_keys=True))
    else:
        suffix = f"  ({event.lower()})" if event == "DELETED" else ""
        for line in table.lines((_cells(row, clock.wall()) for row in rows), header=header):
            print(line + (suffix if line and not line.startswith("NODE ") else ""))
    sys.stdout.flush()


def _watch(reader: FleetReader, rows: dict[str, FleetRow], version: str, *, args: argparse.Namespace,
           table: TablePrinter, clock: Clock) -> None:
    deadline = None if args.watch_for is None else clock.monotonic() + args.watch_for
    while deadline is None or clock.monotonic() < deadline:
        chunk = _WATCH_CHUNK_S if deadline is None else min(_WATCH_CHUNK_S, deadline - clock.monotonic())
        try:
            for event in reader.watch_nodes(args.selector, version, chunk):
                version = event.resource_version
                if event.node is None:  # a bookmark
                    continue
                row = fleet_row(event.node)
                if event.type == "DELETED":
                    if rows.pop(row.node, None) is not None:
                        _emit([row], args=args, table=table, clock=clock, header=False, event="DELETED")
                elif is_mig_node(event.node) and rows.get(row.node) != row:
                    rows[row.node] = row
                    _emit([row], args=args, table=table, clock=clock, header=False, event=event.type)
        except WatchExpired:  # the server no longer has our version: list again, print what changed
            nodes, version = reader.list_nodes(args.selector)
            fresh = _mig_rows(nodes)
            changed = [row for name, row in fresh.items() if rows.get(name) != row]
            rows.clear()
            rows.update(fresh)
            _emit(changed, args=args, table=table, clock=clock, header=False, event="MODIFIED")
        except TransientError:
            clock.sleep(1.0)


def _run_status(args: argparse.Namespace) -> int:
    if not args.debug:  # urllib3 logs each connection retry; the one error line below says it all
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    clock = SystemClock()
    api_client = make_api_client(kubeconfig=_default_kubeconfig(args.kubeconfig), api_server=args.api_server)
    reader = FleetReader(api_client)
    nodes, version = reader.list_nodes(args.selector)
    rows = _mig_rows(nodes)
    table = TablePrinter()
    if args.output == "json" and not args.watch:
        print(json.dumps([row.to_json() for row in rows.values()], indent=2, sort_keys=True))
    elif not rows and args.output != "json":
        among = f" among -l {args.selector})" if args.selector else ")"
        print("no MIG nodes (no node has nvidia.com/mig.config, its state, nvidia.com/mig.capable=true,"
              " migagent.io/enabled=true or a migagent.io annotation" + among)
    else:
        _emit(rows.values(), args=args, table=table, clock=clock, header=True)
    if args.watch:
        _watch(reader, rows, version, args=args, table=table, clock=clock)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("status", help=summary("status"))
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)"
    )
    parser.add_argument("--api-server", help="API server URL, e.g. the simulator's http://127.0.0.1:PORT")
    parser.add_argument("-l", "--selector", help="only nodes with these labels, e.g. pool=a100 (as kubectl -l)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    parser.add_argument(
        "-w", "--watch", action="store_true", help="after the table, print a line per node change (Ctrl-C ends)"
    )
    parser.add_argument(
        "--watch-for", type=POSITIVE_SECONDS, metavar="SECONDS",
        help="with --watch: stop after this long (default: never)",
    )
    refuse_together(parser, Needs("--watch-for", "--watch", "it says when a watch stops"))
    parser.set_defaults(handler=_run_status)
