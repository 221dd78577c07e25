"""A state object read back strictly: each damaged or hand-edited shape is one line naming the object,
the field and what is wrong, with how to repair or remove it; a sound one (or an older one) reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from migagent.kube.rollout_api import StoredState
from migagent.rollout.codec import decode, encode
from migagent.rollout.errors import CorruptStateError
from migagent.rollout.state import NodeStatus
from tests.unit.rollout.cluster import Cluster, first_state, stored

Edit = Callable[[dict[str, Any]], object]


def sound() -> dict[str, str]:
    return encode(first_state(Cluster(["a", "b"])))


def edited(edit: Edit) -> StoredState:
    data = sound()
    state = json.loads(data["state"])
    edit(state)
    return stored({**data, "state": json.dumps(state)}, "9")


CASES: list[tuple[str, Edit, str]] = [
    ("unknown-node-status", lambda s: s["nodes"]["a"].update(status="relabelling"),
     'state.nodes.a.status: "relabelling" is not one of pending, in-flight, done, failed, skipped, overridden'),
    ("nodes-a-list", lambda s: s.update(nodes=["a", "b"]), 'state.nodes: expected an object, got ["a", "b"]'),
    ("node-entry-a-string", lambda s: s["nodes"].update(a="done"), 'state.nodes.a: expected an object, got "done"'),
    ("no-spec", lambda s: s.pop("spec"), "state.spec: missing"),
    ("spec-a-string", lambda s: s.update(spec="all-balanced"), "state.spec: expected an object"),
    ("no-name", lambda s: s.pop("name"), "state.name: missing"),
    ("another-rollouts-name", lambda s: s.update(name="other"), "state.name: \"other\", but the object is rollout 'r'"),
    ("unknown-phase", lambda s: s.update(phase="stuck"), 'state.phase: "stuck" is not one of running'),
    ("unknown-mode", lambda s: s.update(mode="redo"), 'state.mode: "redo" is not one of rollout, undo'),
    ("bad-budget", lambda s: s["spec"].update(max_unavailable="lots"), "state.spec.max_unavailable: 'lots': give"),
    ("zero-canary", lambda s: s["spec"].update(canary=0), "state.spec.canary: must be at least 1, got 0"),
    ("canary-a-string", lambda s: s["spec"].update(canary="1"), 'state.spec.canary: expected a whole number'),
    ("negative-soak", lambda s: s["spec"].update(soak_s=-1), "state.spec.soak_s: must be 0 or more seconds"),
    ("zero-lease", lambda s: s["spec"].update(lease_s=0), "state.spec.lease_s: must be more than 0 seconds"),
    ("gpus-negative", lambda s: s["nodes"]["a"].update(gpus=-2), "state.nodes.a.gpus: expected a whole number"),
    ("gpus-a-bool", lambda s: s["nodes"]["a"].update(gpus=True), "state.nodes.a.gpus: expected a whole number"),
    ("wave-zero", lambda s: s["nodes"]["a"].update(wave=0), "state.nodes.a.wave: expected a whole number of at least"),
    ("predicted-not-strings", lambda s: s["nodes"]["a"].update(predicted=[1]), "state.nodes.a.predicted: expected"),
    ("target-a-number", lambda s: s["nodes"]["a"].update(target=7), "state.nodes.a.target: expected a string or null"),
    ("target-not-in-layouts", lambda s: s["nodes"]["a"].update(target="all-7g"),
     'state.nodes.a.target: "all-7g" is not a layout of the rollout\'s layouts (valid: all-1g.10gb, all-balanced)'),
    ("holder-expires-a-string", lambda s: s.update(holder_expires="soon"), "state.holder_expires: expected a number"),
    ("reasons-a-string", lambda s: s.update(reasons="boom"), "state.reasons: expected a list of strings"),
    ("labelled-a-string", lambda s: s["nodes"]["a"].update(labelled="yes"), "state.nodes.a.labelled: expected true"),
]


def _check(error: CorruptStateError, said: str) -> None:
    text = str(error)
    assert "\n" not in text
    assert text.startswith("rollout r: its state object (configmap migagent-rollouts/migagent-rollout-r) cannot be"
                           " read: ")
    assert said in text, text
    assert text.endswith(
        "repair it with `kubectl edit -n migagent-rollouts configmap migagent-rollout-r`, or remove it with"
        " `kubectl delete -n migagent-rollouts configmap migagent-rollout-r` (that forgets the rollout; the nodes"
        " keep their labels)"
    )


@pytest.mark.parametrize(("edit", "said"), [(e, s) for _, e, s in CASES], ids=[c[0] for c in CASES])
def test_each_damaged_shape_is_one_line_naming_the_object_the_field_and_the_repair(edit: Edit, said: str) -> None:
    with pytest.raises(CorruptStateError) as refused:
        decode("r", edited(edit))
    _check(refused.value, said)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"state": "{not json", "layouts": "x"}, "key 'state' is not JSON"),
        ({"state": "[1, 2]", "layouts": "x"}, "state: expected an object, got [1, 2]"),
        ({"layouts": "x"}, "no 'state' key"),
        ({"state": json.dumps({"name": "r", "spec": json.loads(sound()["state"])["spec"]})},
         "no 'layouts' key"),
        ({**sound(), "layouts": "version: v1\nmig-configs: [broken"}, "key 'layouts'"),
        ({"state": "NaN", "layouts": "x"}, "state: expected an object, got NaN"),
    ],
    ids=["not-json", "not-an-object", "no-state-key", "no-layouts-key", "layouts-not-yaml", "nan"],
)
def test_a_damaged_object_as_a_whole_is_said_the_same_way(data: dict[str, str], said: str) -> None:
    with pytest.raises(CorruptStateError) as refused:
        decode("r", stored(data, "9"))
    _check(refused.value, said)


def test_an_object_written_before_labelled_was_recorded_still_reads() -> None:
    def older(state: dict[str, Any]) -> None:
        state["nodes"]["a"].update(status="done", wave=1)
        for entry in state["nodes"].values():
            entry.pop("labelled")

    state = decode("r", edited(older))
    assert (state.nodes["a"].status, state.nodes["a"].labelled) == (NodeStatus.DONE, True)
    assert not state.nodes["b"].labelled  # pending: not relabelled yet
