"""MIG with time-slicing (issue 20): the agent expects what the device plugin really advertises when its
sharing config replicates MIG devices, chosen per node by `nvidia.com/device-plugin.config`.

Two H100s in all-1g.10gb hold 14 1g.10gb devices; replicated twice the node advertises 28, under
`nvidia.com/mig-1g.10gb.shared` with `renameByDefault: true`. Before this, every change on such a
node ended `failed` and a correct idle node had its plugin restarted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from migagent.attempt.listener import Outcome
from migagent.node.names import CONDITION_TYPE, DESIRED_ANNOTATION
from migagent_sim.cluster import SimCluster, time_slicing_config
from tests.integration.agent.support import (
    SMALL,
    JsonDict,
    applied,
    eventually,
    node_when,
    paused_labels,
    state,
)

CONFIG_MAP = ("gpu-operator", "time-slicing-config")  # what components/device-plugin-config grants
TWICE = {"any": time_slicing_config(2), "four": time_slicing_config(4)}
TWICE_RENAMED = {"any": time_slicing_config(2, rename_by_default=True), "four": time_slicing_config(4)}
MakeCluster = Callable[..., SimCluster]


def _sharing_cluster(
    make_cluster: MakeCluster,
    configs: dict[str, str],
    *,
    plugin_lag_s: float = 0.0,
    agent_reads_plugin_config: bool = True,
    gfd_labels: bool = False,
) -> SimCluster:
    config = replace(
        SMALL,
        plugin_configs=configs,
        plugin_config_map=CONFIG_MAP,
        plugin_default_config="any",
        plugin_lag_s=plugin_lag_s,
        agent_reads_plugin_config=agent_reads_plugin_config,
        gfd_labels=gfd_labels,
    )
    return make_cluster(config)


def _nonzero(cluster: SimCluster) -> dict[str, int]:
    return {name: count for name, count in cluster.kubelet.plugin_resources().items() if count}


def _watch_node(cluster: SimCluster) -> list[JsonDict]:
    writes: list[JsonDict] = []
    cluster.api.on_node_changed(writes.append)
    return writes


def _cordoned(writes: list[JsonDict]) -> bool:
    return any(node["spec"].get("unschedulable") for node in writes)


def _plugin_uid(cluster: SimCluster) -> str:
    return str((cluster.kubelet.plugin_pod or {})["metadata"]["uid"])


@pytest.mark.parametrize(("configs", "resource"), [
    (TWICE, "nvidia.com/mig-1g.10gb"),
    (TWICE_RENAMED, "nvidia.com/mig-1g.10gb.shared"),
], ids=["not-renamed", "renamed-by-default"])
def test_an_idle_correct_node_whose_plugin_replicates_1g_twice_is_applied_with_no_cordon_and_no_plugin_restart(
    configs: dict[str, str], resource: str, make_cluster: MakeCluster
) -> None:
    cluster = _sharing_cluster(make_cluster, configs)
    uid, writes = _plugin_uid(cluster), _watch_node(cluster)
    agent, _ = cluster.build_agent()

    assert agent.reconcile_once() is Outcome.UNCHANGED

    assert _nonzero(cluster) == {resource: 28}
    assert state(cluster) == "success"
    # read through the one grant components/device-plugin-config adds, not guessed (once by the re-check
    # made without the Lease, once by the attempt that holds it to write the first success report)
    reads = [(r.verb, r.name, r.status) for r in cluster.api.requests if r.resource == "configmaps"]
    assert reads == [("get", "time-slicing-config", 200)] * 2
    assert not _cordoned(writes)
    assert _plugin_uid(cluster) == uid
    assert paused_labels(cluster) == []


@pytest.mark.parametrize(("configs", "shared"), [(TWICE, ""), (TWICE_RENAMED, ".shared")],
                         ids=["not-renamed", "renamed-by-default"])
def test_a_label_change_on_a_replicating_node_ends_success_with_the_replicated_count_advertised(
    configs: dict[str, str], shared: str, make_cluster: MakeCluster
) -> None:
    cluster = _sharing_cluster(make_cluster, configs)
    cluster.start_agent()
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")

    cluster.label("all-balanced")

    node_when(cluster, lambda n: applied(n, "all-balanced"), what="all-balanced applied")
    # Per GPU: two 1g.10gb (x2 replicas), one 2g.20gb, one 3g.40gb; the 2g and 3g are not replicated.
    assert _nonzero(cluster) == {
        f"nvidia.com/mig-1g.10gb{shared}": 8,
        "nvidia.com/mig-2g.20gb": 2,
        "nvidia.com/mig-3g.40gb": 2,
    }


def test_switching_only_the_plugins_sharing_config_causes_no_cordon_and_no_restart_by_the_agent(
    make_cluster: MakeCluster,
) -> None:
    # The plugin takes a while to come back (its config manager restarts it in place): the agent
    # sees the old advertisement first, re-computes what to expect, and waits for the plugin.
    cluster = _sharing_cluster(make_cluster, TWICE, plugin_lag_s=0.3)
    eventually(lambda: _nonzero(cluster), what="the plugin's first registration")
    agent, _ = cluster.build_agent()
    assert agent.reconcile_once() is Outcome.UNCHANGED
    uid, writes = _plugin_uid(cluster), _watch_node(cluster)

    cluster.select_plugin_config("four")
    outcome = agent.reconcile_once()

    assert outcome is Outcome.UNCHANGED
    assert _nonzero(cluster) == {"nvidia.com/mig-1g.10gb": 56}
    assert cluster.kubelet.plugin_config_restarts == 1
    assert _plugin_uid(cluster) == uid, "the agent restarted the device plugin"
    assert not _cordoned(writes)
    assert paused_labels(cluster) == []
    assert state(cluster) == "success"


def test_the_running_agent_wakes_on_a_sharing_config_change_and_never_cordons(make_cluster: MakeCluster) -> None:
    cluster = _sharing_cluster(make_cluster, TWICE, plugin_lag_s=0.3)
    cluster.start_agent()
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    writes = _watch_node(cluster)
    reads_before = len(cluster.api.requests)

    cluster.select_plugin_config("four")

    eventually(lambda: _nonzero(cluster) == {"nvidia.com/mig-1g.10gb": 56}, what="the plugin's new advertisement")
    eventually(
        lambda: any(r.resource == "configmaps" for r in cluster.api.requests[reads_before:]),
        what="the agent to re-read the plugin's config after the label change",
    )
    assert not _cordoned(writes)
    assert state(cluster) == "success"


def test_a_node_selecting_a_config_the_agent_cannot_read_waits_for_a_stable_advertisement_and_says_so(
    make_cluster: MakeCluster,
) -> None:
    """The fact encoded: nothing tells the agent the replicas (no ConfigMap grant, no GFD labels)."""
    cluster = _sharing_cluster(make_cluster, TWICE, agent_reads_plugin_config=False)
    cluster.select_plugin_config("any")
    writes = _watch_node(cluster)
    cluster.start_agent()
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")

    cluster.label("all-balanced")

    eventually(
        lambda: state(cluster) == "success"
        and "all-balanced" in cluster.node()["metadata"]["annotations"].get(DESIRED_ANNOTATION, ""),
        what="all-balanced applied without knowing the replicas",
    )
    messages = [
        c.get("message", "")
        for node in writes
        for c in node.get("status", {}).get("conditions", [])
        if c["type"] == CONDITION_TYPE and c["reason"] == "WaitingForDevicePlugin"
    ]
    assert any("not known" in m and "stable for" in m and "nvidia.com/device-plugin.config" in m for m in messages)
    assert _nonzero(cluster)["nvidia.com/mig-1g.10gb"] == 8


def test_gpu_feature_discovery_labels_tell_the_agent_the_replicas_when_the_config_map_is_not_readable(
    make_cluster: MakeCluster,
) -> None:
    cluster = _sharing_cluster(make_cluster, TWICE, agent_reads_plugin_config=False, gfd_labels=True)
    eventually(lambda: cluster.node()["metadata"]["labels"].get("nvidia.com/mig-1g.10gb.replicas") == "2",
               what="GFD's replicas label")
    uid, writes = _plugin_uid(cluster), _watch_node(cluster)
    agent, _ = cluster.build_agent()

    assert agent.reconcile_once() is Outcome.UNCHANGED

    assert not _cordoned(writes)
    assert _plugin_uid(cluster) == uid
