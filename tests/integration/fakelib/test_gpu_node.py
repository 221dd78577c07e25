"""`python -m migagent_sim.gpu_node`: a command on a simulated node sees the driver's files at their
fixed paths (a private mount namespace; these tests run as root, as .ci/run does), the fake library
and nvidia-smi first on its paths, and the node's state; the host sees none of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from migagent.sim.state import SimNodeState
from migagent_sim.gpu_node.session import NodeSession

SHOW = (
    "cat /proc/modules; ls /sys/bus/pci/devices | grep '^0000:1'; cat /sys/bus/pci/devices/0000:19:00.0/device;"
    " basename $(readlink /sys/bus/pci/devices/0000:19:00.0/driver);"
    " grep -c '^gpu' /proc/driver/nvidia-caps/mig-minors;"
    " stat -c '%F %t:%T' /dev/nvidia1 /dev/nvidia-caps/nvidia-cap1; grep nvidia /proc/devices; which nvidia-smi;"
    ' echo "$MIGAGENT_FAKE_NVML_STATE"; cat /proc/self/comm'
)


def _gpu_node(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "migagent_sim.gpu_node", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_a_command_on_the_node_sees_the_drivers_files_and_the_host_does_not(
    fake_nvml_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "node.json"
    result = _gpu_node(
        "run", "--state", str(state), "--spec", "2xH100-80GB-SXM", "--lib", str(fake_nvml_dir), "--", "sh", "-c", SHOW
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("nvidia ")
    assert lines[1:3] == ["0000:18:00.0", "0000:19:00.0"]
    assert lines[3:5] == ["0x2330", "nvidia"]  # H100 SXM; go-nvlib reads the driver link's last element
    assert lines[5] == str(2 * 15 * 9)  # gpuN/giM and gpuN/giM/ciK lines of both GPUs
    assert lines[6:8] == ["character special file c3:1", "character special file 1fc:1"]  # 195:1, 508:1 (hex)
    assert {"195 nvidia-frontend", "508 nvidia-caps", "509 nvidia-uvm"} <= set(lines[8:11])
    assert lines[11] == str(fake_nvml_dir / "nvidia-smi")
    assert lines[12:] == [str(state.resolve()), "cat"], "the node's state, and /proc/self still names the reader"
    assert [gpu.model_key for gpu in SimNodeState.load(state).gpus] == ["H100-80GB-SXM"] * 2
    assert not Path("/proc/driver/nvidia-caps").exists(), "nothing mounted reaches the host"


def test_the_exit_status_of_the_command_is_the_runs(fake_nvml_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    assert (
        _gpu_node(
            "run", "--state", str(state), "--spec", "A30-24GB", "--lib", str(fake_nvml_dir), "--", "sh", "-c", "exit 7"
        ).returncode
        == 7
    )


def test_a_missing_state_without_a_spec_is_a_usage_error_naming_the_flag(tmp_path: Path) -> None:
    result = _gpu_node("run", "--state", str(tmp_path / "none.json"), "--", "true")
    assert result.returncode == 2
    assert "add --spec" in result.stderr.splitlines()[-1]
    assert not (tmp_path / "none.json").exists()


def test_files_writes_the_tree_as_a_dev_and_driver_root(fake_nvml_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    result = _gpu_node(
        "files",
        "--state",
        str(tmp_path / "n.json"),
        "--spec",
        "A100-80GB",
        "--lib",
        str(fake_nvml_dir),
        "--root",
        str(root),
    )
    assert result.returncode == 0, result.stderr
    assert (
        (root / "proc/driver/nvidia-caps/mig-minors").read_text().startswith("config 1\nmonitor 2\ngpu0/gi0/access 3\n")
    )
    assert (root / "sys/bus/pci/devices/0000:18:00.0/vendor").read_text() == "0x10de\n"
    assert (root / "dev/nvidia0").is_char_device()
    assert (root / "usr/bin/nvidia-smi").resolve() == (fake_nvml_dir / "nvidia-smi").resolve()


def test_a_session_runs_many_commands_in_one_namespace_on_nodes_of_its_shape(
    fake_nvml_dir: Path, tmp_path: Path
) -> None:
    with NodeSession(tmp_path / "a.json", spec="2xA100-80GB", library=fake_nvml_dir) as node:
        first = node.run(["cat", "/proc/modules"])
        other = node.run(
            ["nvidia-smi", "-L"], state=tmp_path / "b.json", env={"MIGAGENT_FAKE_NVML_SPEC": "2xA100-80GB"}
        )
    assert first.stdout.startswith("nvidia "), first.stderr
    assert other.returncode == 0, other.stderr
    assert other.stdout.count("NVIDIA A100-SXM4-80GB") == 2
    assert (tmp_path / "b.json").exists()


def test_a_file_mounted_under_dev_stays_there_as_in_a_pod(fake_nvml_dir: Path, tmp_path: Path) -> None:
    # The kubelet binds each container's /dev/termination-log, a file: the node's /dev is laid over the
    # container's with it kept (the device plugin's pod on a real node failed with "Not a directory").
    message = tmp_path / "termination-log"
    message.write_text("kept\n", encoding="utf-8")
    # (over /dev/full, in a namespace of its own: a new file in the host's /dev would outlive the test)
    pod_dev = (
        f"mount --bind {message} /dev/full && exec {sys.executable} -m migagent_sim.gpu_node run"
        f" --state {tmp_path / 'node.json'} --spec A30-24GB --lib {fake_nvml_dir}"
        " -- sh -c 'cat /dev/full; test -c /dev/nvidia0'"
    )
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", pod_dev],
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "kept\n"
