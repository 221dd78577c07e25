"""Where scripts/nvidia_tools.sh put NVIDIA's binaries (its default folder, or MIGAGENT_NVIDIA_TOOLS_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

SCRIPT = "scripts/nvidia_tools.sh"
STAMP = "mig-parted v0.10.0 k8s-device-plugin v0.18.2"
BINARIES = ("nvidia-device-plugin", "gpu-feature-discovery", "config-manager")


def tools_dir() -> Path:
    explicit = os.environ.get("MIGAGENT_NVIDIA_TOOLS_DIR")
    if explicit:
        return Path(explicit)
    return Path.home() / ".cache/migagent/nvidia-tools/mig-parted-v0.10.0-k8s-device-plugin-v0.18.2"


def missing_tools() -> str | None:
    """Why the tools cannot be used (one line naming the script), or None when they are built."""
    directory = tools_dir()
    stamp = directory / "STAMP"
    built = stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == STAMP
    if built and all(os.access(directory / name, os.X_OK) for name in BINARIES):
        return None
    return f"NVIDIA's tools are not built in {directory}: run {SCRIPT}"
