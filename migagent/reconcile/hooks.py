"""mig-parted's hooks file and the commands it names, run around an apply.

The file format (version v1) and the run semantics follow mig-parted (docs/mig-parted.md §5),
so existing hooks files and `hooks.sh` scripts keep working: the hooks under one name run in
order and the first failure stops that list; a hook's environment is its own `envs` plus the apply
flags as MIG_PARTED_* variables (the flags win, booleans spelled true/false), and the parent
environment is deliberately NOT inherited, exactly as mig-parted runs them.

Files that mig-parted accepts are accepted: like mig-parted we do not refuse a version other than v1,
unknown keys or hook names it does not run (they are ignored), but each is logged as a warning naming
the file and the key, because a misspelt hook name would otherwise silently never run. Values of the
wrong type are errors, as they are for mig-parted's YAML decoding.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from migagent.durable import read_bounded
from migagent.errors import InvalidLayoutError, PermanentError
from migagent.layout.strict_yaml import YamlSyntaxError, load_plain

HOOK_NAMES = ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
_HOOK_KEYS = {"command", "args", "envs", "workdir"}
_FILE_KEYS = {"version", "hooks"}

log = structlog.get_logger(__name__)


class HooksFileError(InvalidLayoutError):
    """A hooks file that cannot be used; the message names the file and the key."""


class HookFailedError(PermanentError):
    """A hook command failed or could not be started."""


@dataclass(frozen=True)
class HookCommand:
    command: str
    args: tuple[str, ...] = ()
    envs: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.command, *self.args)


@dataclass(frozen=True)
class HooksFile:
    version: str
    hooks: Mapping[str, tuple[HookCommand, ...]] = field(default_factory=dict)

    def commands(self, name: str) -> tuple[HookCommand, ...]:
        return self.hooks.get(name, ())


def parse_hooks(text: str, *, source: str) -> HooksFile:
    try:
        data = load_plain(text)
    except YamlSyntaxError as exc:
        raise HooksFileError(f"{source}: {exc}") from exc
    if not isinstance(data, dict):
        raise HooksFileError(f"{source}: expected a mapping with keys 'version' and 'hooks'")
    _warn_unknown(data, _FILE_KEYS, where=source)
    version = data.get("version")
    if version != "v1":
        log.warning("hooks_file_version_unexpected", file=source, version=version, expected="v1")
    raw_hooks = data.get("hooks") or {}
    if not isinstance(raw_hooks, dict):
        raise HooksFileError(f"{source}: 'hooks' must map hook names ({', '.join(HOOK_NAMES)}) to lists")
    _warn_unknown(raw_hooks, set(HOOK_NAMES), where=f"{source}: hooks")
    hooks = {
        name: _parse_list(items, where=f"{source}: hooks.{name}")
        for name, items in raw_hooks.items()
        if name in HOOK_NAMES
    }
    return HooksFile(version=str(version), hooks=hooks)


def load_hooks_file(path: Path) -> HooksFile:
    try:
        text = read_bounded(path).decode("utf-8")
    except OSError as exc:
        raise HooksFileError(f"cannot read hooks file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise HooksFileError(f"cannot read hooks file {path}: not UTF-8 text (byte {exc.start})") from exc
    return parse_hooks(text, source=str(path))


def _warn_unknown(data: dict[Any, Any], allowed: set[str], *, where: str) -> None:
    """mig-parted ignores keys it does not know; we ignore them too, but say so."""
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        log.warning("hooks_file_keys_ignored", where=where, ignored=unknown, valid=sorted(allowed))


def _parse_list(items: object, *, where: str) -> tuple[HookCommand, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise HooksFileError(f"{where}: expected a list of hooks, each with 'command' and optional args/envs/workdir")
    return tuple(_parse_command(item, where=f"{where}[{i}]") for i, item in enumerate(items))


def _parse_command(item: object, *, where: str) -> HookCommand:
    if not isinstance(item, dict):
        raise HooksFileError(f"{where}: expected a mapping with 'command' and optional args/envs/workdir")
    _warn_unknown(item, _HOOK_KEYS, where=where)
    command = item.get("command")
    if not isinstance(command, str) or not command:
        raise HooksFileError(f"{where}: 'command' must be a non-empty string (a program path)")
    args = item.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise HooksFileError(f"{where}: 'args' must be a list of strings")
    envs = item.get("envs") or {}
    if not isinstance(envs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in envs.items()):
        raise HooksFileError(f"{where}: 'envs' must map variable names to string values")
    workdir = item.get("workdir")
    if workdir is not None and not isinstance(workdir, str):
        raise HooksFileError(f"{where}: 'workdir' must be a directory path string")
    return HookCommand(command=command, args=tuple(args), envs=tuple(envs.items()), workdir=workdir)


@dataclass(frozen=True)
class HookResult:
    returncode: int
    output: str


HookRun = Callable[[Sequence[str], Mapping[str, str], str | None], HookResult]


def run_subprocess(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> HookResult:
    """Run a hook command with exactly `env` (no inherited environment), collecting its output."""
    completed = subprocess.run(  # noqa: PLW1510 - the return code is checked by the caller
        list(argv), env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    return HookResult(returncode=completed.returncode, output=completed.stdout)


def flag_environment(
    *, config_file: str, selected_config: str, hooks_file: str, skip_reset: bool, mode_only: bool
) -> dict[str, str]:
    """The apply flags as mig-parted hands them to hooks (`%v` formatting: booleans are true/false)."""
    return {
        "MIG_PARTED_CONFIG_FILE": config_file,
        "MIG_PARTED_SELECTED_CONFIG": selected_config,
        "MIG_PARTED_HOOKS_FILE": hooks_file,
        "MIG_PARTED_SKIP_RESET": str(skip_reset).lower(),
        "MIG_PARTED_MODE_CHANGE_ONLY": str(mode_only).lower(),
    }


class HookRunner:
    """Runs the commands listed under one hook name; the first failure stops the list."""

    def __init__(self, hooks: HooksFile, *, flag_env: Mapping[str, str], run: HookRun = run_subprocess) -> None:
        self._hooks = hooks
        self._flag_env = dict(flag_env)
        self._run = run

    def run(self, name: str) -> None:
        for command in self._hooks.commands(name):
            self._run_one(name, command)

    def _run_one(self, name: str, command: HookCommand) -> None:
        env = {**dict(command.envs), **self._flag_env}
        try:
            result = self._run(command.argv, env, command.workdir)
        except OSError as exc:
            raise HookFailedError(f"error running {name} hook: {command.command}: {exc.strerror or exc}") from exc
        log.debug(
            "hook_finished", hook=name, argv=list(command.argv), returncode=result.returncode, output=result.output
        )
        if result.returncode != 0:
            detail = result.output.strip().splitlines()[-1:] if result.output.strip() else []
            tail = f" ({detail[0]})" if detail else ""
            raise HookFailedError(f"error running {name} hook: exit status {result.returncode}{tail}")
