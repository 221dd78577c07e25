"""Plain-text tables for the bench's stdout: a header, a rule, and right-aligned numbers."""

from __future__ import annotations

from collections.abc import Sequence

Cell = str | int | float


def _text(cell: Cell) -> str:
    if isinstance(cell, float):
        return f"{cell:.2f}"
    return str(cell)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    texts = [[_text(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in texts]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        # The first column names the row; every other column holds a figure.
        parts = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(list(headers)), rule, *(line(row) for row in texts)])


def percent(share: float) -> str:
    return f"{100 * share:.1f}%"


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]
