"""JSON and YAML nested deeper than their decoders may recurse, where someone other than the agent can write
them (a Node's annotations, a ConfigMap): each reader gives the answer it gives any other malformed text,
never an internal error. `json.loads` and PyYAML's Python loader raise RecursionError there, which no
`except ValueError` (or `except yaml.YAMLError`) catches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migagent.attempt.backoff import RetryHold
from migagent.attempt.phases import Outcome
from migagent.attempt.report.fleet_rows import gpu_holdings
from migagent.attempt.undo import AttemptMarker
from migagent.autopilot.controller import load
from migagent.autopilot.state import CorruptAutopilotStateError
from migagent.jsontext import decode_json
from migagent.layout.sharing import SharingConfigError, parse_plugin_config
from migagent.node.names import (
    ATTEMPT_ANNOTATION,
    DESIRED_ANNOTATION,
    MIG_CONFIG_STATE_LABEL,
    NEXT_RETRY_ANNOTATION,
    OBSERVED_ANNOTATION,
)
from migagent.node.port import NodeView
from migagent.rollout.codec import decode
from migagent.rollout.errors import CorruptStateError
from migagent.rollout.reported import UnreadableReportError, read_report
from migagent.rollout.reports import attempt, desired_layout
from migagent_sim.doubles.memory_node import MemoryNode
from migagent_sim.model_pool import ModelPool
from tests.unit.demand.support import make_pool, model_node
from tests.unit.rollout.cluster import stored

DEEP = "[" * 100_000  # 100 KB: well inside an annotation's 256 KiB


def test_the_standard_decoder_does_raise_recursion_error_here() -> None:
    """What the readers below are protected from (if a Python release raised ValueError, they need nothing)."""
    with pytest.raises(RecursionError):
        json.loads(DEEP)


@pytest.mark.parametrize("text", [DEEP, '{"a":' * 100_000], ids=["arrays", "objects"])
def test_decode_json_says_too_deep_as_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="nested deeper than the decoder allows"):
        decode_json(text)


def test_the_agents_own_annotations_read_as_unreadable() -> None:
    assert RetryHold.from_annotation(DEEP) is None
    assert AttemptMarker.from_annotation(DEEP) is None


def test_a_node_whose_annotations_are_nested_too_deep_still_gets_its_layout(tmp_path: Path) -> None:
    node = MemoryNode(tmp_path)
    node.kube.annotations.update({NEXT_RETRY_ANNOTATION: DEEP, ATTEMPT_ANNOTATION: DEEP})
    node.set_label("all-balanced")
    assert node.agent().reconcile_once() is Outcome.APPLIED
    assert node.state == "success", node.kube.labels.get(MIG_CONFIG_STATE_LABEL)


def test_the_fleet_readers_show_the_node_as_unknown() -> None:
    view = NodeView("n1", "uid", "1", annotations={DESIRED_ANNOTATION: DEEP, ATTEMPT_ANNOTATION: DEEP})
    assert desired_layout(view) is None
    assert attempt(view) == DEEP  # shown as written, as any text that is not JSON
    assert gpu_holdings(DEEP) is None
    with pytest.raises(UnreadableReportError, match=f"{OBSERVED_ANNOTATION} is not what the agent writes"):
        read_report(DEEP)


def test_a_rollout_state_nested_too_deep_is_a_corrupt_state_naming_the_repair() -> None:
    said = r"key 'state' is not JSON \(JSON nested deeper than the decoder allows\).*kubectl delete"
    with pytest.raises(CorruptStateError, match=said):
        decode("r", stored({"state": DEEP, "layouts": "x"}, "9"))


@pytest.mark.parametrize(
    ("state", "said"),
    [(DEEP, "nested deeper"), ("{not json", "Expecting property name"), ('{"changes": [{"who": 1}]}', "who")],
    ids=["too-deep", "not-json", "unknown-field"],
)
def test_an_autopilot_state_that_cannot_be_read_is_one_line_naming_the_object_and_the_repair(
    state: str, said: str
) -> None:
    pool: ModelPool = make_pool(model_node("n1"))
    pool.write_autopilot({"state": state}, "")
    with pytest.raises(CorruptAutopilotStateError) as refused:
        load(pool)
    text = str(refused.value)
    assert "\n" not in text
    assert text.startswith("the autopilot's state (configmap "), text
    assert "key 'state') cannot be read: " in text
    assert said in text, text
    assert "repair it with `kubectl edit -n " in text
    assert "or remove it with `kubectl delete -n " in text


def test_a_device_plugin_config_nested_too_deep_is_a_sharing_config_error_naming_where() -> None:
    with pytest.raises(SharingConfigError, match=r"^configmap plugin: not valid YAML: .*nesting"):
        parse_plugin_config(DEEP, where="configmap plugin")
