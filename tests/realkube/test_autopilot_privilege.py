"""Least privilege of deploy/components/autopilot, proven on the real kube-apiserver: each request is sent
as the autopilot's service account (a TokenRequest token) after the gpu-operator overlay with the
component is applied with kubectl. What it calls must succeed; anything more must be refused, by RBAC
or by the component's admission policy (never by a CEL error)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import pytest

from migagent_sim.deadline import Deadline
from tests.realkube.control_plane import ControlPlane, Identity
from tests.realkube.deployment import Deployer, create_pod, ensure_namespace, merge_patch
from tests.realkube.pool import AUTOPILOT_ACCOUNT, AUTOPILOT_VARIANT
from tests.realkube.rest import MERGE, HttpError, Rest

JsonDict = dict[str, Any]
POLICY = "migagent-autopilot-opted-in-layout-label-only"
OPTED = "autopilot-opted"
NOT_OPTED = "autopilot-not-opted"


@pytest.fixture(scope="module")
def autopilot(control_plane: ControlPlane, deployer: Deployer) -> Rest:
    deployer.install(AUTOPILOT_VARIANT)
    namespace, account = AUTOPILOT_ACCOUNT
    answer = control_plane.rest(control_plane.admin).create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    rest = control_plane.rest(Identity("autopilot", token=answer["status"]["token"]))
    _wait_in_force(control_plane, rest)
    return rest


def _node(plane: ControlPlane, name: str, *, opted: bool) -> JsonDict:
    """The Node as a fresh GPU node with a layout, labelled for the autopilot or not."""
    admin = plane.rest(plane.admin)
    node = plane.ensure_node(name)
    node["metadata"]["labels"] = {
        "kubernetes.io/hostname": name, "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/mig.config.state": "success", **({"migagent.io/autopilot": "enabled"} if opted else {}),
    }
    node["metadata"]["annotations"] = {"migagent.io/observed": "[]"}
    node["spec"] = {}
    stored: JsonDict = admin.replace(f"/api/v1/nodes/{name}", node)
    return stored


def _wait_in_force(plane: ControlPlane, rest: Rest, timeout_s: float = 60.0) -> None:
    """Until the API server's admission enforces the policy just applied (its informers lag the write)."""
    _node(plane, NOT_OPTED, opted=False)
    deadline = Deadline(timeout_s)
    while True:
        try:
            rest.request("PATCH", f"/api/v1/nodes/{NOT_OPTED}", {"metadata": {"labels": {"x": "probe"}}},
                         query={"dryRun": "All"}, content_type=MERGE)
        except HttpError as error:
            if POLICY in error.message:
                return
        if deadline.passed():
            raise AssertionError(f"{POLICY} not in force after {timeout_s}s")
        time.sleep(0.2)


def _patch(plane: ControlPlane, rest: Rest, name: str, edit: Callable[[JsonDict], None], *,
           opted: bool = True) -> HttpError | None:
    old = _node(plane, name, opted=opted)
    new = copy.deepcopy(old)
    edit(new)
    try:
        rest.patch(f"/api/v1/nodes/{name}", merge_patch(old, new), content_type=MERGE)
    except HttpError as error:
        return error
    return None


def _label(key: str, value: str | None) -> Callable[[JsonDict], None]:
    def edit(node: JsonDict) -> None:
        if value is None:
            node["metadata"]["labels"].pop(key, None)
        else:
            node["metadata"]["labels"][key] = value

    return edit


def test_every_call_the_autopilot_makes_is_allowed(control_plane: ControlPlane, autopilot: Rest) -> None:
    assert _patch(control_plane, autopilot, OPTED, _label("nvidia.com/mig.config", "all-3g.40gb")) is None
    autopilot.get("/api/v1/nodes", labelSelector="migagent.io/autopilot=enabled")
    autopilot.get("/api/v1/pods")
    autopilot.get("/apis/policy/v1/poddisruptionbudgets")
    configmaps = "/api/v1/namespaces/migagent/configmaps"
    autopilot.get(configmaps)
    name = f"migagent-rollout-autopilot-{int(time.time() * 1000)}"
    created = autopilot.create(configmaps, {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": name}, "data": {"state": "{}"}})
    created["data"] = {"state": "{\"x\": 1}"}
    autopilot.replace(f"{configmaps}/{name}", created)
    autopilot.get(f"{configmaps}/{name}")
    for namespace, kind, involved in (("default", "Node", OPTED), ("migagent", "ConfigMap", "migagent-autopilot")):
        autopilot.create(f"/api/v1/namespaces/{namespace}/events", {
            "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "autopilot-"},
            "involvedObject": {"apiVersion": "v1", "kind": kind, "name": involved,
                               **({"namespace": namespace} if kind == "ConfigMap" else {})},
            "reason": "MigAutopilotChanged", "message": "test", "type": "Normal",
            "source": {"component": "migagent-autopilot"},
        })


@pytest.mark.parametrize(
    ("what", "edit", "opted"),
    [
        ("the layout label of a node not opted in", _label("nvidia.com/mig.config", "all-3g.40gb"), False),
        ("its own opt-in label", _label("migagent.io/autopilot", None), True),
        ("removing the layout label", _label("nvidia.com/mig.config", None), True),
        ("the agent's state label", _label("nvidia.com/mig.config.state", "rebooting"), True),
        ("another label", _label("team", "a"), True),
        ("an annotation", lambda n: n["metadata"]["annotations"].update({"migagent.io/observed": "x"}), True),
        ("a cordon", lambda n: n["spec"].update({"unschedulable": True}), True),
        ("a taint", lambda n: n["spec"].update({"taints": [{"key": "x", "effect": "NoSchedule"}]}), True),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_other_node_change_is_refused_by_the_policy(
    control_plane: ControlPlane, autopilot: Rest, what: str, edit: Callable[[JsonDict], None], opted: bool
) -> None:
    error = _patch(control_plane, autopilot, OPTED if opted else NOT_OPTED, edit, opted=opted)
    assert error is not None, f"{what} was allowed"
    assert error.status == 403, (error.status, error.body)
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in error.message, error.message
    assert "resulted in error" not in error.message, error.message


def test_what_rbac_does_not_grant_it_is_refused(control_plane: ControlPlane, autopilot: Rest) -> None:
    ensure_namespace(control_plane, "ml")
    create_pod(control_plane, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "victim", "namespace": "ml"},
                               "spec": {"nodeName": OPTED, "containers": [{"name": "main", "image": "x:1"}]}})
    refused: list[Callable[[], object]] = [
        lambda: autopilot.delete("/api/v1/namespaces/ml/pods/victim", {"gracePeriodSeconds": 0}),
        lambda: autopilot.create("/api/v1/namespaces/ml/pods/victim/eviction", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "victim", "namespace": "ml"}}),
        lambda: autopilot.get("/api/v1/namespaces/ml/configmaps"),
        lambda: autopilot.delete("/api/v1/namespaces/migagent/configmaps/migagent-autopilot"),
        lambda: autopilot.get("/api/v1/namespaces/migagent/secrets"),
        lambda: autopilot.request("PATCH", f"/api/v1/nodes/{OPTED}/status", {"status": {"allocatable": {}}},
                                  content_type=MERGE),
        lambda: autopilot.create("/api/v1/namespaces/ml/events", {
            "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "x-"},
            "involvedObject": {"kind": "Pod", "name": "victim", "namespace": "ml"}, "reason": "X", "message": "x"}),
    ]
    for call in refused:
        with pytest.raises(HttpError) as error:
            call()
        assert error.value.status == 403, (error.value.status, error.value.body)
    control_plane.rest(control_plane.admin).delete("/api/v1/namespaces/ml/pods/victim", {"gracePeriodSeconds": 0})
