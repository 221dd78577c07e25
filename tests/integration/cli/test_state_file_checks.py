"""The simulator's --state file is user input: a --simulate spec that disagrees with it, or a
hand-edited profile id its GPU model does not offer, is an error that changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migagent.cli import main

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "configs/mig-layouts/mig-layouts.yaml")


def _node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    state = tmp_path / "node.json"
    argv = ["apply", "--simulate", "1xA100-40GB", "--state", str(state), "-f", SHIPPED, "-c", "all-1g.5gb"]
    assert main(argv) == 0
    capsys.readouterr()
    return state


def test_a_simulate_spec_that_differs_from_the_saved_node_is_an_error_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _node(tmp_path, capsys)
    saved = state.read_bytes()
    assert main(["export", "--simulate", "2xH100-80GB-SXM", "--state", str(state)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"migagent export: --simulate 2xH100-80GB-SXM does not match the node saved in {state} (1xA100-40GB);"
        f" drop --simulate to use the saved node, or delete {state} to create a new one"
    ]
    assert state.read_bytes() == saved


def test_the_same_spec_as_the_saved_node_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = _node(tmp_path, capsys)
    assert main(["export", "--simulate", "1xa100-40gb", "--state", str(state)]) == 0  # keys are case-insensitive
    assert "1g.5gb: 7" in capsys.readouterr().out


def _edit_first_gi(state: Path, *, gi_profile: int | None = None, ci_profile: int | None = None) -> None:
    raw = json.loads(state.read_text())
    gi = raw["gpus"][0]["gpu_instances"][0]
    if gi_profile is not None:
        gi["profile_id"] = gi_profile
    if ci_profile is not None:
        gi["compute_instances"][0]["profile_id"] = ci_profile
    state.write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"gi_profile": 42}, "gpus[0].gpu_instances[0]: GPU instance profile id 42 is not offered by A100-40GB;"
                             " valid ids: 19 (1g.5gb),"),
        ({"ci_profile": 7}, "gpus[0].gpu_instances[0].compute_instances[0]: compute instance profile id 7 is not"
                            " offered inside 1g.5gb on A100-40GB; valid ids: 0 (1g.5gb)"),
    ],
)
def test_a_hand_edited_unknown_profile_id_is_refused_at_load_not_hidden_by_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: dict[str, int], message: str
) -> None:
    state = _node(tmp_path, capsys)
    _edit_first_gi(state, **edit)
    edited = state.read_bytes()
    assert main(["export", "--state", str(state)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert f"migagent export: --state {state}: cannot load the simulated node: {message}" in err
    assert state.read_bytes() == edited
