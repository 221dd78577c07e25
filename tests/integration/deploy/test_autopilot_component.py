"""deploy/components/autopilot: `migagent autopilot` on a simulated pool with RBAC and admission enforced
(the agents as their own service account): it changes an opted-in node for waiting pods, the scheduler
stand-in then binds them there; its identity may change nothing on a Node but the layout label, and
only on nodes labelled for it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from migagent.autopilot.controller import Autopilot, load
from migagent.autopilot.decide import OPT_IN_LABEL, OPT_IN_SELECTOR, Guardrails
from migagent.autopilot.state import Verdict
from migagent.node.names import MIG_CONFIG_LABEL
from migagent_sim.apiserver.access import AccessControl
from migagent_sim.cluster import GPU_OPERATOR_LABELS
from migagent_sim.demand_pool import AUTOPILOT, demand_api, running_on, scheduler, submit
from migagent_sim.pool import PoolMonitor, SimPool, SimPoolConfig
from tests.integration.demand.support import CLOCK, FULL_NODE, THREE_G, fill
from tests.integration.deploy.manifests import Obj, of_kind, render_with_components
from tests.integration.deploy.rbac import permissions_of
from tests.integration.deploy.test_manifests import validate
from tests.integration.rollout.support import Recorder
from tests.waiting import eventually

NOT_OPTED = "gpu-h100-3"


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    return render_with_components("overlays/gpu-operator", "components/autopilot")


@pytest.fixture
def pool(objects: list[Obj], tmp_path: Path) -> Iterator[SimPool]:
    config = SimPoolConfig(nodes=3, labels={**GPU_OPERATOR_LABELS, OPT_IN_LABEL: "enabled"})
    with SimPool(tmp_path, config, access=AccessControl(objects)) as started:
        started.api.update_node(NOT_OPTED, lambda node: node["metadata"]["labels"].pop(OPT_IN_LABEL))
        yield started


def test_every_object_of_the_component_is_valid_against_the_bundled_kubernetes_schemas(objects: list[Obj]) -> None:
    for obj in objects:
        validate(obj)


def test_the_component_grants_exactly_what_the_autopilot_calls(objects: list[Obj]) -> None:
    granted = {
        (p.verb, p.group, p.resource, p.namespace)
        for p in permissions_of(objects, service_account=("migagent", "migagent-autopilot"))
    }
    assert granted == {
        ("list", "", "nodes", None), ("watch", "", "nodes", None), ("patch", "", "nodes", None),
        ("list", "", "pods", None), ("watch", "", "pods", None),
        ("list", "policy", "poddisruptionbudgets", None), ("watch", "policy", "poddisruptionbudgets", None),
        ("opted-in-layout-label-only", "migagent.io", "autopilots", None),
        ("get", "", "configmaps", "migagent"), ("list", "", "configmaps", "migagent"),
        ("create", "", "configmaps", "migagent"), ("update", "", "configmaps", "migagent"),
        ("create", "", "events", "migagent"), ("create", "", "events", "default"),
    }
    deployment = next(o for o in of_kind(objects, "Deployment") if o["metadata"]["name"] == "migagent-autopilot")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "migagent-autopilot"
    assert pod["containers"][0]["args"][:2] == ["autopilot", "run"]
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_autopilot_follows_the_demand_under_its_own_rbac_and_admission(pool: SimPool) -> None:
    fill(pool, FULL_NODE)
    monitor = PoolMonitor(pool)
    waiting = [submit(pool, f"train-{i}", THREE_G) for i in range(2)]
    recorder = Recorder()
    api = demand_api(pool, AUTOPILOT)
    api.watch(OPT_IN_SELECTOR)  # as `autopilot run` does: its watches are under its RBAC too
    autopilot = Autopilot(api, Guardrails(persist_s=1.0), clock=CLOCK, listener=recorder)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            autopilot.step()
            CLOCK.wait(stop, 0.1)

    thread = threading.Thread(target=run, daemon=True)
    with scheduler(pool):
        thread.start()
        try:
            eventually(lambda: len(running_on(pool, waiting)) == 2, "the waiting pods run")
            eventually(lambda: load(demand_api(pool)).rollout is None, "the rollout is recorded done")
        finally:
            stop.set()
            thread.join(10.0)
            api.close()
    changed = [name for name, count in monitor.relabels.items() if count]
    assert len(changed) == 1
    assert changed[0] not in (FULL_NODE, NOT_OPTED)  # an idle opted-in node; the full one's pods stay
    assert set(running_on(pool, waiting).values()) == set(changed)
    history = load(demand_api(pool)).history
    assert [d.verdict for d in history] == [Verdict.CHANGED, Verdict.ROLLOUT_DONE]
    assert sorted(history[0].nodes[changed[0]]["serves"]) == sorted(waiting)
    reasons = [(e["reason"], e["involvedObject"]["name"]) for e in pool.api.events()
               if e["reason"].startswith("MigAutopilot")]
    assert reasons == [("MigAutopilotChanged", changed[0]), ("MigAutopilotRolloutDone", changed[0])]


@pytest.mark.parametrize(
    ("node", "patch"),
    [
        (NOT_OPTED, {"metadata": {"labels": {MIG_CONFIG_LABEL: "all-7g"}}}),
        ("gpu-h100-1", {"metadata": {"labels": {OPT_IN_LABEL: None}}}),
        ("gpu-h100-1", {"metadata": {"labels": {"nvidia.com/mig.config.state": "rebooting"}}}),
        ("gpu-h100-1", {"metadata": {"annotations": {"migagent.io/desired": "{}"}}}),
        ("gpu-h100-1", {"spec": {"unschedulable": True}}),
    ],
    ids=["a-node-not-opted-in", "its-opt-in-label", "the-agents-state-label", "an-annotation", "cordon"],
)
def test_the_autopilot_may_change_only_the_layout_label_of_an_opted_in_node(
    pool: SimPool, node: str, patch: Obj
) -> None:
    core = CoreV1Api(pool.client(AUTOPILOT))
    core.patch_node("gpu-h100-1", {"metadata": {"labels": {MIG_CONFIG_LABEL: "all-7g"}}})  # allowed
    with pytest.raises(ApiException) as refused:
        core.patch_node(node, patch)
    assert refused.value.status == 403
    assert "migagent-autopilot-opted-in-layout-label-only" in str(refused.value.body)
