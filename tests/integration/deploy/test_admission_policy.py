"""The rendered ValidatingAdmissionPolicy, evaluated on a table of Node updates as the fake API server does.

The API server evaluates CEL with cel-go; cel-python evaluates the same expressions here, which checks
the policy's logic (whom it judges, what it allows) but not cel-go's type checker: the test names say
so. Whom the policy judges comes from RBAC (the `authorizer` check on the marker permission), so each
case is decided against the RBAC rendered with the policy.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from migagent_sim.apiserver.access import ADMIN, AccessControl
from migagent_sim.apiserver.admission import AdmissionRequest
from migagent_sim.apiserver.errors import ApiError
from migagent_sim.apiserver.rbac import Attributes, UserInfo
from tests.integration.deploy.access import agent_identity
from tests.integration.deploy.manifests import DEPLOY, KUSTOMIZATIONS, Obj, kubectl, render

NODE = "gpu-1"
Edit = Callable[[Obj], None]


def stored_node(name: str = NODE) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": "42",
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/mig.config": "all-1g.10gb",
                "nvidia.com/mig.config.state": "success",
                "nvidia.com/gpu.deploy.device-plugin": "true",
                "nvidia.com/gpu.deploy.dcgm": "false",
                "node-role.kubernetes.io/gpu": "",
            },
            "annotations": {"migagent.io/desired": "{}", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": "10.0.1.0/24",
            "providerID": "aws:///i-1",
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": {"cpu": "64", "nvidia.com/mig-1g.10gb": "7"},
            "allocatable": {"cpu": "63", "nvidia.com/mig-1g.10gb": "7"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "MigConfigReady", "status": "True", "reason": "Applied"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def labels(**changes: str | None) -> Edit:
    """Set (or, with None, remove) labels; keys use __ for / and _ for . (python names)."""

    def edit(node: Obj) -> None:
        for key, value in changes.items():
            name = key.replace("__", "/").replace("_", ".")
            if value is None:
                node["metadata"]["labels"].pop(name, None)
            else:
                node["metadata"]["labels"][name] = value

    return edit


def at(path: str, value: object) -> Edit:
    """Set (or, with None, remove) the member at a dotted path (list indices as numbers)."""

    def edit(node: Obj) -> None:
        *parents, last = path.split(".")
        target: Any = node
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        if isinstance(target, list):
            target[int(last)] = value
        elif value is None:
            target.pop(last, None)
        else:
            target[last] = value

    return edit


def annotation(name: str, value: str | None) -> Edit:
    def edit(node: Obj) -> None:
        if value is None:
            node["metadata"]["annotations"].pop(name, None)
        else:
            node["metadata"]["annotations"][name] = value

    return edit


def both(*edits: Edit) -> Edit:
    def edit(node: Obj) -> None:
        for one in edits:
            one(node)

    return edit


@dataclass(frozen=True)
class Case:
    what: str
    edit: Edit
    allowed: bool
    subresource: str = ""


MIG_READY_FALSE = {"type": "MigConfigReady", "status": "False", "reason": "Applying"}

# Changes a MIG change needs: allowed for the agent on its own Node.
ALLOWED = [
    Case("state label to pending", labels(nvidia_com__mig_config_state="pending"), True),
    Case("state label to rebooting", labels(nvidia_com__mig_config_state="rebooting"), True),
    Case("state label to failed", labels(nvidia_com__mig_config_state="failed"), True),
    Case("state label removed", labels(nvidia_com__mig_config_state=None), True),
    Case("pause the device plugin", labels(nvidia_com__gpu_deploy_device_plugin="paused-for-mig-change"), True),
    Case("a false deploy label stays false", labels(nvidia_com__gpu_deploy_dcgm="false"), True),
    Case("pause a new operand label", labels(nvidia_com__gpu_deploy_dcgm_exporter="paused-for-mig-change"), True),
    Case("restore a deploy label", labels(nvidia_com__gpu_deploy_device_plugin="true"), True),
    Case("remove a deploy label", labels(nvidia_com__gpu_deploy_dcgm=None), True),
    Case("own annotation changed", annotation("migagent.io/desired", '{"layout": "all-7g"}'), True),
    Case("own annotation added", annotation("migagent.io/last-error", "drain timed out"), True),
    Case("own annotation removed", annotation("migagent.io/desired", None), True),
    Case("cordon", at("spec.unschedulable", True), True),
    Case("nothing changed", lambda node: None, True),
    Case("MigConfigReady condition changed", at("status.conditions.1", MIG_READY_FALSE), True, "status"),
    Case(
        "MigConfigReady condition added",
        at("status.conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}, MIG_READY_FALSE]),
        True,
        "status",
    ),
    Case(
        "state, annotation and cordon at once",
        both(
            labels(nvidia_com__mig_config_state="pending"),
            annotation("migagent.io/cordoned-by-migagent", "true"),
            at("spec.unschedulable", True),
        ),
        True,
    ),
]

# Anything else: denied to the agent even on its own Node.
ESCALATIONS = [
    Case("the admin's layout label", labels(nvidia_com__mig_config="all-7g"), False),
    Case("the admin's layout label removed", labels(nvidia_com__mig_config=None), False),
    Case("a node-restriction label", labels(**{"node-restriction.kubernetes.io__trusted": "true"}), False),
    Case("a node role label removed", labels(**{"node-role.kubernetes.io__gpu": None}), False),
    Case("the hostname label", labels(kubernetes_io__hostname="gpu-9"), False),
    Case("a label that merely contains the prefix", labels(**{"evil__nvidia_com__gpu_deploy_x": "1"}), False),
    Case("state label set to a value outside the contract", labels(nvidia_com__mig_config_state="owned"), False),
    Case("the node's mig.capable label", labels(nvidia_com__mig_capable="true"), False),
    Case("another annotation changed", annotation("node.alpha.kubernetes.io/ttl", "30"), False),
    Case("another annotation added", annotation("cluster-autoscaler.kubernetes.io/scale-down-disabled", "true"), False),
    Case("another annotation removed", annotation("node.alpha.kubernetes.io/ttl", None), False),
    Case("an annotation under a look-alike prefix", annotation("migagent.io.evil/x", "1"), False),
    Case("taints removed", at("spec.taints", None), False),
    Case(
        "a taint added",
        at("spec.taints", [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}]),
        False,
    ),
    Case(
        "a taint's effect changed", at("spec.taints.0", {"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}), False
    ),
    Case("podCIDR changed", at("spec.podCIDR", "10.9.9.0/24"), False),
    Case("providerID changed", at("spec.providerID", "aws:///i-2"), False),
    Case(
        "addresses rewritten", at("status.addresses", [{"type": "InternalIP", "address": "6.6.6.6"}]), False, "status"
    ),
    Case(
        "allocatable raised", at("status.allocatable", {"cpu": "63", "nvidia.com/mig-1g.10gb": "70"}), False, "status"
    ),
    Case("capacity changed", at("status.capacity", {"cpu": "640"}), False, "status"),
    Case("nodeInfo changed", at("status.nodeInfo", {"kubeletVersion": "v9"}), False, "status"),
    Case("daemon endpoints changed", at("status.daemonEndpoints", {"kubeletEndpoint": {"Port": 1}}), False, "status"),
    Case("phase set", at("status.phase", "Running"), False, "status"),
    Case(
        "the Ready condition flipped",
        at("status.conditions.0", {"type": "Ready", "status": "False", "reason": "X"}),
        False,
        "status",
    ),
    Case(
        "another condition added",
        at("status.conditions", [*stored_node()["status"]["conditions"], {"type": "DiskPressure", "status": "True"}]),
        False,
        "status",
    ),
    Case("the Ready condition removed", at("status.conditions", [MIG_READY_FALSE]), False, "status"),
    Case("a finalizer added", at("metadata.finalizers", ["example.com/keep"]), False),
    Case(
        "an owner reference added",
        at("metadata.ownerReferences", [{"kind": "X", "name": "x", "uid": "1", "apiVersion": "v1"}]),
        False,
    ),
    Case(
        "an allowed change smuggling the admin's label",
        both(labels(nvidia_com__mig_config_state="pending"), labels(nvidia_com__mig_config="all-7g")),
        False,
    ),
]


@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> list[Obj]:
    return render(request.param)


def decide(objects: list[Obj], user: UserInfo, case: Case, *, node: str = NODE) -> ApiError | None:
    """None when the fake API server's admission admits the update, else the 403 it answers."""
    access = AccessControl(objects)
    old = stored_node(node)
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
    assert "expression failed" not in error.message  # denied by a rule, not by a broken expression


@pytest.mark.parametrize("case", ALLOWED[:3] + ALLOWED[-1:], ids=lambda c: c.what)
def test_the_agent_may_not_change_another_node_even_where_its_own_would_be_allowed_as_cel_python_evaluates_it(
    rendered: list[Obj], case: Case
) -> None:
    error = decide(rendered, agent_identity(rendered, NODE), case, node="gpu-2")
    assert error is not None
    assert "migagent running on node gpu-1 may not change node gpu-2" in error.message


def test_a_token_without_the_node_claim_is_refused_with_the_reason_as_cel_python_evaluates_it(
    rendered: list[Obj],
) -> None:
    account = agent_identity(rendered, NODE)
    unbound = UserInfo(account.username, account.groups, {})
    error = decide(rendered, unbound, ALLOWED[0])
    assert error is not None
    assert "authentication.kubernetes.io/node-name" in error.message


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
