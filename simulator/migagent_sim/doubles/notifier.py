"""What a host agent tells systemd, kept in memory for tests."""

from __future__ import annotations


class RecordingNotifier:
    """The in-memory `Notifier` (migagent.plumbing.sdnotify): keeps every message instead of sending it."""

    def __init__(self, *, watchdog_interval_s: float | None = None) -> None:
        self._interval = watchdog_interval_s
        self.messages: list[str] = []

    @property
    def watchdog_interval_s(self) -> float | None:
        return self._interval

    @property
    def statuses(self) -> list[str]:
        lines = (line for message in self.messages for line in message.splitlines())
        return [line.removeprefix("STATUS=") for line in lines if line.startswith("STATUS=")]

    def ready(self, status: str) -> None:
        self.messages.append(f"READY=1\nSTATUS={status}")

    def status(self, text: str) -> None:
        self.messages.append(f"STATUS={text}")

    def watchdog(self) -> None:
        self.messages.append("WATCHDOG=1")

    def stopping(self, status: str) -> None:
        self.messages.append(f"STOPPING=1\nSTATUS={status}")
