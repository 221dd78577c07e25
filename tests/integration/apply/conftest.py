from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.apply.support import SimNode


@pytest.fixture
def make_node(tmp_path: Path) -> Callable[[str], SimNode]:
    """Build simulated nodes, each with its own journal directory under tmp_path."""
    count = iter(range(1_000))

    def make(spec: str) -> SimNode:
        return SimNode(spec, tmp_path / f"journal-{next(count)}")

    return make
