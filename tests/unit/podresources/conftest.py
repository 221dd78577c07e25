from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def socket_path(tmp_path: Path) -> Iterator[str]:
    """A socket path in tmp_path, or in a short temporary folder when tmp_path is too deep for AF_UNIX."""
    path = tmp_path / "kubelet.sock"
    if len(str(path)) <= 100:
        yield str(path)
        return
    with tempfile.TemporaryDirectory(prefix="pr-") as short:
        yield str(Path(short) / "kubelet.sock")
