"""`migagent advise -o text`: per node the change and its price (the columns of `rollout plan`), per
pending pod where it would run or why it cannot, the totals, and any layouts written for the advice."""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from migagent.demand.advice import Advice, NodeAdvice
from migagent.node.scheduling import describe_requests

NODE_COLUMNS = ("NODE", "LAYOUT", "CHANGE TO", "GPUS CHANGED", "GIS KEPT", "DESTROYED", "CREATED", "RESETS",
                "EVICTS", "SERVES")
POD_COLUMNS = ("PENDING POD", "PRIORITY", "WAITED", "ASKS", "RUNS ON")


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]


def _node_row(node: NodeAdvice) -> tuple[str, ...]:
    serves = f"{len(node.serves)} pod(s)" if node.serves else "-"
    impact = node.impact
    if impact is None:
        why = f"(unchanged: {node.not_changed})" if node.not_changed else "-"
        return (node.node, node.layout or "-", why, "-", "-", "-", "-", "-", "-", serves)
    return (
        node.node, node.layout or "-", node.target or "-", ",".join(map(str, impact.gpus_changed)) or "-",
        str(impact.gis_kept), str(impact.gis_destroyed), str(impact.gis_created), str(impact.resets),
        ", ".join(f"{pod}{'?' if pod in impact.unreported else ''}" for pod in impact.evicts) or "-", serves,
    )


def render(advice: Advice) -> list[str]:
    lines = columns(NODE_COLUMNS, [_node_row(n) for n in advice.nodes])
    lines.append("")
    rows = []
    for pod in advice.pods:
        where = (f"{pod.node} (after its change)" if pod.after_change else f"{pod.node} (fits now)") if pod.node \
            else f"- {pod.reason}"
        rows.append((pod.pod, str(pod.priority), f"{pod.waited_s:.0f}s", describe_requests(pod.requests), where))
    lines += columns(POD_COLUMNS, rows) if rows else ["no pending pod requests a MIG device (or nvidia.com/gpu)"]
    totals = advice.totals()
    lines.append("")
    lines.append(
        f"totals: {totals['pending']} pending pod(s): {totals['served_now']} fit now, {totals['served_after_changes']}"
        f" after the changes, {totals['unserved']} unserved; {totals['nodes_changed']} node(s) change"
        f" ({totals['gpus_changed']} GPUs changed, {totals['gis_destroyed']} GIs destroyed, {totals['gis_created']}"
        f" created, {totals['resets']} resets, {totals['pods_evicted']} pod(s) evicted)"
    )
    if any(n.impact is not None and n.impact.unreported for n in advice.nodes):
        lines.append("?: a GPU pod started since its agent last reported; which device it holds is not known yet,"
                     " so it counts as evicted")
    if advice.generated is not None:
        lines.append("")
        lines.append("# layouts written for this advice: add them to the layout file (the migagent-layouts ConfigMap)")
        lines.append("# before a rollout can use them")
        lines += yaml.safe_dump(dict(advice.generated), sort_keys=False).rstrip("\n").splitlines()
    return lines
