"""The migagent checkout whose scripts build what the simulated node runs (the fake NVML library from
native/fake_nvml/, NVIDIA's tools by scripts/nvidia_tools.sh).

The simulator may be installed from a wheel (as .ci/run does), where its own file says nothing about
where the checkout is: MIGAGENT_SOURCE_TREE names it, else the current directory or one of its
parents (pytest and the benches run from the checkout's root), else the folder an editable install
points into."""

from __future__ import annotations

import os
from pathlib import Path

SOURCE_TREE_ENV = "MIGAGENT_SOURCE_TREE"
_MARKER = Path("scripts") / "nvidia_tools.sh"


def source_tree() -> Path | None:
    """The checkout's root, or None when none is found (an installation without sources)."""
    explicit = os.environ.get(SOURCE_TREE_ENV)
    if explicit:
        return Path(explicit).resolve()
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents, *Path(__file__).resolve().parents):
        if (candidate / _MARKER).is_file():
            return candidate
    return None


def checkout_file(relative: str) -> Path:
    """A file of the checkout, or a one-line error saying how to name the checkout."""
    root = source_tree()
    if root is None or not (root / relative).exists():
        where = f"{root} has no {relative}" if root is not None else "no migagent checkout found"
        raise FileNotFoundError(f"{where}: run from the checkout's root or set {SOURCE_TREE_ENV} to it")
    return root / relative
