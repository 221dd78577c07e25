"""Where the head-to-head finds what it runs, built by scripts outside the repository's tree:
the real control plane (scripts/control_plane.sh), NVIDIA's tools (scripts/nvidia_tools.sh) and the
fake libnvidia-ml.so.1 with its nvidia-smi (scripts/build_fake_nvml.sh, built here into a scratch
directory: a C compile of a few seconds)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from bench.head_to_head.managers import GpuHost
from tests.realkube.control_plane import REPO, SCRIPT, binaries_built, binaries_dir

NVIDIA_SCRIPT = "scripts/nvidia_tools.sh"
NVIDIA_BINARIES = ("nvidia-mig-manager", "nvidia-mig-parted", "reconfigure-mig.sh")


def nvidia_tools_dir() -> Path:
    """scripts/nvidia_tools.sh's directory: MIGAGENT_NVIDIA_TOOLS_DIR, else its default for its pinned versions."""
    explicit = os.environ.get("MIGAGENT_NVIDIA_TOOLS_DIR")
    if explicit:
        return Path(explicit)
    script = (REPO / NVIDIA_SCRIPT).read_text(encoding="utf-8")
    versions = dict(re.findall(r"^(mig_parted|device_plugin)_version=\$\{[A-Z_]+:-(v[0-9.]+)\}$", script, re.M))
    if set(versions) != {"mig_parted", "device_plugin"}:
        raise RuntimeError(f"cannot read the pinned versions from {NVIDIA_SCRIPT}")
    name = f"mig-parted-{versions['mig_parted']}-k8s-device-plugin-{versions['device_plugin']}"
    return Path.home() / ".cache/migagent/nvidia-tools" / name


def missing() -> str | None:
    """What is not built yet, as one line naming the scripts that build it; None when all is there."""
    problems = []
    if not binaries_built(binaries_dir()):
        problems.append(f"the real control plane ({SCRIPT})")
    tools = nvidia_tools_dir()
    if not all((tools / name).is_file() for name in NVIDIA_BINARIES):
        problems.append(f"NVIDIA's mig-manager and mig-parted ({NVIDIA_SCRIPT})")
    if not problems:
        return None
    return "not built: " + " and ".join(problems)


def build_fake_nvml(directory: Path) -> Path:
    """libnvidia-ml.so.1 and nvidia-smi in `directory`, answering from this interpreter's simulator."""
    done = subprocess.run(
        [str(REPO / "scripts/build_fake_nvml.sh"), str(directory)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/build_fake_nvml.sh failed: {done.stderr.strip()}")
    return directory


def gpu_host(scratch: Path) -> GpuHost:
    return GpuHost(fake_nvml_dir=build_fake_nvml(scratch / "fake-nvml"), nvidia_tools_dir=nvidia_tools_dir())
