"""`apply` and `assert` on a config that selects none of the node's GPUs exit 1 and change nothing.

mig-parted reports success for such a config, so a typo'd label, filter or index reads as applied.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.cli import main

LAYOUTS = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  gpu-9:
    - devices: [9]
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
  h100-only:
    - device-filter: ["0x233010DE", "0x233110DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""


@pytest.fixture
def layouts(tmp_path: Path) -> Path:
    path = tmp_path / "layouts.yaml"
    path.write_text(LAYOUTS, encoding="utf-8")
    return path


def _run(argv: list[str]) -> int:
    with capture_logs():
        return main(argv)


@pytest.mark.parametrize(
    ("config", "asks"),
    [("gpu-9", "[0] devices: [9]"), ("h100-only", "[0] devices: all with device-filter 0x233010DE, 0x233110DE")],
)
@pytest.mark.parametrize("command", ["apply", "assert"])
def test_a_config_selecting_no_gpu_exits_1_naming_the_config_and_the_nodes_gpus(
    command: str, config: str, asks: str, *, layouts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = ["--simulate", "2xA100-40GB", "--state", str(tmp_path / "node.json")]
    assert _run(["apply", "-f", str(layouts), "-c", "all-disabled", *node]) == 0
    before = (tmp_path / "node.json").read_text(encoding="utf-8")
    capsys.readouterr()

    assert _run([command, "-f", str(layouts), "-c", config, *node]) == 1

    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"migagent {command}: {layouts}: config '{config}' selects none of this node's GPUs; ")
    assert f"its entries select {asks};" in line
    assert "the node has GPU 0 (NVIDIA A100-SXM4-40GB) 0x20B010DE, GPU 1 (NVIDIA A100-SXM4-40GB) 0x20B010DE" in line
    assert (tmp_path / "node.json").read_text(encoding="utf-8") == before


def test_apply_runs_no_hook_for_a_config_selecting_no_gpu(layouts: Path, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text(
        f"version: v1\nhooks:\n  apply-start:\n    - workdir: /\n      command: /bin/sh\n"
        f"      args: [-c, 'touch {marker}']\n",
        encoding="utf-8",
    )
    node = ["--simulate", "2xA100-40GB", "--state", str(tmp_path / "node.json")]
    assert _run(["apply", "-f", str(layouts), "-c", "gpu-9", "-k", str(hooks), *node]) == 1
    assert not marker.exists()
    # The same hooks file does run for a config that selects GPUs: the refusal above is what stopped it.
    assert _run(["apply", "-f", str(layouts), "-c", "all-disabled", "-k", str(hooks), *node]) == 0
    assert marker.exists()


LISTED = """version: v1
mig-configs:
  typo:
    - devices: [0, 9]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  wrong-model:
    - device-filter: "0x233010DE"
      devices: [0, 1]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  other-hardware:
    - device-filter: "0x20B010DE"
      devices: [0, 1, 2, 3, 4, 5, 6, 7]
      mig-enabled: true
      mig-devices: {"3g.20gb": 2}
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
"""


@pytest.fixture
def listed(tmp_path: Path) -> Path:
    path = tmp_path / "listed.yaml"
    path.write_text(LISTED, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["plan-offline", "plan", "apply"])
def test_an_index_the_node_lacks_is_an_error_on_that_node_naming_the_entry_and_the_nodes_gpus(
    command: str, listed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layouts = listed
    verb = "plan" if command == "plan-offline" else command
    node = ["--gpu-model", "2xH100-80GB-SXM"] if command == "plan-offline" else ["--simulate", "2xH100-80GB-SXM"]
    assert _run([verb, "-f", str(layouts), "-c", "typo", *node]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"migagent {verb}: {layouts}: mig-configs.typo[0] lists GPU 9, which this node does not have (it has GPUs 0-1)"
    )


def test_an_index_whose_gpu_the_entrys_filter_does_not_match_is_an_error(
    listed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["apply", "-f", str(listed), "-c", "wrong-model", "--simulate", "1xH100-80GB-SXM,1xA30-24GB"]) == 1
    err = capsys.readouterr().err
    assert "mig-configs.wrong-model[0] lists GPU 1, which its device-filter 0x233010DE does not match" in err
    assert "(GPU 1 (NVIDIA A30) is 0x20B710DE)" in err


def test_an_entry_for_other_hardware_lists_indices_freely_and_validate_warns_past_a_board(
    listed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layouts = listed
    # The A100 entry matches no GPU of this node: it is for other nodes, as in mig-parted's own files.
    assert _run(["apply", "-f", str(layouts), "-c", "other-hardware", "--simulate", "2xH100-80GB-SXM"]) == 0
    capsys.readouterr()
    assert _run(["validate", "-f", str(layouts), "-c", "typo"]) == 0
    err = capsys.readouterr().err
    assert "warning: mig-configs.typo[0] lists GPU 9, which only a node of 10 or more GPUs has" in err
    assert _run(["validate", "-f", str(layouts), "-c", "wrong-model"]) == 0
    assert "warning" not in capsys.readouterr().err
