"""`migagent demo autopilot`: the layouts follow the demand across a pool, never on a node not opted in."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.cli import main
from tests.ctrl_c import children_start_with_ctrl_c_on
from tests.integration.demos import STUCK_DEMO

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "configs/mig-layouts/mig-layouts.yaml")


def test_demo_autopilot_follows_the_demand_and_leaves_the_node_not_opted_in_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "autopilot", *STUCK_DEMO]) == 0
    out = capsys.readouterr().out
    advise = out[out.index("== migagent advise"):out.index("== the autopilot")]
    assert "gpu-h100-3  all-1g.10gb  all-3g.40gb" in advise  # the idle opted-in node, no eviction
    assert "4 after the changes, 0 unserved" in advise
    assert "the training pods run on gpu-h100-3\n" in out  # a list's items, not its Python repr
    # Priority 0 pods evicted for the priority 1000 ones. Each pod must have waited --persist, and a
    # creationTimestamp has whole seconds: when the two were created either side of a second, a look
    # between the two waits serves the first alone (the second then runs on the same node's other GPU).
    # Which seven inference pods the node holds is the simulated scheduler's placement, which a loaded
    # machine may make otherwise; that the change evicts its seven, priority 0, is the autopilot's choice.
    evicted = r"evicts 7: (ml/infer-\d+(, |\n)){7}"
    assert re.search(rf"gpu-h100-2: all-1g\.10gb -> all-7g; serves [12] pod\(s\), {evicted}", out)
    assert "they run on gpu-h100-2\n" in out
    history = out[out.index("== migagent autopilot history"):]
    assert history.count(" changed  rollout autopilot-") == 2
    assert history.count(" rollout-done  rollout autopilot-") == 2
    assert "gpu-h100-4 (not opted in) changed 0 time(s)" in out
    assert out.rstrip().endswith("autopilot demo succeeded")


def test_rollout_advise_and_the_autopilot_can_be_tried_against_the_lingering_demos_api_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # As the README says: `migagent demo --linger` keeps its fake API server up for these commands, with -f
    # (the demo deploys no layouts ConfigMap); `autopilot run -f` did not exist.
    with children_start_with_ctrl_c_on():  # the SIGINT below must stop it, also in a suite run with it ignored
        demo = subprocess.Popen([sys.executable, "-m", "migagent", "demo", "--linger", "600"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        assert demo.stdout is not None
        first = demo.stdout.readline()
        url = re.search(r"fake API server at (http://\S+),", first)
        assert url is not None, first
        for line in demo.stdout:  # until it lingers: its node is settled
            if line.startswith("metrics stay up"):
                break
        server = ["--api-server", url[1], "-f", SHIPPED]
        assert main(["rollout", "plan", "--all", "-c", "all-3g.40gb", *server]) == 0
        assert "gpu-node-1" in capsys.readouterr().out
        assert main(["advise", *server]) == 0
        assert "PENDING POD" in capsys.readouterr().out
        assert main(["autopilot", "run", "--dry-run", "--all", "--run-for", "1", "--poll", "0.2", *server]) == 0
        # Its events, a JSON object a line: none in a second here, or `autopilot_looks_skipped` where a
        # loaded machine made a look outlast its 0.2 s poll (suite-beside, round 2). Read apart from history's.
        ran = capsys.readouterr().out.splitlines()
        assert all("event" in json.loads(line) for line in ran), ran
        assert main(["autopilot", "history", "--api-server", url[1]]) == 0
        assert capsys.readouterr().out.startswith("autopilot: active")
    finally:
        demo.send_signal(signal.SIGINT)  # its temporary directory is removed on the way out
        try:
            demo.communicate(timeout=60)
        finally:
            if demo.poll() is None:  # not left running past this test, whatever failed
                demo.kill()
                demo.communicate()
