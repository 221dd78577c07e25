"""Where scripts/nvidia_tools.sh put NVIDIA's binaries (its default folder, or MIGAGENT_NVIDIA_TOOLS_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def nvidia_tools_required() -> bool:
    """MIGAGENT_REQUIRE_NVIDIA_TOOLS=1 (what .ci/run sets): missing tools are an error, not a skip."""
    return os.environ.get("MIGAGENT_REQUIRE_NVIDIA_TOOLS") == "1"


def needs_nvidia_tools() -> pytest.MarkDecorator:
    """For a module outside tests/nvidia: skip it without the tools (or fail, when they are required)."""
    message = missing_tools()
    if message is not None and nvidia_tools_required():
        pytest.fail(f"MIGAGENT_REQUIRE_NVIDIA_TOOLS=1 and {message}", pytrace=False)
    return pytest.mark.skipif(message is not None, reason=message or "")
