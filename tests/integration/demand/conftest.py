from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from migagent_sim.pool import SimPool, SimPoolConfig


@pytest.fixture
def make_pool(tmp_path: Path) -> Iterator[Callable[..., SimPool]]:
    pools: list[SimPool] = []

    def make(config: SimPoolConfig | None = None, **kwargs: object) -> SimPool:
        pool = SimPool(tmp_path / f"pool-{len(pools)}", config, **kwargs)  # type: ignore[arg-type]
        pools.append(pool)
        return pool.start()

    yield make
    for pool in pools:
        pool.stop()
