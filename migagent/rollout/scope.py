"""A rollout's scope: which nodes it takes and to which layout (its targets), and what pause, resume and
undo make of it. Pure: the nodes come in as the driver or the command read them.

The targets are the rollout's one input: `rollout start -c LAYOUT` moves every selected node to the
same layout (`one_layout`); any other source (a per-node choice) hands `initial_state` its own
mapping, checked against the layouts the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from migagent.layout.spec import LayoutFile
from migagent.node.names import OBSERVED_ANNOTATION
from migagent.node.port import NodeView
from migagent.rollout.budget import Room
from migagent.rollout.errors import RolloutError
from migagent.rollout.impact import NodeImpact, predict, unreported
from migagent.rollout.ownership import layout_label, shown
from migagent.rollout.reported import UnreadableReportError, read_report
from migagent.rollout.reports import AgentAnswer, answer
from migagent.rollout.spec import RolloutSpec
from migagent.rollout.state import Layouts, Mode, NodeRecord, NodeStatus, Phase, RolloutState

Targets = Mapping[str, str]
"""Node name -> the layout the rollout moves it to."""

_SAID = 4  # nodes named in a refusal; the rest counted
FORGIVE_CURRENT = "*"
"""A resumed node's stale_attempt until the driver next looks: whatever attempt it shows then, failed
(its agent may have retried and failed again while the rollout was halted) or in flight, is forgiven."""


def one_layout(nodes: Sequence[NodeView], layout: str) -> dict[str, str]:
    """`-c LAYOUT`: every node to the same layout."""
    return {node.name: layout for node in nodes}


def impact_of(node: NodeView, layout: LayoutFile, target: str) -> NodeImpact:
    try:
        reported = read_report(node.annotations.get(OBSERVED_ANNOTATION))
    except UnreadableReportError as error:
        return unreported(node.name, str(error))
    return predict(node.name, reported, layout, target)


def _check_targets(layouts: Layouts, targets: Targets) -> None:
    names = layouts.file.names
    for node, layout in sorted(targets.items()):
        if layout not in layouts.file.configs:
            shown_names = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise RolloutError(
                f"node {node}: layout {layout!r} is not in the layout file; valid: {shown_names or 'none'}"
            )


def _record(node: NodeView, target: str, layouts: Layouts) -> NodeRecord:
    impact = impact_of(node, layouts.file, target)
    if answer(node, target) is AgentAnswer.SUCCESS:
        status, reason = NodeStatus.DONE, "already at the layout"
    elif not impact.plannable:
        status, reason = NodeStatus.SKIPPED, impact.problem
    else:
        status, reason = NodeStatus.PENDING, ""
    return NodeRecord(
        node=node.name, status=status, target=target, previous=layout_label(node), gpus=impact.gpus, reason=reason
    )


def initial_state(
    name: str, spec: RolloutSpec, layouts: Layouts, nodes: Sequence[NodeView], targets: Targets
) -> RolloutState:
    """Every node with a target, with its layout now (the undo target); nodes already there are done."""
    _check_targets(layouts, targets)
    in_scope = [node for node in nodes if node.name in targets]
    if not in_scope:
        raise RolloutError(f"{spec.flags()[0]}: selects no node")
    records = {node.name: _record(node, targets[node.name], layouts) for node in in_scope}
    if not any(record.status is NodeStatus.PENDING for record in records.values()):  # "done" would claim success
        said = [f"{r.node}: {r.reason}" for r in sorted(records.values(), key=lambda r: r.node)]
        more = f"; and {len(said) - _SAID} more" if len(said) > _SAID else ""
        raise RolloutError(f"rollout {name} would change no node ({'; '.join(said[:_SAID])}{more})")
    room = Room(spec.max_unavailable, sum(r.gpus for r in records.values()))
    for record in records.values():
        big = room.never_takes(NodeImpact(node=record.node, gpus=record.gpus))
        if record.status is NodeStatus.PENDING and big is not None:
            raise RolloutError(big)
    return RolloutState(name=name, spec=spec, layouts=layouts, nodes=records)


def undo_state(state: RolloutState, labels: Mapping[str, str | None]) -> RolloutState:
    """Every node whose label the rollout wrote, and that still carries it, goes back to its previous
    layout, in waves with the same budgets. `labels`: each node's label now (a node missing from it is
    sent back; the driver finds it gone). A label the rollout did not write is left as it is."""
    nodes: dict[str, NodeRecord] = {}
    for name, record in state.nodes.items():
        taken = record.status in (NodeStatus.IN_FLIGHT, NodeStatus.DONE, NodeStatus.FAILED) and record.wave is not None
        label = labels.get(name, record.target)
        if record.status is NodeStatus.OVERRIDDEN:
            nodes[name] = record
        elif not taken or (label == record.previous and not record.labelled):
            nodes[name] = replace(record, status=NodeStatus.SKIPPED, reason="not changed by the rollout")
        elif label != record.target:
            nodes[name] = replace(
                record, status=NodeStatus.OVERRIDDEN,
                reason=f"changed by someone else to {shown(label)} after the rollout set {shown(record.target)};"
                " undo leaves it",
            )
        else:
            nodes[name] = NodeRecord(
                node=name, status=NodeStatus.PENDING, target=record.previous, previous=record.target,
                gpus=record.gpus,
            )
    return replace(
        state, mode=Mode.UNDO, phase=Phase.RUNNING, nodes=nodes, canary_done_at=None, reasons=(), waves=0,
    )


def resumed(state: RolloutState) -> RolloutState:
    """`rollout resume`: a paused rollout runs on; a halted one waits again on its failed nodes (their
    old failure forgiven: only a new attempt that fails counts) and then starts the next waves."""
    nodes = {
        name: replace(record, status=NodeStatus.IN_FLIGHT, reason="", stale_attempt=FORGIVE_CURRENT)
        if record.status is NodeStatus.FAILED else record
        for name, record in state.nodes.items()
    }
    return replace(state, phase=Phase.RUNNING, nodes=nodes, reasons=())
