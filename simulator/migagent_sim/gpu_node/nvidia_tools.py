"""Where scripts/nvidia_tools.sh puts NVIDIA's tools (same default, same overrides), for the suites
and scenarios that run them on a simulated node."""

from __future__ import annotations

import os
import re
from pathlib import Path

from migagent_sim.gpu_node.checkout import checkout_file

SCRIPT = "scripts/nvidia_tools.sh"
BINARIES = (
    "nvidia-mig-parted",
    "nvidia-mig-manager",
    "nvidia-device-plugin",
    "gpu-feature-discovery",
    "config-manager",
)
_DEFAULT = re.compile(r"^(mig_parted_version|device_plugin_version)=\$\{[A-Z_]+:-(v[0-9.]+)\}$", re.MULTILINE)


def versions() -> tuple[str, str]:
    """(mig-parted, k8s-device-plugin): MIG_PARTED_VERSION / DEVICE_PLUGIN_VERSION, else the script's pins."""
    pinned = dict(_DEFAULT.findall(checkout_file(SCRIPT).read_text(encoding="utf-8")))
    mig_parted = os.environ.get("MIG_PARTED_VERSION") or pinned["mig_parted_version"]
    return mig_parted, os.environ.get("DEVICE_PLUGIN_VERSION") or pinned["device_plugin_version"]


def tools_dir() -> Path:
    explicit = os.environ.get("MIGAGENT_NVIDIA_TOOLS_DIR")
    if explicit:
        return Path(explicit)
    mig_parted, device_plugin = versions()
    name = f"mig-parted-{mig_parted}-k8s-device-plugin-{device_plugin}"
    return Path.home() / ".cache/migagent/nvidia-tools" / name


def missing_tools() -> str | None:
    """Why the tools cannot be used (a one-line message naming the script), or None when built."""
    directory = tools_dir()
    mig_parted, device_plugin = versions()
    stamp = directory / "STAMP"
    built = stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == (
        f"mig-parted {mig_parted} k8s-device-plugin {device_plugin}"
    )
    if built and all(os.access(directory / name, os.X_OK) for name in BINARIES):
        return None
    return f"NVIDIA's tools are not built in {directory}: run {SCRIPT}"
