"""`migagent plan`, `apply` and `assert` through `migagent.cli.main`, on a simulated node kept in a state file."""

import io
import json
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.cli import main
from migagent.planning import Plan
from migagent.sim.fake_nvml import FakeNvml
from tests.integration.apply.support import LAYOUTS


@pytest.fixture
def layouts(tmp_path: Path) -> Path:
    path = tmp_path / "layouts.yaml"
    path.write_text(LAYOUTS, encoding="utf-8")
    return path


def _node_args(tmp_path: Path, spec: str = "A100-40GB") -> list[str]:
    return ["--simulate", spec, "--state", str(tmp_path / "node.json")]


def _run(argv: list[str]) -> int:
    with capture_logs():
        return main(argv)


def test_plan_offline_prints_the_steps_and_exits_zero_when_the_layout_fits(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["plan", "-f", str(layouts), "-c", "a100-balanced", "--gpu-model", "2xA100-40GB"])
    out = capsys.readouterr().out
    assert code == 0
    # Two identical A100s: one table and one list of steps, each step named with profile and slot.
    assert "GPUs 0-1 (NVIDIA A100-SXM4-40GB), each: keep 0, destroy 0, create 4 GI(s)\n" in out
    assert "    1. create 3g.20gb at slot 4\n" in out
    assert "    5. create compute instance 3g.20gb at slot 0 in 3g.20gb at slot 4\n" in out
    assert out.endswith("16 step(s) in all\n")
    assert len(out.splitlines()) < 20


def test_plan_offline_exits_non_zero_naming_the_profile_the_gpu_lacks(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["plan", "-f", str(layouts), "-c", "h100-2x3g", "--gpu-model", "A100-40GB"])
    err = capsys.readouterr().err
    assert code == 1
    assert "profile '3g.40gb'" in err
    assert "3g.20gb" in err  # what this GPU offers instead


def test_plan_offline_json_output_loads_back_as_a_plan(layouts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run(["plan", "-f", str(layouts), "-c", "h100-2x3g", "--gpu-model", "H100-80GB-SXM", "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert len(Plan.from_json(data).steps) == 4


def test_plan_with_an_unknown_gpu_model_lists_the_valid_ones(layouts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run(["plan", "-f", str(layouts), "-c", "a100-1g", "--gpu-model", "Z100"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Z100" in err
    assert "A100-40GB" in err


def test_plan_against_the_node_includes_the_mode_change(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["plan", "-f", str(layouts), "-c", "all-enabled", *_node_args(tmp_path)])
    assert code == 0
    assert "    1. set MIG on\n    2. reset the GPU to activate MIG on\n" in capsys.readouterr().out


def test_apply_then_assert_on_the_same_simulated_node(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = _node_args(tmp_path)
    assert _run(["apply", "-f", str(layouts), "-c", "a100-balanced", *node]) == 0
    assert "MIG configuration applied successfully" in capsys.readouterr().out
    assert _run(["assert", "-f", str(layouts), "-c", "a100-balanced", *node]) == 0
    assert "Selected MIG configuration currently applied" in capsys.readouterr().out
    assert (tmp_path / "node.json.journal" / "journal.json").exists()


def test_a_second_apply_changes_nothing(layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = _node_args(tmp_path)
    _run(["apply", "-f", str(layouts), "-c", "a100-balanced", *node])
    before = (tmp_path / "node.json").read_text(encoding="utf-8")
    capsys.readouterr()
    assert _run(["apply", "-f", str(layouts), "-c", "a100-balanced", *node]) == 0
    assert "nothing to change" in capsys.readouterr().out
    assert (tmp_path / "node.json").read_text(encoding="utf-8") == before


def test_assert_fails_with_the_reason_when_another_config_is_applied(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = _node_args(tmp_path)
    _run(["apply", "-f", str(layouts), "-c", "a100-balanced", *node])
    capsys.readouterr()
    assert _run(["assert", "-f", str(layouts), "-c", "a100-1g", *node]) == 1
    err = capsys.readouterr().err
    assert "Assertion failure: selected configuration not currently applied" in err
    assert "the layout wants 1g.5gb x7" in err


def test_assert_mode_only_checks_only_the_mig_mode(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = _node_args(tmp_path)
    assert _run(["apply", "-f", str(layouts), "-c", "all-enabled", "--mode-only", *node]) == 0
    assert _run(["assert", "-f", str(layouts), "-c", "a100-1g", "-m", *node]) == 0
    assert "Selected MIG mode settings from configuration currently applied" in capsys.readouterr().out
    assert _run(["assert", "-f", str(layouts), "-c", "a100-1g", *node]) == 1


def test_assert_compares_only_the_gpus_the_config_covers(layouts: Path, tmp_path: Path) -> None:
    node = _node_args(tmp_path, "8xH100-80GB-SXM")
    assert _run(["apply", "-f", str(layouts), "-c", "h100-gpu2-on-gpu5-off", *node]) == 0
    assert _run(["apply", "-f", str(layouts), "-c", "h100-gpu5-on", *node]) == 0
    # GPU 2 keeps MIG on, which h100-gpu5-on does not mention: still applied.
    assert _run(["assert", "-f", str(layouts), "-c", "h100-gpu5-on", *node]) == 0


def test_assert_valid_config_only_checks_that_the_name_exists(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["assert", "-f", str(layouts), "-c", "a100-1g", "-a"]) == 0
    assert "Selected MIG configuration is valid" in capsys.readouterr().out
    assert _run(["assert", "-f", str(layouts), "-c", "nope", "-a"]) == 1
    assert "selected mig-config not present: nope" in capsys.readouterr().err


def test_flags_can_come_from_mig_parted_environment_variables(
    layouts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MIG_PARTED_CONFIG_FILE", str(layouts))
    monkeypatch.setenv("MIG_PARTED_SELECTED_CONFIG", "all-enabled")
    monkeypatch.setenv("MIG_PARTED_SKIP_RESET", "true")
    monkeypatch.setenv("MIG_PARTED_MODE_CHANGE_ONLY", "true")
    assert _run(["apply", *_node_args(tmp_path)]) == 0
    gpu = FakeNvml.load(tmp_path / "node.json").state.gpus[0]
    assert (gpu.mig_current, gpu.mig_pending) == (0, 1)  # reset skipped: the mode is pending
    capsys.readouterr()
    monkeypatch.setenv("MIG_PARTED_SKIP_RESET", "maybe")
    assert _run(["apply", *_node_args(tmp_path)]) == 2  # a usage error, as every malformed flag
    assert "MIG_PARTED_SKIP_RESET='maybe'" in capsys.readouterr().err


def test_skip_reset_without_mode_only_fails_because_the_config_cannot_be_applied(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["apply", "-f", str(layouts), "-c", "a100-1g", "-s", *_node_args(tmp_path)]) == 1
    assert "MIG mode change still pending" in capsys.readouterr().err


def test_the_layout_can_be_read_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LAYOUTS.encode())))  # read as bytes, bounded
    assert _run(["apply", "-f", "-", "-c", "all-enabled", *_node_args(tmp_path)]) == 0
    assert "MIG configuration applied successfully" in capsys.readouterr().out


def test_an_explicit_journal_dir_is_used(layouts: Path, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    assert (
        _run(["apply", "-f", str(layouts), "-c", "all-enabled", "--journal-dir", str(journal), *_node_args(tmp_path)])
        == 0
    )
    assert json.loads((journal / "journal.json").read_text(encoding="utf-8"))["phase"] == "converged"


def test_a_passthrough_gpu_with_allow_reboot_exits_with_the_reboot_code(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNvml.from_spec("A100-40GB")
    fake.sim_set_reset_supported(0, False)
    fake.save(tmp_path / "node.json")
    node = ["--state", str(tmp_path / "node.json")]
    assert _run(["apply", "-f", str(layouts), "-c", "all-enabled", "--allow-reboot", *node]) == 3
    assert "reboot requested" in capsys.readouterr().err
    assert _run(["apply", "-f", str(layouts), "-c", "all-enabled", *node]) == 1
    assert "--allow-reboot" in capsys.readouterr().err
