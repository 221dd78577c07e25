"""The boot id: a journal written in another boot describes GPU instances that no longer exist.

A reboot (or driver reload) destroys every GPU and compute instance, so a plan journaled before it
cannot be resumed; the engine compares boot ids and plans again when they differ.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from migagent.errors import PermanentError

BootIdProvider = Callable[[], str]

LINUX_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def read_boot_id(path: Path = LINUX_BOOT_ID) -> str:
    """The kernel's random per-boot UUID."""
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError as exc:
        raise PermanentError(f"cannot read the boot id from {path}: {exc.strerror or exc}") from exc


class FixedBootId:
    """A boot id a test (or a simulated node) controls; `reboot()` starts a new boot."""

    def __init__(self, boot_id: str = "boot-1") -> None:
        self.boot_id = boot_id
        self._boots = 1

    def __call__(self) -> str:
        return self.boot_id

    def reboot(self) -> str:
        self._boots += 1
        self.boot_id = f"boot-{self._boots}"
        return self.boot_id
