"""The demand bench on a short trace: each policy's row has the structure the README reads. Structure
and orderings that follow from the policies' rules, never times."""

from __future__ import annotations

from bench.demand_bench import LAYOUTS, replay, table
from bench.demand_traces import SEVEN_G, THREE_G, Arrival, Trace, alternating


def _trace() -> Trace:
    """Two nodes of two H100 in all-balanced; whole-GPU pods arrive, which no balanced GPU offers."""
    arrivals = (Arrival(0.0, SEVEN_G, 1800.0), Arrival(30.0, THREE_G, 600.0), Arrival(60.0, SEVEN_G, 1800.0))
    return Trace("short", 3600.0, tuple(sorted(arrivals, key=lambda a: a.at)), nodes=2, gpus=2)


def test_the_static_layout_never_serves_a_profile_it_lacks_and_the_autopilot_and_oracle_do() -> None:
    layouts = LAYOUTS.read_text(encoding="utf-8")
    static, autopilot, oracle = (replay(_trace(), name, layouts=layouts) for name in ("static", "autopilot", "oracle"))
    assert (static.pods, static.started, static.changes) == (3, 1, 0)  # the 3g.40gb pod only
    assert autopilot.started == autopilot.pods == 3
    assert oracle.started == oracle.pods == 3
    assert 0 < autopilot.changes <= 2
    assert autopilot.evicted == oracle.evicted == 0
    assert max(oracle.waits) <= max(autopilot.waits) < max(static.waits)
    text = table(_trace(), [static, autopilot, oracle])
    assert text.splitlines()[2].split()[:3] == ["policy", "pods", "pending-p50-min"]


def test_a_demand_that_alternates_faster_than_it_must_persist_changes_nothing() -> None:
    layouts = LAYOUTS.read_text(encoding="utf-8")
    trace = alternating().first(1800.0)
    result = replay(trace, "autopilot", layouts=layouts)
    assert (result.changes, result.gpus_reconfigured, result.evicted) == (0, 0, 0)
