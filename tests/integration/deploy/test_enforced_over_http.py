"""The fake API server enforces the rendered manifests on real HTTP requests of the real client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migagent_sim.apiserver import FakeApiServer
from migagent_sim.apiserver.access import AccessControl
from tests.integration.deploy.access import agent_identity
from tests.integration.deploy.manifests import render


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(access=AccessControl(render("overlays/gpu-operator"))) as fake:
        for name in ("gpu-1", "gpu-2"):
            fake.add_node(name, labels={"nvidia.com/mig.config": "all-1g.10gb"})
        fake.create_pod(node_name="gpu-1", namespace="ml", name="train-0")
        yield fake


def api(server: FakeApiServer, token: str | None) -> client.CoreV1Api:
    configuration = client.Configuration(host=server.url)
    if token is not None:
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
    return client.CoreV1Api(client.ApiClient(configuration))


@pytest.fixture
def agent(server: FakeApiServer) -> client.CoreV1Api:
    return api(server, server.issue_token(agent_identity(render("overlays/gpu-operator"), "gpu-1")))


def status_of(call: object) -> int:
    assert callable(call)
    try:
        call()
    except ApiException as error:
        return int(error.status)
    return 200


def test_a_request_without_a_token_is_401(server: FakeApiServer) -> None:
    assert status_of(lambda: api(server, None).read_node("gpu-1")) == 401
    assert status_of(lambda: api(server, "forged").read_node("gpu-1")) == 401


def test_the_agent_may_set_its_state_label_but_not_the_admins_layout_label(
    agent: client.CoreV1Api, server: FakeApiServer
) -> None:
    state = {"metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}}}
    assert status_of(lambda: agent.patch_node("gpu-1", state)) == 200
    with pytest.raises(ApiException) as raised:
        agent.patch_node("gpu-1", {"metadata": {"labels": {"nvidia.com/mig.config": "all-7g"}}})
    assert raised.value.status == 403
    assert "ValidatingAdmissionPolicy 'migagent-own-node-only'" in str(raised.value.body)
    assert server.node("gpu-1")["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"


def test_the_agent_may_not_cordon_another_node(agent: client.CoreV1Api, server: FakeApiServer) -> None:
    with pytest.raises(ApiException) as raised:
        agent.patch_node("gpu-2", {"spec": {"unschedulable": True}})
    assert raised.value.status == 403
    assert "may not change node gpu-2" in str(raised.value.body)
    assert "unschedulable" not in server.node("gpu-2")["spec"]


def test_calls_the_rbac_does_not_grant_are_403_with_the_rbac_wording(agent: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        agent.read_namespaced_pod("train-0", "ml")  # the agent may list pods, not get them
    assert raised.value.status == 403
    message = json.loads(raised.value.body or "{}")["message"]
    assert message == (
        'pods "train-0" is forbidden: User "system:serviceaccount:migagent:migagent" cannot get resource "pods"'
        ' in API group "" in the namespace "ml"'
    )
    assert status_of(lambda: agent.delete_namespaced_pod("train-0", "ml")) == 403
    assert status_of(lambda: agent.list_namespaced_pod("ml", field_selector="spec.nodeName=gpu-1")) == 200
