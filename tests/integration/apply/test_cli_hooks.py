"""mig-parted's hook sequence around `migagent apply`, with real shell scripts as hooks."""

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.cli import main
from migagent.sim.fake_nvml import FakeNvml
from tests.integration.apply.support import LAYOUTS

HOOK_NAMES = ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")


@pytest.fixture
def layouts(tmp_path: Path) -> Path:
    path = tmp_path / "layouts.yaml"
    path.write_text(LAYOUTS, encoding="utf-8")
    return path


def _hooks(tmp_path: Path, *, failing: dict[str, int] | None = None) -> tuple[Path, Path]:
    """A hooks file whose every hook runs one script that logs its name and environment."""
    log = tmp_path / "hooks.log"
    script = tmp_path / "hook.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$1 $MIG_PARTED_SELECTED_CONFIG skip=$MIG_PARTED_SKIP_RESET mode_only=$MIG_PARTED_MODE_CHANGE_ONLY'
        f' own=$HOOK_OWN parent=${{MIGAGENT_TEST_PARENT-unset}} cwd=$(pwd)" >> {log}\n'
        'exit "$2"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    failing = failing or {}
    lines = ["version: v1", "hooks:"]
    for name in HOOK_NAMES:
        lines += [
            f"  {name}:",
            f"    - command: {script}",
            f'      args: ["{name}", "{failing.get(name, 0)}"]',
            "      envs: {HOOK_OWN: 'yes'}",
            f"      workdir: {tmp_path}",
        ]
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return hooks, log


def _apply(layouts: Path, tmp_path: Path, hooks: Path, config: str, *extra: str) -> int:
    argv = [
        "apply",
        "-f",
        str(layouts),
        "-c",
        config,
        "-k",
        str(hooks),
        "--simulate",
        "A100-40GB",
        "--state",
        str(tmp_path / "node.json"),
        *extra,
    ]
    with capture_logs():
        return main(argv)


def _hooks_run(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text(encoding="utf-8").splitlines()]


def test_a_full_apply_runs_every_hook_in_mig_parteds_order(layouts: Path, tmp_path: Path) -> None:
    hooks, log = _hooks(tmp_path)
    assert _apply(layouts, tmp_path, hooks, "a100-1g") == 0
    assert _hooks_run(log) == list(HOOK_NAMES)


def test_hooks_see_their_envs_and_the_flags_but_not_the_parent_environment(
    layouts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGAGENT_TEST_PARENT", "leaked")
    hooks, log = _hooks(tmp_path)
    assert _apply(layouts, tmp_path, hooks, "a100-1g", "--mode-only") == 0
    first = log.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"apply-start a100-1g skip=false mode_only=true own=yes parent=unset cwd={tmp_path}"
    assert os.environ["MIGAGENT_TEST_PARENT"] == "leaked"


def test_an_applied_config_runs_only_apply_start_and_apply_exit(layouts: Path, tmp_path: Path) -> None:
    hooks, log = _hooks(tmp_path)
    _apply(layouts, tmp_path, hooks, "a100-1g")
    log.unlink()
    assert _apply(layouts, tmp_path, hooks, "a100-1g") == 0
    assert _hooks_run(log) == ["apply-start", "apply-exit"]


def test_mode_only_stops_before_the_config_hooks(layouts: Path, tmp_path: Path) -> None:
    hooks, log = _hooks(tmp_path)
    assert _apply(layouts, tmp_path, hooks, "a100-1g", "-m") == 0
    assert _hooks_run(log) == ["apply-start", "pre-apply-mode", "apply-exit"]


def test_a_failing_hook_stops_the_apply_but_apply_exit_still_runs(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks, log = _hooks(tmp_path, failing={"pre-apply-config": 3, "apply-exit": 4})
    assert _apply(layouts, tmp_path, hooks, "a100-1g") == 1
    assert _hooks_run(log) == list(HOOK_NAMES)
    result = [line for line in capsys.readouterr().err.splitlines() if line.startswith("migagent apply:")]
    # The earlier failure is the command's error; apply-exit's own failure is only logged.
    assert result == ["migagent apply: error running pre-apply-config hook: exit status 3"]


def test_a_failing_apply_exit_hook_is_the_error_when_nothing_else_failed(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks, _ = _hooks(tmp_path, failing={"apply-exit": 4})
    assert _apply(layouts, tmp_path, hooks, "a100-1g") == 1
    assert "error running apply-exit hook: exit status 4" in capsys.readouterr().err


def test_a_failing_apply_start_hook_changes_nothing(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeNvml.from_spec("A100-40GB").save(tmp_path / "node.json")
    hooks, log = _hooks(tmp_path, failing={"apply-start": 1})
    assert _apply(layouts, tmp_path, hooks, "a100-1g") == 1
    assert _hooks_run(log) == ["apply-start", "apply-exit"]
    assert "error running apply-start hook" in capsys.readouterr().err
    assert FakeNvml.load(tmp_path / "node.json").state.gpus[0].mig_pending == 0


def test_a_malformed_hooks_file_is_refused_before_anything_runs(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text("version: v1\nhooks:\n  pre-apply-mode: [{command: 7}]\n", encoding="utf-8")
    assert _apply(layouts, tmp_path, hooks, "a100-1g") == 1
    assert "hooks.pre-apply-mode[0]: 'command' must be a non-empty string" in capsys.readouterr().err
    assert not (tmp_path / "node.json").exists()  # refused before the simulated node was even opened


def test_a_hook_name_mig_parted_does_not_run_is_ignored_with_a_warning(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text("version: v1\nhooks:\n  pre-apply-modes: []\n", encoding="utf-8")
    assert _apply(layouts, tmp_path, hooks, "a100-1g") == 0
    assert "pre-apply-modes" in capsys.readouterr().err


def test_a_layout_that_does_not_fit_is_refused_after_apply_start_without_touching_the_mig_mode(
    layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeNvml.from_spec("A100-40GB").save(tmp_path / "node.json")
    hooks, log = _hooks(tmp_path)
    assert _apply(layouts, tmp_path, hooks, "a100-too-big") == 1
    err = capsys.readouterr().err
    assert "GPU 0 (NVIDIA A100-SXM4-40GB): 3g.20gb x2 + 1g.5gb x1 does not fit" in err
    assert "closest layout that fits: 3g.20gb x2" in err
    assert _hooks_run(log) == ["apply-start", "apply-exit"]
    gpu = FakeNvml.load(tmp_path / "node.json").state.gpus[0]
    assert (gpu.mig_current, gpu.mig_pending) == (0, 0)
