"""The skip summary of a plain `pytest` without the built binaries: one line per gated suite, named by its
path (tests/realkube/head_to_head, not tests/head_to_head), each test counted once although the suite
sits inside another gated one (tests/realkube's gate counted head_to_head's 7 tests again)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.binaries_gate import BinariesGate

TESTS = Path(__file__).resolve().parents[1]


@dataclass
class _Item:
    path: Path
    markers: list[pytest.Mark] = field(default_factory=list)

    def add_marker(self, marker: pytest.MarkDecorator, append: bool = True) -> None:
        self.markers.append(marker.mark)

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((mark for mark in reversed(self.markers) if mark.name == name), None)


@dataclass
class _Config:
    stash: pytest.Stash = field(default_factory=pytest.Stash)


@dataclass
class _Reporter:
    lines: list[str] = field(default_factory=list)

    def write_line(self, line: str) -> None:
        self.lines.append(line)


@pytest.mark.parametrize("nested_first", [True, False])
def test_a_suite_inside_another_is_named_by_its_path_and_its_tests_are_counted_once(nested_first: bool) -> None:
    outer = BinariesGate(TESTS / "realkube", "REQUIRE_OUTER", lambda: "no control plane")
    inner = BinariesGate(TESTS / "realkube/head_to_head", "REQUIRE_INNER", lambda: "no NVIDIA tools")
    items = [_Item(TESTS / "realkube/test_a.py") for _ in range(3)]
    items += [_Item(TESTS / "realkube/head_to_head/test_b.py") for _ in range(7)]
    config, reporter = _Config(), _Reporter()
    for gate in (inner, outer) if nested_first else (outer, inner):  # pytest's order of conftest hooks
        gate.collection_modifyitems(config, items)  # type: ignore[arg-type]
    for gate in (outer, inner):
        gate.terminal_summary(reporter, config)  # type: ignore[arg-type]
    assert all(len([m for m in item.markers if m.name == "skip"]) == 1 for item in items)
    counted = sum(int(line.split(": ")[1].split()[0]) for line in reporter.lines)
    assert counted == 10
    expected_inner = ["tests/realkube/head_to_head: 7 tests skipped: no NVIDIA tools"] if nested_first else []
    assert reporter.lines == [f"tests/realkube: {3 if nested_first else 10} tests skipped: no control plane",
                              *expected_inner]
