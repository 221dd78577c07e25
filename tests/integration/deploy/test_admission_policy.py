"""The rendered ValidatingAdmissionPolicies, evaluated on tables of Node updates and Pod deletes as the fake
API server does. The tables are tests/realkube/policy_cases.py, which tests/realkube sends to the real
kube-apiserver (the proof); here cel-python must decide each case the same way.

The API server evaluates CEL with cel-go; cel-python evaluates the same expressions here, which checks
the policy's logic (whom it judges, what it allows) but not cel-go's type checker: the test names say
so. Whom the policy judges comes from RBAC (the `authorizer` check on the marker permission), so each
case is decided against the RBAC rendered with the policy.
"""

from __future__ import annotations

import copy
import shutil
import subprocess

import pytest
import yaml

from migagent_sim.apiserver.access import ADMIN, AccessControl
from migagent_sim.apiserver.admission import AdmissionChain, AdmissionRequest
from migagent_sim.apiserver.errors import ApiError
from migagent_sim.apiserver.rbac import Attributes, UserInfo
from tests.integration.deploy.access import agent_identity
from tests.integration.deploy.manifests import DEPLOY, KUSTOMIZATIONS, Obj, kubectl, render, render_with_components
from tests.realkube.policy_cases import (
    ALLOWED,
    FAKE_ONLY_ESCALATIONS,
    NODE,
    PAUSE_ABSENT_PLUGIN,
    POD_CASES,
    Case,
    PodCase,
    pod_object,
    stored_node,
)
from tests.realkube.policy_cases import ESCALATIONS as REAL_ESCALATIONS

ESCALATIONS = [*REAL_ESCALATIONS, *FAKE_ONLY_ESCALATIONS]


@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> list[Obj]:
    return render(request.param)


def decide(objects: list[Obj], user: UserInfo, case: Case, *, node: str = NODE) -> ApiError | None:
    """None when the fake API server's admission admits the update, else the 403 it answers."""
    access = AccessControl(objects)
    old = stored_node(node)
    case.before(old)
    new = copy.deepcopy(old)
    case.edit(new)
    request = AdmissionRequest(
        operation="UPDATE",
        group="",
        version="v1",
        resource="nodes",
        subresource=case.subresource,
        namespace="",
        name=node,
        user=user,
        object=new,
        old_object=old,
    )
    try:
        access.admit(request)
    except ApiError as error:
        return error
    return None


@pytest.mark.parametrize("case", ALLOWED, ids=lambda c: c.what)
def test_the_agent_may_make_the_changes_a_mig_change_needs_on_its_own_node_as_cel_python_evaluates_it(
    rendered: list[Obj], case: Case
) -> None:
    assert decide(rendered, agent_identity(rendered, NODE), case) is None


@pytest.mark.parametrize("case", ESCALATIONS, ids=lambda c: c.what)
def test_every_other_change_of_its_own_node_is_denied_as_cel_python_evaluates_it(
    rendered: list[Obj], case: Case
) -> None:
    error = decide(rendered, agent_identity(rendered, NODE), case)
    assert error is not None
    assert error.code == 403
    assert "ValidatingAdmissionPolicy 'migagent-own-node-only'" in error.message
    assert "resulted in error" not in error.message  # denied by a rule, not by a broken expression


@pytest.mark.parametrize("case", ALLOWED[:3] + ALLOWED[-1:], ids=lambda c: c.what)
def test_the_agent_may_not_change_another_node_even_where_its_own_would_be_allowed_as_cel_python_evaluates_it(
    rendered: list[Obj], case: Case
) -> None:
    error = decide(rendered, agent_identity(rendered, NODE), case, node="gpu-2")
    assert error is not None
    assert "migagent running on node gpu-1 may not change node gpu-2" in error.message


@pytest.mark.parametrize(
    "extra",
    [{"authentication.kubernetes.io/credential-id": ("JTI=1",)}, {}],
    ids=["a token not bound to a pod", "no extra at all (impersonation, a legacy token)"],
)
def test_a_user_without_the_node_claim_is_refused_with_the_reason_as_cel_python_evaluates_it(
    rendered: list[Obj], extra: dict[str, tuple[str, ...]]
) -> None:
    account = agent_identity(rendered, NODE)
    unbound = UserInfo(account.username, account.groups, extra)
    assert ("extra" in unbound.as_admission()) == bool(extra)  # omitted when empty, as the real API does
    error = decide(rendered, unbound, ALLOWED[0])
    assert error is not None
    assert error.code == 403, error.message  # the policy's own reason, not a 422 evaluation error
    assert "carries no node claim (authentication.kubernetes.io/node-name)" in error.message
    assert "resulted in error" not in error.message


def test_an_expression_that_fails_to_evaluate_is_a_422_naming_it_as_on_the_real_server() -> None:
    policy = {
        "metadata": {"name": "unguarded"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
            ]},
            "variables": [{"name": "tokenNode", "expression": "request.userInfo.extra['k']"}],
            "validations": [{"expression": "size(variables.tokenNode) == 1"}],
        },
    }
    binding = {"metadata": {"name": "unguarded"}, "spec": {"policyName": "unguarded", "validationActions": ["Deny"]}}
    chain = AdmissionChain(
        [{"kind": "ValidatingAdmissionPolicy", **policy}, {"kind": "ValidatingAdmissionPolicyBinding", **binding}],
        lambda _user, _attributes: True,
    )
    request = AdmissionRequest(
        operation="UPDATE", group="", version="v1", resource="nodes", subresource="", namespace="", name=NODE,
        user=UserInfo("someone", ()), object=stored_node(), old_object=stored_node(),
    )
    with pytest.raises(ApiError) as refused:
        chain.admit(request)
    assert refused.value.code == 422
    assert "expression 'size(variables.tokenNode) == 1' resulted in error:" in refused.value.message
    assert 'composited variable "tokenNode" fails to evaluate:' in refused.value.message


OTHERS = [
    ADMIN,
    UserInfo("system:node:gpu-1", ("system:nodes", "system:authenticated")),
    UserInfo.service_account("gpu-operator", "nvidia-operator", node_name=NODE),
    UserInfo.service_account("kube-system", "node-controller"),
]


@pytest.mark.parametrize("user", OTHERS, ids=lambda u: u.username)
def test_users_without_the_agents_role_are_not_judged_by_the_policy_as_cel_python_evaluates_it(
    rendered: list[Obj], user: UserInfo
) -> None:
    for case in ESCALATIONS:
        assert decide(rendered, user, case) is None, case.what


def test_a_service_account_with_a_wildcard_grant_is_not_mistaken_for_the_agent_as_cel_python_evaluates_it(
    rendered: list[Obj],
) -> None:
    operator = UserInfo.service_account("argocd", "application-controller", node_name=NODE)
    wildcard = [
        {
            "kind": "ClusterRole",
            "metadata": {"name": "everything"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        },
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "everything"},
            "roleRef": {"kind": "ClusterRole", "name": "everything"},
            "subjects": [{"kind": "ServiceAccount", "namespace": "argocd", "name": "application-controller"}],
        },
    ]
    assert decide([*rendered, *wildcard], operator, ESCALATIONS[0]) is None


RENAMING_OVERLAY = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: gpu-platform
namePrefix: team-
resources:
  - ../deploy/overlays/gpu-operator
"""


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    """gpu-operator rendered under an overlay that moves it to namespace gpu-platform and prefixes every name."""
    root = tmp_path_factory.mktemp("renamed")
    shutil.copytree(DEPLOY, root / "deploy")
    (root / "rename").mkdir()
    (root / "rename" / "kustomization.yaml").write_text(RENAMING_OVERLAY, encoding="utf-8")
    result = subprocess.run(
        [kubectl(), "kustomize", str(root / "rename")], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_an_overlay_renaming_the_namespace_and_service_account_is_still_held_to_its_own_node_as_cel_python_evaluates_it(
    renamed: list[Obj],
) -> None:
    agent = agent_identity(renamed, NODE)
    assert agent.username == "system:serviceaccount:gpu-platform:team-migagent"
    for case in ALLOWED:
        assert decide(renamed, agent, case) is None, case.what
    for case in ESCALATIONS:
        assert decide(renamed, agent, case) is not None, case.what
    assert decide(renamed, agent, ALLOWED[0], node="gpu-2") is not None


def test_after_a_rename_the_old_service_account_may_not_patch_nodes_so_nothing_slips_through_unjudged(
    renamed: list[Obj],
) -> None:
    stale = UserInfo.service_account("migagent", "migagent", node_name=NODE)
    assert not AccessControl(renamed).allowed(stale, Attributes("patch", "", "nodes", name=NODE))


def decide_pod_delete(objects: list[Obj], user: UserInfo, case: PodCase) -> ApiError | None:
    """None when the fake API server's admission admits deleting the case's pod, else the 403 it answers."""
    pod = pod_object(case, "target")
    request = AdmissionRequest(
        operation="DELETE",
        group="",
        version="v1",
        resource="pods",
        subresource="",
        namespace=case.namespace,
        name="target",
        user=user,
        object=None,
        old_object=pod,
    )
    try:
        AccessControl(objects).admit(request)
    except ApiError as error:
        return error
    return None


@pytest.fixture(scope="module")
def with_force_delete() -> list[Obj]:
    return render_with_components("overlays/gpu-operator", "components/force-delete")


@pytest.mark.parametrize("case", POD_CASES, ids=lambda c: c.what)
def test_pod_deletes_are_decided_as_on_the_real_server_as_cel_python_evaluates_it(
    rendered: list[Obj], with_force_delete: list[Obj], case: PodCase
) -> None:
    plain = decide_pod_delete(rendered, agent_identity(rendered, NODE), case)
    forced = decide_pod_delete(with_force_delete, agent_identity(with_force_delete, NODE), case)
    assert (forced is None) == case.allowed, forced
    assert (plain is None) == (case.allowed and not case.needs_force_delete), plain
    for error in (plain, forced):
        if error is not None:
            assert "ValidatingAdmissionPolicy 'migagent-own-node-pods'" in error.message
            assert "resulted in error" not in error.message


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_pausing_an_absent_plugin_label_needs_the_standalone_overlays_marker_as_cel_python_evaluates_it(
    kustomization: str,
) -> None:
    objects = render(kustomization)
    error = decide(objects, agent_identity(objects, NODE), PAUSE_ABSENT_PLUGIN)
    assert (error is None) == (kustomization == "overlays/standalone"), error
