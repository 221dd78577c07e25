"""The GPU Operator's other operands on the simulated node: each DaemonSet's pod runs while its deploy
label is "true", leaves when it is paused (a "false" keeps it away), comes back when resumed, and a
deleted operator-validator pod is replaced; the completed validators are there once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from migagent_sim.apiserver import FakeApiServer
from migagent_sim.operands import OPERANDS, OperandPods
from tests.integration.agent.support import eventually

NODE = "gpu-node-1"
NS = "gpu-operator"


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(grace_scale=0.01) as server:
        server.add_node(NODE, labels={f"nvidia.com/gpu.deploy.{o.component}": "true" for o in OPERANDS})
        yield server


def _apps(api: FakeApiServer, *, phase: str = "Running") -> set[str]:
    return {
        p["metadata"]["labels"]["app"]
        for p in api.pods(NODE)
        if p["metadata"]["namespace"] == NS and p["status"].get("phase") == phase
    }


def _label(api: FakeApiServer, component: str, value: str) -> None:
    api.update_node(NODE, lambda n: n["metadata"]["labels"].update({f"nvidia.com/gpu.deploy.{component}": value}))


def test_each_operand_runs_while_its_label_is_true_and_leaves_while_it_is_paused(api: FakeApiServer) -> None:
    operands = OperandPods(api, node_name=NODE)
    operands.start()
    every = {o.app for o in OPERANDS}
    assert _apps(api) == every
    assert _apps(api, phase="Succeeded") == {"nvidia-cuda-validator", "nvidia-device-plugin-validator"}

    for component in ("gpu-feature-discovery", "dcgm"):
        _label(api, component, "paused-for-mig-change")
    eventually(lambda: _apps(api) == every - {"gpu-feature-discovery", "nvidia-dcgm"}, what="the paused pods gone")

    _label(api, "gpu-feature-discovery", "true")
    _label(api, "dcgm", "false")
    eventually(lambda: _apps(api) == every - {"nvidia-dcgm"}, what="GFD back, DCGM still off")
    operands.stop()


def test_a_deleted_operator_validator_is_replaced_by_its_daemonset(api: FakeApiServer) -> None:
    operands = OperandPods(api, node_name=NODE)
    operands.start()
    first = operands.running()["nvidia-operator-validator"]

    api.delete_pod(NS, first)

    eventually(
        lambda: operands.running().get("nvidia-operator-validator") not in (None, first), what="a new validator pod"
    )
    assert "nvidia-operator-validator" in _apps(api)
    operands.stop()
