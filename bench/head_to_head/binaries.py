"""What the head-to-head runs, built outside the repository's tree: the real control plane
(scripts/control_plane.sh), NVIDIA's tools (scripts/nvidia_tools.sh) and the fake libnvidia-ml.so.1
with its nvidia-smi (built from this checkout on first use and cached, migagent_sim.gpu_node.library)."""

from __future__ import annotations

from bench.head_to_head.managers import GpuHost
from migagent_sim.gpu_node.library import library_dir
from migagent_sim.gpu_node.nvidia_tools import missing_tools, tools_dir
from tests.realkube.control_plane import SCRIPT, binaries_built, binaries_dir


def missing() -> str | None:
    """What is not built yet, in one line naming the scripts that build it; None when all is there."""
    problems = [] if binaries_built(binaries_dir()) else [f"the real control plane is not built: run {SCRIPT}"]
    tools = missing_tools()
    if tools is not None:
        problems.append(tools)
    return "; ".join(problems) or None


def gpu_host() -> GpuHost:
    return GpuHost(fake_nvml_dir=library_dir(), nvidia_tools_dir=tools_dir())
