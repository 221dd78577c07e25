"""Suite-wide fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """`migagent.cli.main` configures structlog globally (level, renderer); undo it after each test so a
    CLI test cannot hide the info events another test reads with `structlog.testing.capture_logs`."""
    yield
    structlog.reset_defaults()
