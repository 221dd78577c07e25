"""Build the fake libnvidia-ml.so.1 and run NVML clients over it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pynvml

REPO = Path(__file__).resolve().parents[3]
LAYOUTS = REPO / "configs" / "mig-layouts" / "mig-layouts.yaml"
BUILD_SCRIPT = REPO / "scripts" / "build_fake_nvml.sh"
# The nvmlReturn_t values of nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h).
NVML_H_RETURN_CODES = (*range(31), 999)


def build(directory: Path, *options: str) -> Path:
    """`scripts/build_fake_nvml.sh DIR` with this interpreter baked into DIR/nvidia-smi."""
    subprocess.run(
        [str(BUILD_SCRIPT), str(directory), *options],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    return directory


def library_env(directory: Path, state: Path, *, spec: str | None = None) -> dict[str, str]:
    """What a user exports: the library and nvidia-smi from DIR, the node in STATE."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIGAGENT_", "LD_LIBRARY_PATH"))}
    env["LD_LIBRARY_PATH"] = str(directory)
    env["PATH"] = f"{directory}{os.pathsep}{env.get('PATH', '')}"
    env["MIGAGENT_FAKE_NVML_STATE"] = str(state)
    # The reset checks read this host's /proc and /sys; a simulated node has neither (hermetic tests).
    env["MIGAGENT_HOST_ROOT"] = str(state.with_name(f"{state.name}.host"))
    if spec is not None:
        env["MIGAGENT_FAKE_NVML_SPEC"] = spec
    return env


def migagent(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process, without --simulate: the production NVML path."""
    return subprocess.run(
        [sys.executable, "-m", "migagent", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def python(env: dict[str, str], code: str, *, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def nvidia_smi(directory: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(directory / "nvidia-smi"), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def error_name(code: int) -> str:
    names: Sequence[str] = [n for n in dir(pynvml) if n.startswith("NVML_ERROR_") and getattr(pynvml, n) == code]
    return names[0] if names else str(code)
