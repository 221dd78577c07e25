"""The rollout controller's least privilege, proven on the real kube-apiserver: each call the
controller makes, through the production adapter (kube/rollout_api.py) as its service account with a
pod-bound token, is allowed; every ConfigMap outside its own namespace (the layouts first) is refused,
as are create and delete. RBAC cannot narrow a ConfigMap list by name or label, so the state objects
live in a namespace of their own (deploy/components/rollout-controller/namespace.yaml)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from migagent.clock import SystemClock
from migagent.errors import MigAgentError
from migagent.kube.rollout_api import RolloutApi
from migagent.node.names import LAYOUTS_NAMESPACE, MIG_CONFIG_LABEL, ROLLOUT_NAMESPACE
from migagent.node.port import NodeChangedError
from tests.realkube.control_plane import ControlPlane, Identity
from tests.realkube.deployment import ROLLOUT_CONTROLLER, Deployer
from tests.realkube.policy_cases import NODE
from tests.realkube.rest import HttpError

CLOCK = SystemClock()
STATE = {"state": "{}", "layouts": "version: v1\nmig-configs: {}\n"}


@pytest.fixture
def controller(control_plane: ControlPlane, deployer: Deployer) -> Identity:
    objects = deployer.install(ROLLOUT_CONTROLLER)
    return deployer.agent(objects, NODE, service_account="migagent-rollout")


def _api(plane: ControlPlane, identity: Identity, namespace: str = ROLLOUT_NAMESPACE) -> RolloutApi:
    return RolloutApi(plane.api_client(identity), clock=CLOCK, namespace=namespace)


def _state_object(plane: ControlPlane, name: str) -> None:
    """What a person's `rollout start` creates, with their own (admin) credentials."""
    admin = _api(plane, plane.admin)
    stored = admin.read_state(name)
    if stored is None:
        assert admin.create_state(name, STATE) is not None


def test_the_controller_may_make_each_call_it_makes(control_plane: ControlPlane, controller: Identity) -> None:
    _state_object(control_plane, "privilege")
    api = _api(control_plane, controller)
    assert "privilege" in [stored.rollout for stored in api.list_states()]
    stored = api.read_state("privilege")
    assert stored is not None
    api.replace_state("privilege", dict(stored.data), stored.resource_version)
    [node] = [n for n in api.list_nodes("") if n.name == NODE]
    api.list_pods_on_node(NODE)
    api.list_pdbs()
    api.warn_node(node, "MigRolloutLeftNode", "rollout privilege: a test of the controller's grant")
    # A label other than the one the Node has (an earlier test of the session may have set either), so
    # the write changes the Node and moves its resourceVersion on.
    first, second = ("all-balanced", "all-1g.10gb")
    if node.labels.get(MIG_CONFIG_LABEL) == first:
        first, second = second, first
    relabelled = api.set_layout(node, first)  # the one label, conditional on the Node as read
    assert relabelled.labels[MIG_CONFIG_LABEL] == first
    with pytest.raises(NodeChangedError):
        api.set_layout(node, second)  # at the resourceVersion it had before: refused, 409


def test_the_controller_reaches_no_configmap_outside_its_namespace_and_creates_or_deletes_none(
    control_plane: ControlPlane, controller: Identity
) -> None:
    _state_object(control_plane, "privilege")
    with pytest.raises(MigAgentError, match="HTTP 403: "):
        _api(control_plane, controller).read_layouts()  # namespace migagent: the layouts
    with pytest.raises(MigAgentError, match="HTTP 403: "):
        _api(control_plane, controller, namespace=LAYOUTS_NAMESPACE).list_states()
    rest = control_plane.rest(controller)
    layouts = control_plane.rest(control_plane.admin).get(f"/api/v1/namespaces/{LAYOUTS_NAMESPACE}/configmaps")
    name = layouts["items"][0]["metadata"]["name"]
    refused: list[Callable[[], object]] = [
        lambda: rest.get(f"/api/v1/namespaces/{LAYOUTS_NAMESPACE}/configmaps/{name}"),
        lambda: rest.replace(f"/api/v1/namespaces/{LAYOUTS_NAMESPACE}/configmaps/{name}", layouts["items"][0]),
        lambda: rest.get("/api/v1/namespaces/default/configmaps"),
        lambda: rest.create(
            f"/api/v1/namespaces/{ROLLOUT_NAMESPACE}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "migagent-rollout-new"}, "data": {}},
        ),
        lambda: rest.delete(f"/api/v1/namespaces/{ROLLOUT_NAMESPACE}/configmaps/migagent-rollout-privilege", {}),
    ]
    for call in refused:
        with pytest.raises(HttpError) as error:
            call()
        assert error.value.status == 403, error.value.body


def test_without_the_component_the_first_start_creates_the_state_namespace(control_plane: ControlPlane) -> None:
    admin = _api(control_plane, control_plane.admin, namespace="rollouts-first-start")
    assert admin.create_state("first", STATE) is not None
    namespace = control_plane.rest(control_plane.admin).get("/api/v1/namespaces/rollouts-first-start")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert admin.create_state("first", STATE) is None  # exists already: another start made it
