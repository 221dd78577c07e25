"""Generate large, valid layout files for the loader bench and the large-file tests.

`generate(size)` repeats the shipped layouts file's configs under new names (`all-1g.10gb-17`)
until the text reaches `size` bytes: the shape a generated fleet-wide file has (many configs with
device filters), every config valid on a catalog model.
"""

from __future__ import annotations

import re
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "configs" / "mig-layouts" / "mig-layouts.yaml"
_CONFIG_NAME = re.compile(r"^  ([^ #][^:]*):", flags=re.M)


def generate(size: int) -> str:
    """A valid layout file of at least `size` bytes (and less than one copy of the shipped file more)."""
    body = SHIPPED.read_text(encoding="utf-8").split("mig-configs:\n", 1)[1]
    parts = ["version: v1\nmig-configs:\n"]
    written, copy = len(parts[0]), 0
    while written < size:
        renamed = _CONFIG_NAME.sub(rf"  \1-{copy}:", body)
        parts.append(renamed)
        written += len(renamed)
        copy += 1
    return "".join(parts)
