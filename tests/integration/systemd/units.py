"""Reading the shipped unit files: every value of every key, in order (keys like Before= and
DeviceAllow= repeat, which configparser alone would collapse to the last one)."""

from __future__ import annotations

import configparser
from collections import defaultdict
from pathlib import Path

UNIT_DIR = Path(__file__).parents[3] / "systemd"
BOOT = "migagent-boot.service"
HOST = "migagent-host.service"


class Unit:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name
        text = path.read_text(encoding="utf-8")
        # The file must also be readable as plain INI (what many deployment tools do).
        configparser.ConfigParser(strict=False, interpolation=None).read_string(text, source=str(path))
        self._values: dict[tuple[str, str], list[str]] = defaultdict(list)
        section = ""
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            self._values[(section, key.strip())].append(value.strip())

    def all(self, section: str, key: str) -> list[str]:
        return list(self._values.get((section, key), []))

    def one(self, section: str, key: str) -> str:
        values = self.all(section, key)
        assert len(values) == 1, f"{self.name}: [{section}] {key}= appears {len(values)} times"
        return values[0]

    def words(self, section: str, key: str) -> set[str]:
        """The space-separated list a key accumulates over all its lines (After=, Before=, ...)."""
        return {word for value in self.all(section, key) for word in value.split()}


def load(name: str) -> Unit:
    return Unit(UNIT_DIR / name)
