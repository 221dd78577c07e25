"""`migagent status` against the fake API server, with the annotations the real agent wrote."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from migagent.cli import main
from migagent.node.names import CONDITION_TYPE, LAST_ERROR_ANNOTATION, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from migagent_sim.cluster import SimCluster, time_slicing_config
from tests.integration.agent.support import SMALL, eventually, state

FAILED_NODE = "gpu-node-2"
CPU_NODE = "cpu-node-1"
ERROR = "config 'all-9g' is not in /etc/migagent/mig-layouts.yaml; its configs are: all-1g.10gb, all-balanced"


def _mark_failed(node: dict[str, Any]) -> None:
    node["metadata"]["labels"][MIG_CONFIG_STATE_LABEL] = "failed"
    node["metadata"]["annotations"][LAST_ERROR_ANNOTATION] = ERROR
    node["status"]["conditions"].append({
        "type": CONDITION_TYPE, "status": "False", "reason": "InvalidLayout", "message": ERROR,
        "lastTransitionTime": "2020-01-01T00:00:00Z", "lastHeartbeatTime": "2020-01-01T00:00:00Z",
    })


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A 2xH100 node the real agent brought to all-1g.10gb, a second MIG node that failed, a CPU node."""
    with SimCluster(tmp_path_factory.mktemp("status"), SMALL) as sim:
        running = sim.start_agent()
        eventually(lambda: state(sim) == "success", what="the agent's first reconcile")
        running.stop()
        sim.api.add_node(FAILED_NODE, labels={MIG_CONFIG_LABEL: "all-9g", "pool": "b"})
        sim.api.update_node(FAILED_NODE, _mark_failed)
        sim.api.add_node(CPU_NODE, labels={"pool": "b"})
        yield sim


def _status(capsys: pytest.CaptureFixture[str], cluster: SimCluster, *extra: str) -> str:
    assert main(["status", "--api-server", cluster.api.url, *extra]) == 0
    return capsys.readouterr().out


def test_status_is_one_row_per_mig_node_with_layout_state_reason_gpus_advertised_and_last_error(
    cluster: SimCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _status(capsys, cluster).splitlines()
    assert lines[0].split()[:5] == ["NODE", "DESIRED", "STATE", "REASON", "AGE"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {cluster.config.node_name, FAILED_NODE}  # the CPU node is no MIG node
    healthy = rows[cluster.config.node_name]
    assert healthy.split()[1:4] == ["all-1g.10gb", "success", "Applied"]
    assert "0-1: 1g.10gbx7" in healthy  # both GPUs hold seven 1g.10gb, from migagent.io/observed
    assert "mig-1g.10gb=14" in healthy  # what the fake kubelet advertised
    failed = rows[FAILED_NODE]
    assert failed.split()[1:4] == ["all-9g", "failed", "InvalidLayout"]
    assert "not reported" in failed
    assert "d " in failed  # the condition is years old: its age reads in days
    assert "config 'all-9g' is not in" in failed


def test_status_json_has_each_gpus_devices_and_the_whole_last_error(
    cluster: SimCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {row["node"]: row for row in json.loads(_status(capsys, cluster, "-o", "json"))}
    healthy = rows[cluster.config.node_name]
    assert healthy["gpus"] == [
        {"index": 0, "mode": "enabled", "devices": {"1g.10gb": 7}},
        {"index": 1, "mode": "enabled", "devices": {"1g.10gb": 7}},
    ]
    assert healthy["advertised"] == {"mig-1g.10gb": 14}
    assert (healthy["state"], healthy["reason"], healthy["last_error"]) == ("success", "Applied", "")
    assert rows[FAILED_NODE]["last_error"] == ERROR
    assert rows[FAILED_NODE]["gpus"] is None


def test_status_selector_goes_to_the_server_and_only_nodes_list_and_watch_are_used(
    cluster: SimCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.api.clear_requests()
    out = _status(capsys, cluster, "-l", "pool=b")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [FAILED_NODE]
    requests = cluster.api.requests
    assert {(r.verb, r.resource) for r in requests} == {("list", "nodes")}
    assert requests[0].query.get("labelSelector") == "pool=b"


def test_status_watch_prints_a_line_when_a_node_changes_using_only_list_and_watch(
    cluster: SimCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cluster.api.add_node("gpu-node-3", labels={MIG_CONFIG_LABEL: "all-balanced", "pool": "c"})
    cluster.api.clear_requests()
    done = threading.Event()

    def watch() -> None:
        main(["status", "--api-server", cluster.api.url, "-l", "pool=c", "--watch", "--watch-for", "3"])
        done.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    eventually(lambda: any(r.verb == "list" for r in cluster.api.requests), what="the first list")
    # A change after the list reaches the watch, which starts from the list's resource version.
    cluster.api.update_node("gpu-node-3", lambda n: n["metadata"]["labels"].update({MIG_CONFIG_STATE_LABEL: "pending"}))
    thread.join(30)
    assert done.is_set()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("NODE")
    assert lines[1].split()[:3] == ["gpu-node-3", "all-balanced", "-"]
    assert lines[2].split()[:3] == ["gpu-node-3", "all-balanced", "pending"]
    assert {(r.verb, r.resource) for r in cluster.api.requests} == {("list", "nodes"), ("watch", "nodes")}


def test_an_unreachable_api_server_is_one_line_after_one_attempt(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["status", "--api-server", f"http://127.0.0.1:{port}"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("migagent status: list nodes: cannot reach the API server")


@pytest.mark.parametrize(("rename", "column"), [(False, "mig-1g.10gb=28"), (True, "mig-1g.10gb.shared=28")])
def test_status_shows_the_replicated_mig_resources_a_time_slicing_plugin_advertises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rename: bool, column: str
) -> None:
    config = replace(SMALL, plugin_configs={"any": time_slicing_config(2, rename_by_default=rename)})
    with SimCluster(tmp_path, config) as sim:
        running = sim.start_agent()
        eventually(lambda: state(sim) == "success", what="the agent's first reconcile")
        running.stop()
        row = next(line for line in _status(capsys, sim).splitlines() if line.startswith(sim.config.node_name))
    assert row.split()[1:4] == ["all-1g.10gb", "success", "Applied"]
    assert column in row.split()  # 14 1g.10gb instances, each advertised twice
