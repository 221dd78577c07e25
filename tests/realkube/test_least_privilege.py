"""Least privilege, proven on the real kube-apiserver: each case is one request as the agent's service account.

The overlays' RBAC and admission policies are applied as an admin would (`kubectl apply`), the agent
authenticates with a TokenRequest token bound to its pod on node gpu-1 (so the server itself puts
`authentication.kubernetes.io/node-name: gpu-1` in its user info), and each Node update or Pod
delete of tests/realkube/policy_cases.py is sent over HTTPS. Allowed cases must succeed; escalations
must be refused, by the named policy (or by RBAC where the variant grants nothing), never by a CEL
error. What decides is cel-go in the real admission plugin, with its type checker.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.realkube.control_plane import ControlPlane, Identity
from tests.realkube.deployment import (
    FORCE_DELETE,
    GPU_OPERATOR,
    STANDALONE,
    STANDALONE_DELETE_POD,
    Deployer,
    Variant,
    create_pod,
    merge_patch,
    reset_node,
)
from tests.realkube.policy_cases import (
    ALLOWED,
    ESCALATIONS,
    NODE,
    OTHER_NODE,
    PAUSE_ABSENT_PLUGIN,
    POD_CASES,
    Case,
    PodCase,
    labels,
    pod_object,
    stored_node,
)
from tests.realkube.rest import MERGE, HttpError

JsonDict = dict[str, Any]
NODE_POLICY = "migagent-own-node-only"
POD_POLICY = "migagent-own-node-pods"


@pytest.fixture
def operator_agent(deployer: Deployer) -> Identity:
    """The agent under the gpu-operator overlay (installed again if another test switched variants)."""
    objects = deployer.install(GPU_OPERATOR)
    deployer.plane.ensure_node(OTHER_NODE)
    return deployer.agent(objects, NODE)


def agent_update(plane: ControlPlane, agent: Identity, case: Case, name: str = NODE) -> HttpError | None:
    """The case's change as one JSON merge patch by `agent` (on /status for a status case); the refusal, if any."""
    old = reset_node(plane, case, name)
    new = copy.deepcopy(old)
    case.edit(new)
    path = f"/api/v1/nodes/{name}" + ("/status" if case.subresource == "status" else "")
    try:
        plane.rest(agent).patch(path, merge_patch(old, new), content_type=MERGE)
    except HttpError as error:
        return error
    return None


def assert_refused_by(error: HttpError | None, policy: str) -> None:
    assert error is not None, "allowed"
    assert error.status == 403, (error.status, error.body)
    assert f"ValidatingAdmissionPolicy '{policy}'" in error.message, error.message
    # refused by a rule, not because an expression failed to compile or evaluate (failurePolicy: Fail)
    assert "resulted in error" not in error.message, error.message
    assert "compil" not in error.message, error.message


@pytest.mark.parametrize("case", ALLOWED, ids=lambda c: c.what)
def test_the_agent_may_make_each_change_a_mig_change_needs_on_its_own_node(
    control_plane: ControlPlane, operator_agent: Identity, case: Case
) -> None:
    error = agent_update(control_plane, operator_agent, case)
    assert error is None, (error.status, error.body)
    expected = stored_node()
    case.before(expected)
    case.edit(expected)
    node = control_plane.rest(control_plane.admin).get(f"/api/v1/nodes/{NODE}")
    assert node["metadata"]["labels"] == expected["metadata"]["labels"]
    assert node["metadata"].get("annotations", {}) == expected["metadata"]["annotations"]
    assert bool(node["spec"].get("unschedulable")) == bool(expected["spec"].get("unschedulable"))


@pytest.mark.parametrize("case", ESCALATIONS, ids=lambda c: c.what)
def test_every_other_change_of_its_own_node_is_refused_by_the_policy(
    control_plane: ControlPlane, operator_agent: Identity, case: Case
) -> None:
    assert_refused_by(agent_update(control_plane, operator_agent, case), NODE_POLICY)


@pytest.mark.parametrize("case", [ALLOWED[0], ALLOWED[4], ALLOWED[12]], ids=lambda c: c.what)
def test_the_agent_may_not_change_another_node_even_where_its_own_would_be_allowed(
    control_plane: ControlPlane, operator_agent: Identity, case: Case
) -> None:
    error = agent_update(control_plane, operator_agent, case, name=OTHER_NODE)
    assert_refused_by(error, NODE_POLICY)
    assert error is not None
    assert f"migagent running on node {NODE} may not change node {OTHER_NODE}" in error.message


@pytest.mark.parametrize("variant", [GPU_OPERATOR, STANDALONE], ids=lambda v: v.name)
def test_pausing_an_absent_device_plugin_label_is_the_standalone_overlays_alone(
    control_plane: ControlPlane, deployer: Deployer, variant: Variant
) -> None:
    """On a GPU Operator node an absent label stays absent (else absent -> paused -> true adds the plugin)."""
    agent = deployer.agent(deployer.install(variant), NODE)
    control_plane.ensure_node(OTHER_NODE)
    error = agent_update(control_plane, agent, PAUSE_ABSENT_PLUGIN)
    if variant == STANDALONE:
        assert error is None, (error.status, error.body)
    else:
        assert_refused_by(error, NODE_POLICY)
    deployer.install(GPU_OPERATOR)


def test_the_servers_token_carries_the_pods_node_and_the_agents_groups(
    control_plane: ControlPlane, operator_agent: Identity
) -> None:
    user = control_plane.whoami(operator_agent)
    assert user["username"] == "system:serviceaccount:migagent:migagent"
    assert "system:serviceaccounts:migagent" in user["groups"]
    assert user["extra"]["authentication.kubernetes.io/node-name"] == [NODE]
    assert user["extra"]["authentication.kubernetes.io/pod-name"] == [f"migagent-{NODE}"]


def test_a_token_without_the_node_claim_is_refused_with_the_reason(
    control_plane: ControlPlane, operator_agent: Identity
) -> None:
    answer = control_plane.rest(control_plane.admin).create(
        "/api/v1/namespaces/migagent/serviceaccounts/migagent/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    unbound = Identity("unbound", token=answer["status"]["token"])
    error = agent_update(control_plane, unbound, ALLOWED[0])
    assert_refused_by(error, NODE_POLICY)
    assert error is not None
    assert "authentication.kubernetes.io/node-name" in error.message


def _without_extra(plane: ControlPlane) -> Identity:
    """The agent's service account with no `extra` in its user info at all, as the admin impersonating
    it presents it (a legacy token's user has none either): RBAC grants it the agent's roles."""
    agent = ("system:serviceaccount:migagent:migagent", ("system:serviceaccounts:migagent",))
    return Identity("agent-without-extra", plane.admin.cert, plane.admin.token, impersonate=agent)


def test_a_user_without_extra_is_refused_with_the_policys_reason_not_an_evaluation_error(
    control_plane: ControlPlane, operator_agent: Identity
) -> None:
    agent = _without_extra(control_plane)
    assert "extra" not in control_plane.whoami(agent)
    error = agent_update(control_plane, agent, ALLOWED[0])
    assert_refused_by(error, NODE_POLICY)
    assert error is not None
    assert "carries no node claim (authentication.kubernetes.io/node-name)" in error.message
    assert "fails to evaluate" not in error.message, error.message
    name = "target-without-extra"
    create_pod(control_plane, pod_object(POD_CASES[0], name))
    pod = f"/api/v1/namespaces/{POD_CASES[0].namespace}/pods/{name}"
    with pytest.raises(HttpError) as refused:
        control_plane.rest(agent).delete(pod, {"gracePeriodSeconds": 0})
    control_plane.rest(control_plane.admin).delete(pod, {"gracePeriodSeconds": 0})
    assert_refused_by(refused.value, POD_POLICY)
    assert "carries no node claim" in refused.value.message


def test_the_admin_is_not_judged_by_the_policy(control_plane: ControlPlane, operator_agent: Identity) -> None:
    driver_off = next(case for case in ESCALATIONS if "gpu.deploy.driver=false" in case.what)
    assert agent_update(control_plane, control_plane.admin, driver_off) is None


def test_the_kubelet_of_the_node_may_publish_its_status_but_not_another_nodes(
    control_plane: ControlPlane, operator_agent: Identity
) -> None:
    """The Node authorizer as the simulated kubelet meets it: its own Node's status, no other's."""
    reset_node(control_plane, ALLOWED[0])
    reset_node(control_plane, ALLOWED[0], OTHER_NODE)
    kubelet = control_plane.rest(control_plane.node_identity(NODE))
    patch = {"status": {"allocatable": {"cpu": "63", "nvidia.com/mig-1g.10gb": "0"}}}
    kubelet.patch(f"/api/v1/nodes/{NODE}/status", patch)
    with pytest.raises(HttpError) as refused:
        kubelet.patch(f"/api/v1/nodes/{OTHER_NODE}/status", patch)
    assert refused.value.status == 403


def test_an_unrelated_label_change_by_the_agent_is_refused_even_with_an_allowed_one(
    control_plane: ControlPlane, operator_agent: Identity
) -> None:
    case = Case("x", labels(nvidia_com__mig_config_state="pending", team="a"), False)
    assert_refused_by(agent_update(control_plane, operator_agent, case), NODE_POLICY)


# --- Pod deletes ------------------------------------------------------------------------------

POD_VARIANTS = (GPU_OPERATOR, STANDALONE_DELETE_POD, FORCE_DELETE)


def _expected(variant: Variant, case: PodCase) -> str:
    """'allowed', 'rbac' (403 from the authorizer) or 'policy' (403 from the pod policy)."""
    if not variant.may_delete_in(case.namespace):
        return "rbac"
    if case.allowed and (variant.force_delete or not case.needs_force_delete):
        return "allowed"
    return "policy"


@pytest.mark.parametrize("variant", POD_VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("case", POD_CASES, ids=lambda c: c.what)
def test_pod_deletes_by_the_agent_only_on_its_node_and_only_of_the_kinds_it_restarts(
    control_plane: ControlPlane, deployer: Deployer, variant: Variant, case: PodCase, request: pytest.FixtureRequest
) -> None:
    objects = deployer.install(variant)
    control_plane.ensure_node(OTHER_NODE)
    agent = deployer.agent(objects, NODE)
    name = f"target-{abs(hash(request.node.nodeid)) % 10**8}"
    create_pod(control_plane, pod_object(case, name))
    pod = f"/api/v1/namespaces/{case.namespace}/pods/{name}"
    expected = _expected(variant, case)
    if expected == "allowed":
        control_plane.rest(agent).delete(pod, {"gracePeriodSeconds": 0})
        return
    with pytest.raises(HttpError) as refused:
        control_plane.rest(agent).delete(pod, {"gracePeriodSeconds": 0})
    control_plane.rest(control_plane.admin).delete(pod, {"gracePeriodSeconds": 0})
    assert refused.value.status == 403, (refused.value.status, refused.value.body)
    if expected == "policy":
        assert f"ValidatingAdmissionPolicy '{POD_POLICY}'" in refused.value.message, refused.value.message
    else:
        assert "cannot delete resource" in refused.value.message, refused.value.message
