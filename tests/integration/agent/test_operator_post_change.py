"""The GPU Operator steps around a change, in mig-manager's order (mig-parted reconfigure-mig.sh):
validators out and host GPU clients stopped before the GPUs change; the management CDI spec
regenerated, host clients started and the operator validator restarted before the operands resume."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from migagent.attempt.listener import Outcome
from migagent.attempt.window.post_change import CdiSettings, PostChangeSteps
from migagent.attempt.window.services import HostClients, RecordingServiceManager, ServiceCall
from migagent.node.names import deploy_label
from migagent_sim.cluster import SimCluster, SimClusterConfig
from migagent_sim.nvidia_ctk import FakeNvidiaTools
from tests.integration.agent.support import SMALL, assert_released, condition, state

NS = "gpu-operator"


def _validator(cluster: SimCluster, app: str) -> str:
    name = f"{app}-{len(cluster.api.pods(cluster.config.node_name))}"
    cluster.api.create_pod(
        node_name=cluster.config.node_name, namespace=NS, name=name, labels={"app": app}, owner_kind="DaemonSet"
    )
    return name


def _steps(
    cluster: SimCluster, tools: FakeNvidiaTools, spec: Path, services: RecordingServiceManager
) -> PostChangeSteps:
    return PostChangeSteps(
        api=cluster.agent_api(),
        namespace=NS,
        restart_validators=True,
        cdi=CdiSettings(driver_root="/run/nvidia/driver", output=spec),
        host_clients=HostClients(services, ["nvidia-dcgm.service", "nvidia-persistenced.service"]),
        run=tools,
    )


def test_after_a_change_the_cdi_spec_validators_and_host_clients_follow_mig_managers_order(
    make_cluster: Callable[[SimClusterConfig], SimCluster], tmp_path: Path
) -> None:
    cluster = make_cluster(SMALL)
    cuda = _validator(cluster, "nvidia-cuda-validator")
    operator = _validator(cluster, "nvidia-operator-validator")
    spec = tmp_path / "cdi" / "management.nvidia.com-gpu.yaml"
    tools = FakeNvidiaTools(cluster.fake)
    gis_when: dict[str, int] = {}

    def seen(call: ServiceCall) -> None:
        gis_when[f"{call.action} {call.unit}"] = len(cluster.fake.state.gpus[0].gpu_instances)

    services = RecordingServiceManager(active=["nvidia-dcgm.service"], on_call=seen)
    steps = _steps(cluster, tools, spec, services)
    agent, _ = cluster.build_agent(post_change=steps)
    cluster.label("all-7g")

    assert agent.reconcile_once() is Outcome.APPLIED

    # Host clients: only the active unit, stopped while GPU 0 still had seven GIs, started once it had one.
    assert gis_when == {"stop nvidia-dcgm.service": 7, "start nvidia-dcgm.service": 1}
    deleted = [r.name for r in cluster.api.requests if r.verb == "delete" and r.resource == "pods"]
    assert deleted == [cuda, operator]
    assert [c[:3] for c in tools.calls] == [
        ("nvidia-smi",),
        ("nvidia-ctk", "system", "create-device-nodes"),
        ("nvidia-ctk", "cdi", "generate"),
    ]
    written = yaml.safe_load(spec.read_text(encoding="utf-8"))
    assert written["kind"] == "management.nvidia.com/gpu"
    paths = [n["path"] for n in written["devices"][0]["containerEdits"]["deviceNodes"]]
    assert sum(p.startswith("/dev/nvidia-caps/") for p in paths) == 2  # one 7g device per GPU, after the change
    assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
    assert state(cluster) == "success"
    assert_released(cluster)


def test_a_failed_cdi_regeneration_fails_the_attempt_and_still_restarts_the_host_clients(
    make_cluster: Callable[[SimClusterConfig], SimCluster], tmp_path: Path
) -> None:
    cluster = make_cluster(SMALL)
    tools = FakeNvidiaTools(cluster.fake, driver_loaded=False)
    services = RecordingServiceManager(active=["nvidia-dcgm.service"])
    agent, _ = cluster.build_agent(post_change=_steps(cluster, tools, tmp_path / "spec.yaml", services))
    cluster.label("all-7g")

    assert agent.reconcile_once() is Outcome.FAILED

    assert "nvidia-smi" in condition(cluster)["message"]
    assert services.active == {"nvidia-dcgm.service"}
    assert [c.action for c in services.calls] == ["stop", "start"]
    assert state(cluster) == "failed"
    assert_released(cluster)


def test_the_fake_nvidia_ctk_refuses_a_flag_the_real_one_does_not_define(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    tools = FakeNvidiaTools(make_cluster(SMALL).fake)
    result = tools(["nvidia-ctk", "cdi", "generate", "--mode=management", "--no-such-flag"])
    assert (result.returncode, result.output) == (1, "flag provided but not defined: --no-such-flag")
