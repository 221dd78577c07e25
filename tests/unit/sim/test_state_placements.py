"""A state file whose instances sit where no GPU could put them is refused at load with one line naming
the field, the placement and the valid ones; the CLI exits 1 with that line and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from migagent.cli import main
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import SimNodeState, StateFormatError
from migagent.sim.state_check import check_profiles

REPO = Path(__file__).resolve().parents[3]
LAYOUTS = REPO / "configs" / "mig-layouts" / "mig-layouts.yaml"


def _balanced_state(tmp_path: Path) -> dict[str, Any]:
    state = tmp_path / "node.json"
    FakeNvml.from_spec("H100-80GB-SXM", mig_enabled=True).save(state)
    with capture_logs():
        assert main(["apply", "--state", str(state), "-f", str(LAYOUTS), "-c", "all-balanced"]) == 0
    data: dict[str, Any] = json.loads(state.read_text(encoding="utf-8"))
    return data


def _refusal(data: dict[str, Any]) -> str:
    with pytest.raises(StateFormatError) as raised:
        check_profiles(SimNodeState.from_dict(data))
    return str(raised.value)


def _gi(data: dict[str, Any], size: int) -> dict[str, Any]:
    gi: dict[str, Any] = next(g for g in data["gpus"][0]["gpu_instances"] if g["placement"][1] == size)
    return gi


def test_a_gi_at_a_start_its_profile_does_not_offer_is_refused_naming_the_valid_ones(tmp_path: Path) -> None:
    data = _balanced_state(tmp_path)
    _gi(data, 4)["placement"] = [2, 4]  # a 3g GI may start at 0 or 4 only
    message = _refusal(data)
    assert "gpus[0].gpu_instances[" in message
    assert "placement 2:4 is not a placement of 3g.40gb on H100-80GB-SXM" in message
    assert "valid placements: 4:4, 0:4" in message or "valid placements: 0:4, 4:4" in message
    assert "\n" not in message


def test_overlapping_gis_are_refused(tmp_path: Path) -> None:
    data = _balanced_state(tmp_path)
    gis = data["gpus"][0]["gpu_instances"]
    one_g = next(g for g in gis if g["placement"][1] == 1)
    three_g = _gi(data, 4)
    one_g["placement"] = [three_g["placement"][0], 1]
    assert "overlaps gpu_instances[" in _refusal(data)


def test_gis_on_a_gpu_with_mig_disabled_are_refused(tmp_path: Path) -> None:
    data = _balanced_state(tmp_path)
    data["gpus"][0]["mig_current"] = 0
    assert _refusal(data) == "gpus[0]: holds GPU instances but its MIG mode is disabled"


def test_a_ci_at_an_impossible_placement_inside_its_gi_is_refused(tmp_path: Path) -> None:
    data = _balanced_state(tmp_path)
    _gi(data, 4)["compute_instances"][0]["placement"] = [1, 3]
    assert "compute_instances[0]: placement 1:3 is not a placement of" in _refusal(data)


def test_the_cli_refuses_such_a_state_file_in_one_line_and_leaves_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _balanced_state(tmp_path)
    _gi(data, 4)["placement"] = [2, 4]
    state = tmp_path / "node.json"
    state.write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    assert main(["export", "--state", str(state)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "placement 2:4 is not a placement of 3g.40gb" in err
    assert json.loads(state.read_text(encoding="utf-8")) == data


def test_every_state_the_simulator_writes_passes(tmp_path: Path) -> None:
    check_profiles(SimNodeState.from_dict(_balanced_state(tmp_path)))
