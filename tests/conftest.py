"""Suite-wide fixtures."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from migagent.plumbing.logging import reset_logging
from tests.leftovers import no_leftovers

__all__ = ["no_leftovers"]


@pytest.fixture(autouse=True)
def _fresh_logging(no_leftovers: None) -> Iterator[None]:
    """`migagent.cli.main` configures logging for the process (structlog, and a stderr handler on the
    root logger with its level); undo it after each test so a CLI test cannot hide the info events
    another test reads with `structlog.testing.capture_logs`. It depends on `no_leftovers` so that it
    undoes this before the leftovers are counted: any other handler a test leaves still fails it."""
    root = logging.getLogger()
    level = root.level
    yield
    reset_logging()
    root.setLevel(level)


@pytest.fixture
def socket_path(tmp_path: Path) -> Iterator[str]:
    """A unix socket path in tmp_path, or in a short temporary folder when tmp_path is too deep for
    AF_UNIX (about 107 bytes)."""
    path = tmp_path / "kubelet.sock"
    if len(str(path)) <= 100:
        yield str(path)
        return
    with tempfile.TemporaryDirectory(prefix="sock-") as short:
        yield str(Path(short) / "kubelet.sock")
