"""User input that ended in exit 70 ("internal error") or ran until the kernel killed it: each is now one
line naming the file or flag, exit 1 or 2, with the node untouched; one test per family (issue 37)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.cli import main

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "configs/mig-layouts/mig-layouts.yaml")
TOO_DEEP = "invalid YAML: lists and mappings nested more than 100 levels deep"
TOO_LARGE = "larger than 16 MiB, the most migagent reads"


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("hooks", ["deep", "binary", "endless"])
def test_a_hooks_file_nested_hundreds_deep_binary_or_endless_is_one_line_and_the_node_is_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hooks: str
) -> None:
    state = tmp_path / "node.json"
    apply = ["apply", "--state", str(state), "-f", SHIPPED, "-c"]
    assert main([*apply, "all-disabled", "--simulate", "1xA30-24GB"]) == 0
    before = state.read_bytes()
    path = {"deep": tmp_path / "deep.yaml", "binary": tmp_path / "hooks.bin", "endless": Path("/dev/zero")}[hooks]
    if hooks == "deep":
        path.write_text(f"version: v1\nhooks: {_nested(5_000)}\n", encoding="utf-8")
    elif hooks == "binary":
        path.write_bytes(bytes(range(128, 256)) * 8)
    capsys.readouterr()
    assert main([*apply, "all-1g.6gb", "-k", str(path)]) == 1
    said = {"deep": f"migagent apply: {path}: not valid YAML: while increasing flow level exceeded maximum nesting"
                    ' depth in "<unicode string>", line 2, column 1007',
            "binary": f"migagent apply: cannot read hooks file {path}: not UTF-8 text (byte 0)",
            "endless": f"migagent apply: cannot read hooks file {path}: {TOO_LARGE}"}[hooks]
    assert _one_line(capsys) == said
    assert state.read_bytes() == before


@pytest.mark.parametrize("depth", [300, 5_000])
def test_a_layout_file_nested_hundreds_deep_is_one_line_for_validate_and_advise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(f"version: v1\nmig-configs:\n  c: {_nested(depth)}\n", encoding="utf-8")
    assert main(["validate", "-f", str(path)]) == 1
    assert _one_line(capsys) == f"migagent validate: {path}: {TOO_DEEP}"
    # -f is parsed before the cluster is asked anything: nothing listens on port 9.
    assert main(["advise", "-f", str(path), "--api-server", "http://127.0.0.1:9"]) == 1
    assert _one_line(capsys) == f"migagent advise: {path}: {TOO_DEEP}"


def test_an_endless_layout_or_state_file_ends_at_the_size_limit_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Read whole, /dev/zero grew to 23 GB before the kernel killed the process; the limit is checked while reading.
    assert main(["validate", "-f", "/dev/zero"]) == 1
    assert _one_line(capsys) == f"migagent validate: /dev/zero: cannot read layout file: {TOO_LARGE}"
    assert main(["plan", "--state", "/dev/zero", "-f", SHIPPED, "-c", "all-disabled"]) == 1
    assert _one_line(capsys) == f"migagent plan: --state /dev/zero: cannot load the simulated node: {TOO_LARGE}"


def test_a_name_the_terminal_cannot_encode_is_printed_escaped_not_an_internal_error(tmp_path: Path) -> None:
    path, name = tmp_path / "names.yaml", "caf\u00e9"
    path.write_text(f'version: v1\nmig-configs:\n  "{name}":\n  - {{devices: all, mig-enabled: false}}\n',
                    encoding="utf-8")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    run = subprocess.run([sys.executable, "-m", "migagent", "validate", "-f", str(path)], env=env,
                         capture_output=True, text=True, encoding="ascii", check=False, cwd=ROOT)
    assert run.returncode == 1, run.stderr
    assert run.stderr.splitlines() == [
        f"migagent validate: {path}: mig-configs: config name {json.dumps(name)} cannot be a node label"
        " value, so no node can select it: at most 63 ASCII letters, digits, '-', '_' and '.', starting and"
        " ending with a letter or digit"
    ]


def test_stdout_in_ascii_escapes_what_it_cannot_encode(capsys: pytest.CaptureFixture[str]) -> None:
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from migagent.cli import main; sys.exit(main(['--version']) or"
         " print('caf\u00e9'))"],
        env={**os.environ, "PYTHONIOENCODING": "ascii"}, capture_output=True, text=True, check=False, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "caf\\xe9"


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_a_flag_error(capsys: pytest.CaptureFixture[str], port: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--metrics-port", port])
    assert exited.value.code == 2
    assert re.search(r"migagent demo: error: argument --metrics-port: (a port is 0 \(any free one\) to 65535, got"
                     r" -?\d+|expected a port number, got 'http')$", capsys.readouterr().err.strip())
