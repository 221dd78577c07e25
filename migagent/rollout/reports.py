"""How a node's agent answers a relabel, read from the Node: still working, success or failed.

Success is the agent's own success for the target: state label `success`, MigConfigReady True and
`migagent.io/desired` naming the target layout (so the success of the layout before never counts).
Failed is state `failed` while `migagent.io/desired` names the target.
"""

from __future__ import annotations

import enum

from migagent.jsontext import decode_json
from migagent.node.names import (
    ATTEMPT_ANNOTATION,
    CONDITION_TYPE,
    DESIRED_ANNOTATION,
    LAST_ERROR_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    ConditionReason,
    ConditionStatus,
    MigConfigState,
)
from migagent.node.port import NodeView


class AgentAnswer(enum.StrEnum):
    WORKING = "working"
    SUCCESS = "success"
    FAILED = "failed"


def desired_layout(node: NodeView) -> str | None:
    """The layout name in the agent's `migagent.io/desired` (None when absent or unreadable)."""
    try:
        value = decode_json(node.annotations.get(DESIRED_ANNOTATION, ""))
    except ValueError:
        return None
    layout = value.get("layout") if isinstance(value, dict) else None
    return layout if isinstance(layout, str) else None


def answer(node: NodeView, target: str | None) -> AgentAnswer:
    if target is None:  # the label removed: the agent leaves the GPUs as they are
        return AgentAnswer.SUCCESS if MIG_CONFIG_LABEL not in node.labels else AgentAnswer.WORKING
    if node.labels.get(MIG_CONFIG_LABEL) != target or desired_layout(node) != target:
        return AgentAnswer.WORKING
    state = node.labels.get(MIG_CONFIG_STATE_LABEL)
    condition = node.condition(CONDITION_TYPE)
    if state == MigConfigState.SUCCESS and condition is not None and condition.status == ConditionStatus.TRUE:
        return AgentAnswer.SUCCESS
    if state == MigConfigState.FAILED:
        return AgentAnswer.FAILED
    return AgentAnswer.WORKING


def attempt(node: NodeView) -> str | None:
    """The agent's attempt number (`migagent.io/attempt`: JSON while an attempt runs, a count after it failed)."""
    text = node.annotations.get(ATTEMPT_ANNOTATION)
    try:
        marker = decode_json(text or "null")
    except ValueError:
        return text
    return str(marker.get("attempt") if isinstance(marker, dict) else marker) if marker is not None else None


_IN_PROGRESS = frozenset(
    {ConditionReason.RECONFIGURING, ConditionReason.DRAINING, ConditionReason.WAITING_FOR_DEVICE_PLUGIN}
)


def failure_reason(node: NodeView) -> str:
    """The agent's last error, after its failure reason (ApplyFailed, DrainBlocked, ...) when the condition
    already carries it (the agent writes the state label and last error first, the condition next)."""
    condition = node.condition(CONDITION_TYPE)
    text = node.annotations.get(LAST_ERROR_ANNOTATION) or (condition.message if condition else "") or "failed"
    known = condition is not None and condition.reason and condition.reason not in _IN_PROGRESS
    return (f"{condition.reason}: " if known and condition is not None else "") + " ".join(text.split())


def agent_phase(node: NodeView) -> str:
    """What the agent says it is doing (the condition's reason), for the progress view."""
    condition = node.condition(CONDITION_TYPE)
    return condition.reason if condition is not None else ""
