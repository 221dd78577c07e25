"""`migagent rollout controller` with deploy/components/rollout-controller: it drives a rollout on a
simulated pool with RBAC and admission enforced (the agents too, as their own service account), and
its identity can change nothing on a Node but the layout label."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes.client import CoreV1Api, V1ConfigMap, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from migagent.node.names import MIG_CONFIG_LABEL
from migagent.rollout.controller import run_controller
from migagent.rollout.state import Phase
from migagent_sim.apiserver.access import AccessControl
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.pool import PoolMonitor, SimPool, SimPoolConfig
from tests.integration.deploy.manifests import Obj, of_kind, render_with_components
from tests.integration.deploy.rbac import permissions_of
from tests.integration.deploy.test_manifests import validate
from tests.integration.rollout.support import CLOCK, TARGET, Recorder, api, create, spec, wait_reported

CONTROLLER = UserInfo.service_account("migagent", "migagent-rollout")


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    return render_with_components("overlays/gpu-operator", "components/rollout-controller")


@pytest.fixture
def access(objects: list[Obj]) -> AccessControl:
    return AccessControl(objects)


@pytest.fixture
def pool(access: AccessControl, tmp_path: Path) -> Iterator[SimPool]:
    with SimPool(tmp_path, SimPoolConfig(nodes=3), access=access) as started:
        yield started


_REQUEST_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})


def _refused(access: AccessControl, user: UserInfo) -> list[str]:
    """The requests of `user` that RBAC refused, as the API server decided them. The admission policies'
    own authorizer checks (`layout-label-only`, `restricted-to-own-node`: verbs of ours) are questions
    whose "no" is an answer, not a refusal; a request the policies refuse fails the controller's step."""
    return [
        f"{a.verb} {a.resource} {a.name}" for who, a, allowed in access.decisions()
        if not allowed and who.username == user.username and a.verb in _REQUEST_VERBS
    ]


def _done_or_halted(pool: SimPool, name: str, controller: threading.Thread) -> str:
    """Waits on the rollout's progress, not on the clock: a loaded machine only makes it slower. The
    bound is pytest-timeout's; a halted rollout (a node failed) or a controller that died (a refused
    call it does not retry) ends the wait at once."""
    while controller.is_alive():
        stored = api(pool).read_state(name)
        text = stored.data["state"] if stored is not None else ""
        if f'"phase":"{Phase.DONE}"' in text or f'"phase":"{Phase.HALTED}"' in text:
            return text
        CLOCK.sleep(0.05)
    stored = api(pool).read_state(name)
    return stored.data["state"] if stored is not None else ""


def test_every_object_of_the_component_is_valid_against_the_bundled_kubernetes_schemas(objects: list[Obj]) -> None:
    for obj in objects:
        validate(obj)


def test_the_component_grants_exactly_what_the_controller_calls(objects: list[Obj]) -> None:
    granted = {
        (p.verb, p.group, p.resource, p.namespace)
        for p in permissions_of(objects, service_account=("migagent", "migagent-rollout"))
    }
    assert granted == {
        ("list", "", "nodes", None), ("patch", "", "nodes", None), ("list", "", "pods", None),
        ("list", "policy", "poddisruptionbudgets", None),
        ("layout-label-only", "migagent.io", "rolloutcontrollers", None),
        ("get", "", "configmaps", "migagent-rollouts"), ("list", "", "configmaps", "migagent-rollouts"),
        ("update", "", "configmaps", "migagent-rollouts"), ("create", "", "events", "default"),
    }
    deployment = next(
        o for o in of_kind(objects, "Deployment") if o["metadata"]["name"] == "migagent-rollout-controller"
    )
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "migagent-rollout"
    assert pod["containers"][0]["args"][:2] == ["rollout", "controller"]
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_controller_drives_a_rollout_under_its_own_rbac_and_admission(
    pool: SimPool, access: AccessControl
) -> None:
    wait_reported(pool)
    monitor = PoolMonitor(pool)
    create(pool, "r", spec(pool, max_unavailable="4"))  # a person, with their own (admin) credentials
    controller_api = api(pool, CONTROLLER)
    stop = threading.Event()
    recorder = Recorder()

    thread = threading.Thread(
        target=run_controller, args=(controller_api,),
        kwargs={"clock": CLOCK, "listener": recorder, "poll_s": 0.05, "stop": stop}, daemon=True,
    )
    thread.start()
    try:
        final = _done_or_halted(pool, "r", thread)
    finally:
        stop.set()
        thread.join(10.0)
    assert not thread.is_alive(), "the controller did not stop"
    assert _refused(access, CONTROLLER) == []
    assert f'"phase":"{Phase.DONE}"' in final, final
    # A step may be retried (controller_step_retried), never for a refusal: a request that timed out on a
    # loaded machine, or a Node that moved on between the controller's read and its conditional relabel
    # (the agents write their Nodes), read again and decided again.
    assert [e["mode"] for e in recorder.named("done")] == ["rollout"]
    assert all(pool.labels(name)[MIG_CONFIG_LABEL] == TARGET for name in pool.nodes)
    assert monitor.relabels == dict.fromkeys(pool.nodes, 1)
    stored = api(pool).read_state("r")
    assert stored is not None
    assert f'"phase":"{Phase.DONE}"' in stored.data["state"]


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"labels": {"pool": "other"}}},
        {"metadata": {"labels": {"nvidia.com/mig.config.state": "rebooting"}}},
        {"metadata": {"annotations": {"migagent.io/desired": "{}"}}},
        {"spec": {"unschedulable": True}},
    ],
    ids=["another-label", "the-agents-state-label", "an-annotation", "cordon"],
)
def test_the_controller_may_change_nothing_on_a_node_but_the_layout_label(pool: SimPool, patch: Obj) -> None:
    core = CoreV1Api(pool.client(CONTROLLER))
    core.patch_node("gpu-h100-1", {"metadata": {"labels": {MIG_CONFIG_LABEL: "all-7g"}}})  # allowed
    with pytest.raises(ApiException) as refused:
        core.patch_node("gpu-h100-1", patch)
    assert refused.value.status == 403
    assert "migagent-rollout-layout-label-only" in str(refused.value.body)


def test_the_controller_reaches_no_configmap_but_its_state_objects(pool: SimPool) -> None:
    """Not the layouts (namespace migagent), not another namespace's; and it neither creates nor deletes."""
    core = CoreV1Api(pool.client(CONTROLLER))
    calls: list[Callable[[], object]] = [
        lambda: core.create_namespaced_config_map(
            "migagent-rollouts", V1ConfigMap(metadata=V1ObjectMeta(name="migagent-rollout-x"), data={})
        ),
        lambda: core.delete_namespaced_config_map("migagent-layouts-sim", "migagent"),
        lambda: core.read_namespaced_config_map("migagent-layouts-sim", "migagent"),
        lambda: core.list_namespaced_config_map("migagent"),
        lambda: core.replace_namespaced_config_map(
            "migagent-layouts-sim", "migagent", V1ConfigMap(metadata=V1ObjectMeta(name="migagent-layouts-sim"))
        ),
        lambda: core.list_namespaced_config_map("default"),
    ]
    for call in calls:
        with pytest.raises(ApiException) as refused:
            call()
        assert refused.value.status == 403
