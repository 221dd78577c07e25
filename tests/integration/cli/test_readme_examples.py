"""The README's examples work after its quick start as written: they call `.venv/bin/migagent` (the
quick start installs into .venv and puts nothing on PATH), and the simulated-node block runs."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from migagent.cli import main

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SH_BLOCKS = re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL)


def test_no_shell_example_calls_a_bare_migagent_that_the_quick_start_never_put_on_path() -> None:
    lines = [line.strip() for block in SH_BLOCKS for line in block.splitlines()]
    assert any(line.startswith(".venv/bin/migagent ") for line in lines)
    assert [line for line in lines if line.startswith("migagent ")] == []


def test_the_quick_start_installs_into_the_venv_the_examples_use() -> None:
    assert "python3.11 -m venv .venv && .venv/bin/pip install -q . ./simulator && .venv/bin/migagent demo" in README


def test_the_simulated_node_block_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (block,) = [b for b in SH_BLOCKS if "--simulate 8xH100-80GB-SXM --state /tmp/node.json" in b]
    monkeypatch.chdir(ROOT)  # the examples read configs/ from the repository root
    commands = [shlex.split(line.replace("/tmp/", f"{tmp_path}{os.sep}")) for line in block.splitlines() if line]
    assert len(commands) >= 4
    for argv in commands:
        assert argv[0] == ".venv/bin/migagent"
        assert main(argv[1:]) == 0, f"{' '.join(argv)}: {capsys.readouterr().err}"
    assert "Selected MIG configuration currently applied" in capsys.readouterr().out
