"""GPU indices as people read them: `GPUs 0-3, 5`, not `GPU 0, GPU 1, GPU 2, GPU 3, GPU 5`."""

from __future__ import annotations

from collections.abc import Iterable


def gpu_ranges(indices: Iterable[int]) -> str:
    """`0-3, 5, 7-8`: sorted GPU indices, runs joined."""
    runs: list[list[int]] = []
    for index in sorted(set(indices)):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def gpus_named(indices: Iterable[int]) -> str:
    """`GPU 3`, `GPUs 0-7` or `GPUs 0, 2`; `no GPU` for none."""
    unique = set(indices)
    if not unique:
        return "no GPU"
    return f"GPU{'s' if len(unique) > 1 else ''} {gpu_ranges(unique)}"
