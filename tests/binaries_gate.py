"""Suites that need binaries built outside the repository (tests/realkube: the control plane;
tests/judge: NVIDIA's tools): without them every test of the suite is skipped at collection and
the run ends with one line naming the script; with the suite's MIGAGENT_REQUIRE_* variable set to
1 (what .ci/run does) a missing binary is an error instead, so CI cannot pass with them skipped."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class BinariesGate:
    suite: Path  # the suite's directory
    required_by: str  # the variable that makes a missing binary an error
    missing: Callable[[], str | None]  # why the binaries cannot be used, naming the script; None: built
    timeout_s: float | None = None  # pytest-timeout's bound for the suite's tests, when above the default
    _skipped: pytest.StashKey[tuple[int, str]] = field(default_factory=pytest.StashKey)

    def collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        ours = [item for item in items if self.suite in Path(str(item.path)).resolve().parents]
        if self.timeout_s is not None:
            for item in ours:
                _at_least(item, self.timeout_s)
        ours = [item for item in ours if item.get_closest_marker("skip") is None]  # a nested suite's gate said it
        message = self.missing() if ours else None
        if message is None:
            return
        if os.environ.get(self.required_by) == "1":
            raise pytest.UsageError(f"{self.required_by}=1 and {message}")
        skip = pytest.mark.skip(reason=message)
        for item in ours:
            item.add_marker(skip)
        config.stash[self._skipped] = (len(ours), message)

    def terminal_summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        if self._skipped in config.stash:
            count, message = config.stash[self._skipped]
            terminalreporter.write_line(f"{self.suite.relative_to(_ROOT)}: {count} tests skipped: {message}")


def _at_least(item: pytest.Item, timeout_s: float) -> None:
    """A nested suite's gate and its parent's may both bound a test: the longer bound wins."""
    current = item.get_closest_marker("timeout")
    if current is None or float(current.args[0]) < timeout_s:
        item.add_marker(pytest.mark.timeout(timeout_s), append=False)
