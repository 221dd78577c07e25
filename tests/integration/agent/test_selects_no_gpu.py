"""The agent reports a label naming a config that selects none of its GPUs as failed, reason
LayoutSelectsNoGpu, before it touches anything: no cordon, no pause, no eviction, no GPU change."""

from __future__ import annotations

from migagent.attempt.listener import Outcome
from migagent_sim.cluster import DEMO_LAYOUTS, SimCluster
from tests.integration.agent.support import (
    SMALL_ALL_1G,
    advertised,
    assert_released,
    condition,
    request_counts,
    state,
)

OTHER_MODEL = (
    "  a100-40gb-only:\n"
    '    - device-filter: "0x20B010DE"\n      devices: all\n      mig-enabled: true\n'
    '      mig-devices:\n        "1g.5gb": 7\n'
)


def test_a_config_for_another_model_fails_as_layout_selects_no_gpu_before_cordoning(cluster: SimCluster) -> None:
    cluster.layout_file.write_text(DEMO_LAYOUTS + OTHER_MODEL, encoding="utf-8")
    agent, _ = cluster.build_agent()
    start = len(cluster.api.requests)
    cluster.label("a100-40gb-only")

    assert agent.reconcile_once() is Outcome.FAILED

    assert state(cluster) == "failed"
    failed = condition(cluster)
    assert (failed["status"], failed["reason"]) == ("False", "LayoutSelectsNoGpu")
    assert "config 'a100-40gb-only' selects none of this node's GPUs" in failed["message"]
    assert "device-filter 0x20B010DE" in failed["message"]
    assert "GPU 0 (NVIDIA H100 80GB HBM3) 0x233010DE" in failed["message"]
    reasons = [e["reason"] for e in cluster.api.events()]
    assert not {"MigCordoned", "MigDevicePluginPaused", "MigReconfiguring", "MigDraining"} & set(reasons)
    counts = request_counts(cluster, since=start)
    assert counts["create pods/eviction"] == 0
    gate_reads = [
        r for r in cluster.api.requests[start:]
        if r.resource == "pods" and r.verb == "list" and "nvidia-mig-manager" not in r.query.get("labelSelector", "")
    ]
    # One list of the node's pods serves the sole-owner check (a mig-manager pod there) and, when the
    # layout resolves, the gate; here the gate never ran, so nothing listed pods again.
    assert len(gate_reads) <= 1, "the safety gate (who uses the GPUs) was not even consulted"
    assert advertised(cluster) == SMALL_ALL_1G
    assert_released(cluster)
