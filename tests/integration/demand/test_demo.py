"""`migagent demo autopilot`: the layouts follow the demand across a pool, never on a node not opted in."""

from __future__ import annotations

import re

import pytest

from migagent.cli import main


def test_demo_autopilot_follows_the_demand_and_leaves_the_node_not_opted_in_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "autopilot"]) == 0
    out = capsys.readouterr().out
    advise = out[out.index("== migagent advise"):out.index("== the autopilot")]
    assert "gpu-h100-3  all-1g.10gb  all-3g.40gb" in advise  # the idle opted-in node, no eviction
    assert "4 after the changes, 0 unserved" in advise
    assert "the training pods run on ['gpu-h100-3']" in out
    # Priority 0 pods evicted for the priority 1000 ones. Each pod must have waited --persist, and a
    # creationTimestamp has whole seconds: when the two were created either side of a second, a look
    # between the two waits serves the first alone (the second then runs on the same node's other GPU).
    assert re.search(r"gpu-h100-2: all-1g\.10gb -> all-7g; serves [12] pod\(s\), evicts 7: ml/infer-3, ", out)
    assert "they run on ['gpu-h100-2']" in out
    history = out[out.index("== migagent autopilot history"):]
    assert history.count(" changed  rollout autopilot-") == 2
    assert history.count(" rollout-done  rollout autopilot-") == 2
    assert "gpu-h100-4 (not opted in) changed 0 time(s)" in out
    assert out.rstrip().endswith("autopilot demo succeeded")
