from __future__ import annotations

from tests.unit.node.conftest import logs

__all__ = ["logs"]
