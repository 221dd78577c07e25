from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def logs() -> Iterator[list[dict[str, object]]]:
    """Capture structlog events, so output never goes to a stream another test configured and closed."""
    with structlog.testing.capture_logs() as captured:
        yield captured  # type: ignore[misc]
