"""Whose `nvidia.com/mig.config` a node carries: the rollout's, or someone else's.

The rollout records what it expects each node's label to be: the label the node had (`previous`)
until the rollout writes `target`, and `target` once it has (`labelled`). Any other value was set
by someone else, an admin by hand or another tool: their decision, so the node leaves the rollout
(status `overridden`: never relabelled, never undone), and the rollout says so in its status, in an
Event on the Node and in its end report.
"""

from __future__ import annotations

from dataclasses import replace

from migagent.node.names import MIG_CONFIG_LABEL
from migagent.node.port import NodeView
from migagent.rollout.state import NodeRecord, NodeStatus

EVENT_REASON = "MigRolloutLeftNode"


def layout_label(node: NodeView) -> str | None:
    return node.labels.get(MIG_CONFIG_LABEL)


def changed_elsewhere(record: NodeRecord, label: str | None) -> bool:
    """Whether `label`, the node's label now, is one the rollout neither found nor wrote."""
    match record.status:
        case NodeStatus.PENDING:
            return label != record.previous
        case NodeStatus.IN_FLIGHT if not record.labelled:
            return label not in (record.previous, record.target)  # its write may or may not have landed
        case NodeStatus.IN_FLIGHT | NodeStatus.DONE | NodeStatus.FAILED:
            return label != record.target
        case _:
            return False


def shown(label: str | None) -> str:
    return "(no label)" if label is None else label


def left_alone(record: NodeRecord, label: str | None, now: float) -> NodeRecord:
    expected = record.previous if record.status is NodeStatus.PENDING else record.target
    return replace(
        record, status=NodeStatus.OVERRIDDEN, finished_at=now,
        reason=(f"{MIG_CONFIG_LABEL} changed by someone else to {shown(label)} (the rollout expected"
                f" {shown(expected)}); left alone, undo will not change it"),
    )
