"""NVIDIA's GPU Feature Discovery run once on the simulated node: the labels it would give the Node.

`gpu-feature-discovery --oneshot --no-timestamp --output-file F` (v0.18.2, built by
scripts/nvidia_tools.sh) with the MIG strategy and, optionally, the same plugin config file the
device plugin reads (its sharing section sets the `.replicas`, `.sharing-strategy` and `-SHARED`
product labels). GFD writes `key=value` lines; Node Feature Discovery turns them into labels as
they are.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from migagent.layout.strategy import MigStrategy

NodeCommand = Callable[[Sequence[str]], tuple[list[str], dict[str, str]]]
_TIMEOUT_S = 120.0


class GfdError(RuntimeError):
    """GPU Feature Discovery exited with an error; the message carries its last lines."""


def discover_labels(
    gfd: Path,
    node_command: NodeCommand,
    *,
    strategy: MigStrategy,
    workdir: Path,
    config: str | None = None,
    machine_type: str = "DGX-H100",
) -> dict[str, str]:
    """Run GFD once on the node and return the labels it writes (timestamp left out)."""
    output = workdir / "gfd-labels"
    output.unlink(missing_ok=True)
    machine_type_file = workdir / "product_name"
    machine_type_file.write_text(machine_type + "\n", encoding="utf-8")
    args = [
        str(gfd), "--oneshot", "--no-timestamp", "--mig-strategy", str(strategy),
        "--output-file", str(output), "--machine-type-file", str(machine_type_file),
    ]  # fmt: skip
    if config is not None:
        config_file = workdir / "gfd-config.yaml"
        config_file.write_text(config, encoding="utf-8")
        args += ["--config-file", str(config_file)]
    argv, env = node_command(args)
    done = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    )
    if done.returncode != 0 or not output.exists():
        tail = " | ".join(line for line in done.stderr.splitlines()[-3:] if line.strip())
        raise GfdError(f"gpu-feature-discovery exited with status {done.returncode}: {tail}")
    return parse_labels(output.read_text(encoding="utf-8"))


def parse_labels(text: str) -> dict[str, str]:
    """GFD's output file: one `key=value` per line."""
    labels: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key:
            labels[key] = value
    return labels
