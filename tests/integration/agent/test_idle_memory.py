"""Issue 37 item 9: the agent gives freed memory back (a full collection and malloc_trim) after an
attempt that changed something, not after every idle re-check: a pool's agents share one process and
re-check every fraction of a second, and a full collection costs about 0.1 s of CPU each time.

Full collections are counted through `gc.callbacks` with the automatic collector off, so each one
counted is an explicit `gc.collect()`."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import applied, eventually, node_when


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    counted: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            counted.append(1)

    enabled = gc.isenabled()
    gc.disable()
    gc.callbacks.append(count)
    try:
        yield counted
    finally:
        gc.callbacks.remove(count)
        if enabled:
            gc.enable()


def test_idle_re_checks_do_not_collect_but_a_change_does(cluster: SimCluster, full_collections: list[int]) -> None:
    options = cluster.options(resync_period_s=0.02)
    running = cluster.start_agent(replace(options, watch=replace(options.watch, resync_period_s=0.02)))
    try:
        node_when(cluster, lambda n: applied(n, "all-1g.10gb"), what="the starting layout reported")
        eventually(lambda: running.agent.reconciles >= 12, what="a dozen idle re-checks")
        assert len(full_collections) == 1, f"{len(full_collections)} full collections in {running.agent.reconciles}"

        cluster.label("all-balanced")
        node_when(cluster, lambda n: applied(n, "all-balanced"), what="all-balanced applied")
        eventually(lambda: len(full_collections) >= 2, what="the memory the change freed given back")
    finally:
        running.stop()
