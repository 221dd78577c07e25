"""Every API call is bounded by the request timeout: a server that accepts and never answers is a
timeout the agent reports, not a hang with the node cordoned."""

from __future__ import annotations

import signal
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

from migagent.cli import main
from migagent.clock import FakeClock
from migagent.errors import TransientError
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.kube.timeouts import RequestTimeout
from migagent.node.port import PodRef
from tests.integration.agent.support import eventually
from tests.integration.timeouts.silent_server import SilentServer

NODE = "gpu-node-1"
POD = PodRef("ml", "train-0", "uid-1")

CALLS: dict[str, Callable[[KubeApi], object]] = {
    "get node": lambda api: api.get_node(),
    "patch labels": lambda api: api.patch_metadata(labels={"a": "b"}),
    "cordon": lambda api: api.set_unschedulable(True),
    "set condition": lambda api: api.set_condition("MigConfigReady", "True", "Applied", "ok"),
    "emit event": lambda api: api._events.emit("Reason", "message", warning=False, node_uid="u"),
    "list pods": lambda api: api.list_pods_on_node(),
    "find pod": lambda api: api.read_pod(POD),
    "evict": lambda api: api.evict(POD),
    "delete pod": lambda api: api.delete_pod(POD),
    "watch node": lambda api: list(api.watch_node("1", timeout_s=0.5)),
}


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    with SilentServer() as server:
        yield server


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_api_call_times_out_against_a_server_that_never_answers(silent: SilentServer, call: str) -> None:
    clock = FakeClock()  # the retries' back-off passes at once; each request's own timeout is real time
    with make_api_client(kubeconfig=None, api_server=silent.url) as client:
        api = KubeApi(client, node_name=NODE, clock=clock, timeout=RequestTimeout(0.2))
        with pytest.raises(TransientError, match="timed out"):
            CALLS[call](api)
    assert silent.connections >= 1


def test_the_client_asks_the_kernel_for_tcp_keepalive() -> None:
    with make_api_client(kubeconfig=None, api_server="http://127.0.0.1:9") as client:
        options = client.rest_client.pool_manager.connection_pool_kw["socket_options"]
    assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in options


def test_a_request_timeout_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        RequestTimeout(0)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _readyz(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as refused:
        return str(refused.read().decode())
    except OSError:
        return ""


def _timed_out(port: int) -> Callable[[], str | None]:
    def check() -> str | None:
        body = _readyz(port)
        return body if "timed out" in body else None

    return check


def test_the_agent_reports_a_timeout_within_100s_against_a_server_that_never_answers(
    silent: SilentServer, tmp_path: Path
) -> None:
    layout = tmp_path / "layouts.yaml"
    layout.write_text("version: v1\nmig-configs:\n  none:\n    - devices: all\n      mig-enabled: false\n")
    port = _free_port()
    main_thread = threading.main_thread().ident
    assert main_thread is not None
    seen: list[str] = []

    def stop_once_reported() -> None:
        try:
            seen.append(eventually(_timed_out(port), what="a timeout on /readyz", timeout_s=100))
        finally:
            signal.pthread_kill(main_thread, signal.SIGTERM)

    threading.Thread(target=stop_once_reported, daemon=True).start()
    code = main(
        [
            "agent",
            "--node-name",
            NODE,
            "--config-file",
            str(layout),
            "--api-server",
            silent.url,
            "--simulate",
            "1xH100-80GB-SXM",
            "--request-timeout",
            "1",
            "--metrics-port",
            str(port),
            "--metrics-address",
            "127.0.0.1",
        ]
    )
    assert code == 0
    assert seen
    assert "cannot read or watch the node" in seen[0]
