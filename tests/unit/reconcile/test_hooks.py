from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import structlog

from migagent.reconcile.hooks import (
    HookCommand,
    HookFailedError,
    HookResult,
    HookRunner,
    HooksFileError,
    flag_environment,
    load_hooks_file,
    parse_hooks,
)

_HOOKS = """
version: v1
hooks:
  apply-start:
    - command: /bin/bash
      args: ["-c", "echo start"]
      envs: {STAGE: one}
      workdir: /etc/nvidia-mig-manager
    - command: /bin/true
  apply-exit:
    - command: /bin/echo
"""


class _Recorder:
    """A `run` seam that records calls and answers with scripted return codes."""

    def __init__(self, codes: Sequence[int] = ()) -> None:
        self.calls: list[tuple[tuple[str, ...], dict[str, str], str | None]] = []
        self._codes = list(codes)

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> HookResult:
        self.calls.append((tuple(argv), dict(env), cwd))
        code = self._codes.pop(0) if self._codes else 0
        return HookResult(returncode=code, output="last line\n" if code else "")


def _flags() -> dict[str, str]:
    return flag_environment(
        config_file="/etc/config.yaml",
        selected_config="all-1g.10gb",
        hooks_file="/etc/hooks.yaml",
        skip_reset=False,
        mode_only=True,
    )


def test_a_mig_parted_hooks_file_parses_into_commands_in_order() -> None:
    hooks = parse_hooks(_HOOKS, source="hooks.yaml")
    assert hooks.commands("apply-start") == (
        HookCommand("/bin/bash", ("-c", "echo start"), (("STAGE", "one"),), "/etc/nvidia-mig-manager"),
        HookCommand("/bin/true"),
    )
    assert hooks.commands("pre-apply-mode") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: v1\nhooks: {apply-start: [{args: [x]}]}\n", r"hooks.apply-start\[0\]: 'command' must be"),
        ("version: v1\nhooks: {apply-start: [{command: x, args: [1]}]}\n", r"'args' must be a list of strings"),
        ("version: v1\nhooks: {apply-start: [{command: x, envs: [A]}]}\n", r"'envs' must map"),
        ("version: v1\nhooks: {apply-start: {command: x}}\n", r"hooks.apply-start: expected a list"),
        ("- just a list\n", r"expected a mapping with keys 'version' and 'hooks'"),
        ("version: [v1\n", r"not valid YAML"),
    ],
)
def test_a_bad_hooks_file_is_refused_naming_the_file_and_key(text: str, message: str) -> None:
    with pytest.raises(HooksFileError, match=message):
        parse_hooks(text, source="hooks.yaml")


@pytest.mark.parametrize(
    ("text", "event", "ignored"),
    [
        ("version: v1\nhooks: {apply-strat: [{command: x}]}\n", "hooks_file_keys_ignored", ["apply-strat"]),
        ("version: v1\nhook: {}\n", "hooks_file_keys_ignored", ["hook"]),
        ("version: v1\nhooks: {apply-start: [{command: x, env: {}}]}\n", "hooks_file_keys_ignored", ["env"]),
        ("version: v2\nhooks: {}\n", "hooks_file_version_unexpected", None),
    ],
)
def test_what_mig_parted_ignores_is_ignored_too_but_logged_as_a_warning(
    text: str, event: str, ignored: list[str] | None
) -> None:
    with structlog.testing.capture_logs() as logs:
        hooks = parse_hooks(text, source="hooks.yaml")
    assert hooks.commands("apply-strat") == ()
    warning = next(entry for entry in logs if entry["event"] == event)
    assert warning["log_level"] == "warning"
    if ignored is not None:
        assert warning["ignored"] == ignored


def test_an_unreadable_hooks_file_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(HooksFileError, match=r"cannot read hooks file .*missing.yaml"):
        load_hooks_file(tmp_path / "missing.yaml")


def test_flag_variables_spell_booleans_as_true_and_false() -> None:
    assert _flags() == {
        "MIG_PARTED_CONFIG_FILE": "/etc/config.yaml",
        "MIG_PARTED_SELECTED_CONFIG": "all-1g.10gb",
        "MIG_PARTED_HOOKS_FILE": "/etc/hooks.yaml",
        "MIG_PARTED_SKIP_RESET": "false",
        "MIG_PARTED_MODE_CHANGE_ONLY": "true",
    }


def test_a_hook_gets_its_envs_and_the_flags_but_not_the_parent_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARENT_ONLY", "leak")
    recorder = _Recorder()
    HookRunner(parse_hooks(_HOOKS, source="h"), flag_env=_flags(), run=recorder).run("apply-start")
    argv, env, cwd = recorder.calls[0]
    assert argv == ("/bin/bash", "-c", "echo start")
    assert env == {"STAGE": "one", **_flags()}
    assert cwd == "/etc/nvidia-mig-manager"
    assert "PARENT_ONLY" not in env
    assert "PATH" not in env


def test_flag_values_win_over_a_hook_env_of_the_same_name() -> None:
    text = "version: v1\nhooks:\n  apply-exit:\n    - command: x\n      envs: {MIG_PARTED_SKIP_RESET: 'yes'}\n"
    recorder = _Recorder()
    HookRunner(parse_hooks(text, source="h"), flag_env=_flags(), run=recorder).run("apply-exit")
    assert recorder.calls[0][1]["MIG_PARTED_SKIP_RESET"] == "false"


def test_the_first_failing_hook_stops_its_list_with_mig_parteds_message() -> None:
    recorder = _Recorder(codes=[3, 0])
    runner = HookRunner(parse_hooks(_HOOKS, source="h"), flag_env=_flags(), run=recorder)
    with pytest.raises(HookFailedError, match=r"error running apply-start hook: exit status 3 \(last line\)"):
        runner.run("apply-start")
    assert len(recorder.calls) == 1


def test_a_hook_command_that_cannot_start_is_a_hook_failure() -> None:
    def missing(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> HookResult:
        raise FileNotFoundError(2, "No such file or directory")

    runner = HookRunner(parse_hooks(_HOOKS, source="h"), flag_env=_flags(), run=missing)
    with pytest.raises(HookFailedError, match=r"apply-start hook: /bin/bash: No such file or directory"):
        runner.run("apply-start")


def test_running_a_hook_name_with_no_commands_does_nothing() -> None:
    recorder = _Recorder()
    HookRunner(parse_hooks(_HOOKS, source="h"), flag_env=_flags(), run=recorder).run("pre-apply-config")
    assert recorder.calls == []
