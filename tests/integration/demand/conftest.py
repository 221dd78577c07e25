from __future__ import annotations

from tests.integration.rollout.conftest import make_pool

__all__ = ["make_pool"]
