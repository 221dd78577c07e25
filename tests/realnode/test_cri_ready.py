"""The node starts its kubelet only once containerd's CRI answers (node.cri_ready)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from tests.realnode.node import cri_ready


def test_no_socket_is_not_ready(tmp_path: Path) -> None:
    assert not cri_ready(tmp_path / "containerd.sock")


def test_a_socket_that_answers_no_cri_is_not_ready(tmp_path: Path) -> None:
    # containerd's socket before its CRI plugin is initialized answers, but not Version.
    socket = tmp_path / "containerd.sock"
    with ThreadPoolExecutor(max_workers=1) as pool:
        server = grpc.server(pool)
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        try:
            assert socket.exists()
            assert not cri_ready(socket)
        finally:
            server.stop(grace=None).wait()
