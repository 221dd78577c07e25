"""`migagent rollout plan`: each node's predicted change, the waves, the totals and the capacity, as a
table or JSON. Nothing is written."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from migagent.errors import UsageError
from migagent.kube.rollout_api import RolloutApi
from migagent.rollout.impact import with_pods_now
from migagent.rollout.port import gpu_pods
from migagent.rollout.preview import Preview, preview
from migagent.rollout.scope import impact_of
from migagent.rollout.state import Layouts


def rollout_preview(args: argparse.Namespace, api: RolloutApi, layouts: Layouts) -> Preview:
    nodes = api.list_nodes(args.selector)
    if not nodes:
        raise UsageError(f"-l {args.selector}: selects no node")
    impacts = []
    labels: dict[str, dict[str, str]] = {}
    for node in nodes:
        impact = impact_of(node, layouts.file, args.layout)
        if impact.plannable:
            pods = api.list_pods_on_node(node.name)
            impact = with_pods_now(impact, gpu_pods(pods))
            labels.update((str(pod.ref), dict(pod.labels)) for pod in pods)
        impacts.append(impact)
    return preview(impacts, max_unavailable=args.max_unavailable, canary=args.canary,
                   budgets=api.list_pdbs(), pod_labels=labels)


def _aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _capacity_lines(result: Preview) -> list[str]:
    names = sorted(set(result.before) | set(result.after) | set(result.worst))
    return _aligned([("RESOURCE", "BEFORE", "WORST WAVE", "AFTER")] + [
        (name, str(result.before.get(name, 0)), str(result.worst.get(name, 0)), str(result.after.get(name, 0)))
        for name in names
    ])


def print_plan(result: Preview, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
        return
    rows = [("NODE", "GPUS CHANGED", "GIS KEPT", "DESTROYED", "CREATED", "RESETS", "EVICTS", "PROBLEM")]
    for node in result.nodes:
        evicts = ", ".join(f"{pod}{'?' if pod in node.unreported else ''}" for pod in node.evicts)
        rows.append((
            node.node, ",".join(map(str, node.gpus_changed)) or "-", str(node.gis_kept), str(node.gis_destroyed),
            str(node.gis_created), str(node.resets), evicts or "-", node.problem or "-",
        ))
    for line in _aligned(rows):
        print(line)
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
