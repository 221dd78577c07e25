"""sd_notify over a real unix datagram socket: the messages systemd's Type=notify and WatchdogSec= expect."""

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.plumbing.sdnotify import SdNotifier, socket_address
from tests.integration.host.support import WAIT_S, HostHarness


class NotifySocket:
    """What systemd listens on: a datagram socket whose messages the test reads."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(socket_address(name))
        self.sock.settimeout(WAIT_S)

    def receive_until(self, line: str) -> list[str]:
        """Messages up to and including the first one containing `line` (bounded wait)."""
        received: list[str] = []
        while not received or line not in received[-1].splitlines():
            received.append(self.sock.recv(4096).decode())
        return received

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def path_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    listener = NotifySocket(str(tmp_path / "notify.sock"))
    yield listener
    listener.close()


@pytest.fixture
def abstract_socket() -> Iterator[NotifySocket]:
    listener = NotifySocket(f"@migagent-test-{uuid.uuid4().hex}")
    yield listener
    listener.close()


def _notifier(listener: NotifySocket, *, watchdog_usec: str | None = None) -> SdNotifier:
    environ = {"NOTIFY_SOCKET": listener.name}
    if watchdog_usec is not None:
        environ["WATCHDOG_USEC"] = watchdog_usec
    return SdNotifier.from_environment(environ, pid=os.getpid())


def test_host_mode_sends_ready_after_the_first_apply_then_watchdog_pings_then_stopping(
    tmp_path: Path, path_socket: NotifySocket
) -> None:
    harness = HostHarness(tmp_path, notifier=_notifier(path_socket, watchdog_usec="100000"))
    with capture_logs():
        harness.start()
        try:
            before_ready = path_socket.receive_until("READY=1")
            pings = path_socket.receive_until("WATCHDOG=1")
        finally:
            harness.stop()
        after_stop = path_socket.receive_until("STOPPING=1")
    assert "STATUS=applying config a100-balanced" in before_ready  # pings may come in between
    assert before_ready[-1] == "READY=1\nSTATUS=config a100-balanced applied"
    assert pings[-1] == "WATCHDOG=1"
    assert after_stop[-1] == "STOPPING=1\nSTATUS=stopping"


def test_messages_reach_an_abstract_notify_socket(abstract_socket: NotifySocket) -> None:
    notifier = _notifier(abstract_socket)
    notifier.ready("config x applied")
    notifier.watchdog()
    notifier.stopping("stopping")
    assert abstract_socket.receive_until("STOPPING=1") == [
        "READY=1\nSTATUS=config x applied",
        "WATCHDOG=1",
        "STOPPING=1\nSTATUS=stopping",
    ]


def test_the_watchdog_interval_is_half_of_watchdog_usec(path_socket: NotifySocket) -> None:
    assert _notifier(path_socket, watchdog_usec="120000000").watchdog_interval_s == 60.0


def test_a_watchdog_meant_for_another_process_is_ignored(path_socket: NotifySocket) -> None:
    environ = {"NOTIFY_SOCKET": path_socket.name, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    assert SdNotifier.from_environment(environ, pid=os.getpid()).watchdog_interval_s is None


def test_reading_the_environment_removes_the_variables_so_child_processes_cannot_notify(
    path_socket: NotifySocket,
) -> None:
    environ = {"NOTIFY_SOCKET": path_socket.name, "WATCHDOG_USEC": "1000000", "PATH": "/bin"}
    notifier = SdNotifier.from_environment(environ, pid=os.getpid())
    assert notifier.enabled
    assert environ == {"PATH": "/bin"}


def test_without_notify_socket_nothing_is_sent_and_there_is_no_watchdog() -> None:
    notifier = SdNotifier.from_environment({"WATCHDOG_USEC": "1000000"}, pid=os.getpid())
    assert not notifier.enabled
    assert notifier.send("READY=1") is False
    assert notifier.watchdog_interval_s is None


def test_a_vanished_notify_socket_is_logged_not_raised(tmp_path: Path) -> None:
    notifier = SdNotifier(str(tmp_path / "gone.sock"))
    with capture_logs() as logs:
        assert notifier.send("READY=1") is False
    assert [e["event"] for e in logs] == ["sd_notify_failed"]
