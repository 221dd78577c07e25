"""Fidelity, measured: one scripted sequence of every kind of request the agent makes, sent to the fake API
server and to the real kube-apiserver, and the answers compared.

Both servers hold the same world (node gpu-1, a Running workload pod guarded by a PodDisruptionBudget
that allows no disruption, the gpu-operator overlay's RBAC and policies) and both are asked as the
agent's service account with a token bound to gpu-1. Each step records what the agent reads of the
answer: the HTTP status, the Status reason and causes of an error, the Retry-After header of a 429,
and the fields of a success the agent uses. Every step whose record differs must be listed, with its
reason, in migagent_sim.apiserver.fidelity.DELIBERATE_DIFFERENCES; the test asserts the set of
differing steps equals that list, so a fixed difference or a new one both fail it.
"""

from __future__ import annotations

import copy
import http.client
import json
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from migagent_sim.apiserver import FakeApiServer
from migagent_sim.apiserver.access import AccessControl
from migagent_sim.apiserver.fidelity import DELIBERATE_DIFFERENCES
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.deadline import Deadline
from tests.realkube.control_plane import IDENTITY_POD_LABEL, ControlPlane
from tests.realkube.deployment import GPU_OPERATOR, Deployer, create_pod, ensure_namespace, reset_node
from tests.realkube.policy_cases import NODE, Case

JsonDict = dict[str, Any]
WORK = "fidelity"
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
LABELS = {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"}


@dataclass(frozen=True)
class Endpoint:
    """How to reach one server as the agent: base URL, TLS context (None: plain HTTP), bearer token."""

    url: str
    context: ssl.SSLContext | None
    token: str
    admin_edit: Callable[[dict[str, str]], None]
    """Set labels on gpu-1 as the admin (between steps, to make a watch see a change)."""


def send(
    endpoint: Endpoint,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str | None = None,
    stream_s: float | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """(status, decoded JSON body, or a list of watch events when `stream_s` is set; headers)."""
    parsed = urllib.parse.urlsplit(endpoint.url)
    timeout = 10 + (stream_s or 0)
    connection: http.client.HTTPConnection = (
        http.client.HTTPSConnection(parsed.hostname or "", parsed.port, context=endpoint.context, timeout=timeout)
        if endpoint.context is not None
        else http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=timeout)
    )
    headers = {"Authorization": f"Bearer {endpoint.token}", "Accept": "application/json"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    data = json.dumps(body).encode() if body is not None else None
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    found_headers = {k.lower(): v for k, v in response.getheaders()}
    if stream_s is not None and response.status == 200:
        return response.status, [json.loads(line) for line in raw.splitlines() if line.strip()], found_headers
    return response.status, json.loads(raw) if raw else None, found_headers


def summary(status: int, body: Any, headers: dict[str, str]) -> JsonDict:
    """What the agent reads of an answer."""
    record: JsonDict = {"status": status}
    if isinstance(body, dict) and body.get("kind") == "Status":
        record["reason"] = body.get("reason")
        record["code"] = body.get("code")
        causes = (body.get("details") or {}).get("causes") or []
        if causes:
            record["causes"] = sorted(c.get("reason") for c in causes)
        if status == 429:
            record["retry-after"] = headers.get("retry-after")
        return record
    if isinstance(body, list):  # watch events
        record["events"] = [
            (e["type"], e["object"].get("code") if e["type"] == "ERROR" else e["object"]["metadata"].get("name"))
            for e in body
            if e["type"] != "BOOKMARK"
        ]
        return record
    if not isinstance(body, dict):
        return record
    record["kind"] = body.get("kind")
    metadata = body.get("metadata") or {}
    if body.get("kind") == "Node":
        record["name"] = metadata.get("name")
        record["labels"] = {k: v for k, v in (metadata.get("labels") or {}).items() if k.startswith("nvidia.com/")}
        record["annotations"] = {
            k: v for k, v in (metadata.get("annotations") or {}).items() if k.startswith("migagent.io/")
        }
        record["unschedulable"] = bool((body.get("spec") or {}).get("unschedulable"))
        record["conditions"] = sorted(
            (c["type"], c["status"], c.get("reason"))
            for c in (body.get("status") or {}).get("conditions") or []
            if c["type"] == "MigConfigReady"
        )
        record["resourceVersion is a string"] = isinstance(metadata.get("resourceVersion"), str)
    elif body.get("kind", "").endswith("List"):
        record["items"] = sorted(
            (i["metadata"]["name"], "deletionTimestamp" in i["metadata"])
            for i in body.get("items") or []
            # the pod the real server's agent token is bound to is the harness's, not the world's
            if (i["metadata"].get("labels") or {}).get("app.kubernetes.io/name") != IDENTITY_POD_LABEL
        )
        record["resourceVersion is a string"] = isinstance(metadata.get("resourceVersion"), str)
    elif body.get("kind") == "Event":
        record["involvedObject"] = (body.get("involvedObject") or {}).get("name")
    elif body.get("kind") == "Pod":
        record["deleting"] = "deletionTimestamp" in metadata
    return record


def condition(status: str, reason: str) -> JsonDict:
    now = "2026-01-01T00:00:00Z"
    return {
        "type": "MigConfigReady",
        "status": status,
        "reason": reason,
        "message": reason,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def node_event() -> JsonDict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{NODE}.", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": NODE},
        "reason": "MigConfigApplied",
        "message": "test",
        "type": "Normal",
        "source": {"component": "migagent"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
    }


def run_sequence(endpoint: Endpoint) -> dict[str, JsonDict]:
    """The agent's requests, in the order a change makes them; each step's summary by name."""
    records: dict[str, JsonDict] = {}
    node_path = f"/api/v1/nodes/{NODE}"

    def step(name: str, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        status, answer, headers = send(endpoint, method, path, body, **kwargs)
        records[name] = summary(status, answer, headers)
        return answer

    first = step("get own node", "GET", node_path)
    start_rv = first["metadata"]["resourceVersion"]
    step("get a node that does not exist", "GET", "/api/v1/nodes/no-such-node")
    step("list nodes (not granted)", "GET", "/api/v1/nodes")
    step(
        "patch state label (strategic merge)",
        "PATCH",
        node_path,
        {"metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}}},
        content_type=SMP,
    )
    step(
        "patch with a stale resourceVersion",
        "PATCH",
        node_path,
        {"metadata": {"labels": {"nvidia.com/mig.config.state": "failed"}, "resourceVersion": start_rv}},
        content_type=SMP,
    )
    step(
        "patch migagent annotations (merge patch)",
        "PATCH",
        node_path,
        {"metadata": {"annotations": {"migagent.io/desired": "{}"}}},
        content_type=MERGE,
    )
    step(
        "cordon with the mark",
        "PATCH",
        node_path,
        {"spec": {"unschedulable": True}, "metadata": {"annotations": {"migagent.io/cordoned-by-migagent": "true"}}},
        content_type=SMP,
    )
    step(
        "uncordon removing the mark",
        "PATCH",
        node_path,
        {"spec": {"unschedulable": False}, "metadata": {"annotations": {"migagent.io/cordoned-by-migagent": None}}},
        content_type=SMP,
    )
    step(
        "patch the admin's layout label (policy)",
        "PATCH",
        node_path,
        {"metadata": {"labels": {"nvidia.com/mig.config": "all-7g"}}},
        content_type=SMP,
    )
    step(
        "json patch of the state label",
        "PATCH",
        node_path,
        [{"op": "replace", "path": "/metadata/labels/nvidia.com~1mig.config.state", "value": "success"}],
        content_type=JSON_PATCH,
    )
    step("patch with an unsupported content type", "PATCH", node_path, {"metadata": {}}, content_type="text/plain")
    step(
        "set the MigConfigReady condition (status, strategic merge)",
        "PATCH",
        f"{node_path}/status",
        {"status": {"conditions": [condition("False", "Applying")]}},
        content_type=SMP,
    )
    step(
        "update the MigConfigReady condition (merged by type)",
        "PATCH",
        f"{node_path}/status",
        {"status": {"conditions": [condition("True", "Applied")]}},
        content_type=SMP,
    )
    step("create an event about the node", "POST", "/api/v1/namespaces/default/events", node_event())
    step("create an event elsewhere (not granted)", "POST", f"/api/v1/namespaces/{WORK}/events", node_event())
    selector = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={NODE}"})
    step("list pods on the node (all namespaces)", "GET", f"/api/v1/pods?{selector}")
    labelled = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={NODE}", "labelSelector": "app=work"})
    step("list pods on the node by label in a namespace", "GET", f"/api/v1/namespaces/{WORK}/pods?{labelled}")
    by_name = urllib.parse.urlencode({"fieldSelector": "metadata.name=w1"})
    step("find one pod by listing its namespace", "GET", f"/api/v1/namespaces/{WORK}/pods?{by_name}")
    step("get one pod (not granted)", "GET", f"/api/v1/namespaces/{WORK}/pods/w1")
    step("list the budgets of a namespace", "GET", f"/apis/policy/v1/namespaces/{WORK}/poddisruptionbudgets")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w1", "namespace": WORK}}
    step("evict a pod its budget protects", "POST", f"/api/v1/namespaces/{WORK}/pods/w1/eviction", eviction)
    free = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w2", "namespace": WORK}}
    step("evict a pod no budget protects", "POST", f"/api/v1/namespaces/{WORK}/pods/w2/eviction", free)
    w2 = urllib.parse.urlencode({"fieldSelector": "metadata.name=w2"})
    step("find the evicted pod terminating", "GET", f"/api/v1/namespaces/{WORK}/pods?{w2}")
    step("evict it again while it terminates", "POST", f"/api/v1/namespaces/{WORK}/pods/w2/eviction", free)
    gone = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "gone", "namespace": WORK}}
    step("evict a pod that does not exist", "POST", f"/api/v1/namespaces/{WORK}/pods/gone/eviction", gone)
    step("delete a workload pod (not granted by this overlay)", "DELETE", f"/api/v1/namespaces/{WORK}/pods/w1")
    # Watches: from the version read at the start (the changes since), and from one long compacted.
    rv_now = send(endpoint, "GET", node_path)[1]["metadata"]["resourceVersion"]
    endpoint.admin_edit({"migagent-fidelity": "changed"})
    name_selector = f"metadata.name={NODE}"
    watch = urllib.parse.urlencode(
        {"watch": "1", "fieldSelector": name_selector, "resourceVersion": rv_now, "timeoutSeconds": "1"}
    )
    step("watch the node from a recent resourceVersion", "GET", f"/api/v1/nodes?{watch}", stream_s=1)
    expired = urllib.parse.urlencode(
        {"watch": "1", "fieldSelector": name_selector, "resourceVersion": "1", "timeoutSeconds": "1"}
    )
    step("watch the node from an expired resourceVersion", "GET", f"/api/v1/nodes?{expired}", stream_s=1)
    return records


# --- the two worlds ---------------------------------------------------------------------------


@pytest.fixture
def fake_endpoint() -> Iterator[Endpoint]:
    """The fake server for one test: stopped with it, so the pod removals its evictions scheduled end too."""
    objects = GPU_OPERATOR.render()
    server = FakeApiServer(access=AccessControl(objects))
    server.start()
    server.add_node(NODE, labels=LABELS)
    server.create_pod(node_name=NODE, namespace=WORK, name="w1", labels={"app": "work"}, owner_kind="ReplicaSet")
    server.create_pod(node_name=NODE, namespace=WORK, name="w2", labels={"app": "free"}, owner_kind="ReplicaSet")
    server.add_pdb(WORK, "work", match_labels={"app": "work"}, disruptions_allowed=0)
    token = server.issue_token(UserInfo.service_account("migagent", "migagent", node_name=NODE))

    def admin_edit(labels: dict[str, str]) -> None:
        server.update_node(NODE, lambda node: node["metadata"].setdefault("labels", {}).update(labels))

    try:
        yield Endpoint(server.url, None, token, admin_edit)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def real_endpoint(control_plane: ControlPlane, deployer: Deployer) -> Endpoint:
    objects = deployer.install(GPU_OPERATOR)
    admin = control_plane.rest(control_plane.admin)
    node_path = f"/api/v1/nodes/{NODE}"
    # The node as the fake has it: the two labels, nothing cordoned, no condition.
    reset_node(control_plane, Case("fidelity", lambda node: None, True))
    node = admin.get(node_path)
    node["metadata"]["labels"] = dict(LABELS)
    node["metadata"]["annotations"] = {}
    node["spec"].pop("unschedulable", None)  # podCIDR and providerID cannot be cleared once set
    node = admin.replace(node_path, node)
    node["status"] = {}
    admin.replace(f"{node_path}/status", node)
    ensure_namespace(control_plane, WORK)
    owner: JsonDict = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "w1-owner", "uid": "", "controller": True}
    pod: JsonDict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "w1", "namespace": WORK, "labels": {"app": "work"}, "ownerReferences": [owner]},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "example.com/app:1"}]},
    }
    kubelet = control_plane.rest(control_plane.node_identity(NODE))
    for name, app in (("w1", "work"), ("w2", "free")):
        one = copy.deepcopy(pod)
        one["metadata"].update(name=name, labels={"app": app})
        one["metadata"]["ownerReferences"][0]["name"] = f"{name}-owner"
        create_pod(control_plane, one)
        kubelet.patch(
            f"/api/v1/namespaces/{WORK}/pods/{name}/status",
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        )
    budgets = f"/apis/policy/v1/namespaces/{WORK}/poddisruptionbudgets"
    admin.create(
        budgets,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "work"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "work"}}},
        },
    )
    deadline = Deadline(60)
    while True:  # the disruption controller has looked at the budget (else a 429 says "try again")
        pdb = admin.get(f"{budgets}/work")
        status = pdb.get("status") or {}
        if status.get("observedGeneration") == pdb["metadata"]["generation"] and status.get("currentHealthy") == 1:
            break
        assert not deadline.passed(), f"the disruption controller never observed the budget: {status}"
        time.sleep(0.5)
    agent = deployer.agent(objects, NODE)
    assert agent.token is not None

    def admin_edit(labels: dict[str, str]) -> None:
        admin.patch(node_path, {"metadata": {"labels": labels}})

    # TLS that trusts the server's CA but presents no client certificate: the token alone says who asks.
    return Endpoint(control_plane.url, control_plane.ssl_context(agent), agent.token, admin_edit)


def test_the_fake_answers_the_agents_requests_as_the_real_server_does_but_for_the_listed_differences(
    fake_endpoint: Endpoint, real_endpoint: Endpoint
) -> None:
    fake = run_sequence(fake_endpoint)
    real = run_sequence(real_endpoint)
    assert fake.keys() == real.keys()
    differing = {name: {"fake": fake[name], "real": real[name]} for name in real if fake[name] != real[name]}
    report = json.dumps(differing, indent=1, sort_keys=True)
    assert set(differing) == set(DELIBERATE_DIFFERENCES), report
