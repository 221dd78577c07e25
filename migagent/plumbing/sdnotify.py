"""systemd's readiness protocol (sd_notify), spoken directly over $NOTIFY_SOCKET.

The protocol is one unix datagram per message, newline-separated `KEY=VALUE` lines; a socket name
starting with '@' is in the abstract namespace (a leading NUL byte). That is small enough to write
here, so host mode needs no systemd Python binding and works on any distribution.
"""

from __future__ import annotations

import socket
from collections.abc import MutableMapping
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)

# Variables systemd sets for the main process only: removed so that child processes (nvidia-smi,
# systemctl, hooks) cannot accidentally speak for us.
_NOTIFY_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


class Notifier(Protocol):
    @property
    def watchdog_interval_s(self) -> float | None:
        """How often to send WATCHDOG=1 (half the service's WatchdogSec), or None without a watchdog."""
        ...

    def ready(self, status: str) -> None: ...

    def status(self, text: str) -> None: ...

    def watchdog(self) -> None: ...

    def stopping(self, status: str) -> None: ...


def socket_address(name: str) -> str | bytes:
    """The address to send to: abstract names ('@foo') become b'\\0foo'; paths stay paths."""
    if name.startswith("@"):
        return b"\0" + name[1:].encode()
    return name


class SdNotifier:
    """Sends sd_notify messages; with no socket configured every call is a no-op."""

    def __init__(self, socket_name: str | None, *, watchdog_usec: int | None = None) -> None:
        self._address = socket_address(socket_name) if socket_name else None
        self._watchdog_usec = watchdog_usec

    @classmethod
    def from_environment(cls, environ: MutableMapping[str, str], *, pid: int, unset: bool = True) -> SdNotifier:
        """Read (and by default remove) NOTIFY_SOCKET / WATCHDOG_USEC / WATCHDOG_PID, as sd_notify does.

        The watchdog is ours only when WATCHDOG_PID is unset or names this process.
        """
        socket_name = environ.get("NOTIFY_SOCKET") or None
        watchdog_usec = _watchdog_usec(environ, pid=pid)
        if unset:
            for name in _NOTIFY_VARIABLES:
                environ.pop(name, None)
        return cls(socket_name, watchdog_usec=watchdog_usec)

    @property
    def enabled(self) -> bool:
        return self._address is not None

    @property
    def watchdog_interval_s(self) -> float | None:
        if self._address is None or not self._watchdog_usec:
            return None
        return self._watchdog_usec / 2 / 1_000_000

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def stopping(self, status: str) -> None:
        self.send("STOPPING=1", f"STATUS={status}")

    def send(self, *lines: str) -> bool:
        """Send one message; False (and a warning) when it could not be delivered. Never raises:
        a supervisor that went away must not take the agent down with it."""
        if self._address is None:
            return False
        message = "\n".join(line.replace("\n", " ") for line in lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(message, self._address)
        except OSError as exc:
            log.warning("sd_notify_failed", error=str(exc), message=lines[0])
            return False
        return True


def _watchdog_usec(environ: MutableMapping[str, str], *, pid: int) -> int | None:
    owner = environ.get("WATCHDOG_PID")
    if owner and owner.strip() != str(pid):
        return None
    raw = environ.get("WATCHDOG_USEC", "").strip()
    if not raw:
        return None
    try:
        usec = int(raw)
    except ValueError:
        log.warning("watchdog_usec_invalid", value=raw)
        return None
    return usec if usec > 0 else None
