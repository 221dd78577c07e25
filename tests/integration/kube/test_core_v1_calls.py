"""`CoreV1Calls` sends what the generated `CoreV1Api` sends and returns what it returns.

Both talk real HTTP to one recording server; each case calls the same method with the same
arguments on each and compares the request on the wire (method, path, query, Accept, Content-Type,
body, bearer token) and the value returned, for answers and refusals alike.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client import (
    ApiClient,
    Configuration,
    CoreV1Api,
    CoreV1Event,
    V1DeleteOptions,
    V1Eviction,
    V1ObjectMeta,
    V1ObjectReference,
    V1Preconditions,
)
from kubernetes.client.exceptions import ApiException

from migagent.kube.core_v1 import CoreV1Calls

_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "7", "labels": {"a": "b"}},
    "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/mig-1g.10gb": "7"}},
}
_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p1", "namespace": "ns", "uid": "u2", "resourceVersion": "9"},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    "status": {"phase": "Running"},
}
_STATUS_429 = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "reason": "TooManyRequests",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "code": 429,
    "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget pdb needs 1 healthy"}]},
}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    accept: str | None
    content_type: str | None
    authorization: str | None
    body: Any


_WATCH_LINES = [
    {"type": "ADDED", "object": _NODE},
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}},
]
_NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
_CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
_EVENT = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "involvedObject": {}}
_NODE_LIST = {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "7"}, "items": [_NODE]}
_POD_LIST = {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [_POD]}
# The first rule whose test matches (method, path) answers: a 429 for any eviction, a 404 for the
# ConfigMap named `missing`, a stream of two lines for a watch.
_RULES: list[tuple[Callable[[str, str], bool], int, Any]] = [
    (lambda method, path: path.startswith("/api/v1/nodes?") and "watch=true" in path, 200,
     "\n".join(json.dumps(line) for line in _WATCH_LINES) + "\n"),
    (lambda method, path: path.endswith("/eviction"), 429, _STATUS_429),
    (lambda method, path: "/configmaps/missing" in path, 404, _NOT_FOUND),
    (lambda method, path: "/configmaps/" in path, 200, _CONFIG_MAP),
    (lambda method, path: "/events" in path, 201, _EVENT),
    (lambda method, path: path.startswith("/api/v1/nodes/"), 200, _NODE),
    (lambda method, path: path.startswith("/api/v1/nodes"), 200, _NODE_LIST),
    (lambda method, path: "/pods/" in path and method == "DELETE", 200, _POD),
    (lambda method, path: True, 200, _POD_LIST),
]


def _answer(method: str, path: str) -> tuple[int, Any]:
    return next((status, answer) for matches, status, answer in _RULES if matches(method, path))


class _Recorder(BaseHTTPRequestHandler):
    seen: list[Seen]

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.seen.append(
            Seen(
                self.command, self.path, self.headers.get("Accept"), self.headers.get("Content-Type"),
                self.headers.get("Authorization"), json.loads(raw) if raw else None,
            )
        )
        status, answer = _answer(self.command, self.path)
        payload = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    # The names http.server dispatches each method to.
    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def recorded() -> Iterator[tuple[ApiClient, list[Seen]]]:
    seen: list[Seen] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="core-v1-recorder", daemon=True)
    thread.start()
    configuration = Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    configuration.api_key = {"BearerToken": "Bearer t0ken"}
    try:
        with ApiClient(configuration) as client:
            yield client, seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _event() -> CoreV1Event:
    return CoreV1Event(
        metadata=V1ObjectMeta(name="n1.1", namespace="default"),
        involved_object=V1ObjectReference(kind="Node", name="n1", uid="u1"),
        reason="R",
        message="m",
        type="Normal",
    )


def _eviction() -> V1Eviction:
    options = V1DeleteOptions(preconditions=V1Preconditions(uid="u2"))
    metadata = V1ObjectMeta(name="p1")
    return V1Eviction(api_version="policy/v1", kind="Eviction", metadata=metadata, delete_options=options)


Call = Callable[[Any], Any]
CASES: dict[str, Call] = {
    "read_node": lambda api: api.read_node("n1", _request_timeout=(5, 30)),
    "patch_node": lambda api: api.patch_node("n1", {"metadata": {"labels": {"a": None, "b": "c"}}}),
    "conditional patch_node": lambda api: api.patch_node("n1", {"metadata": {"resourceVersion": "7"}}),
    "patch_node_status": lambda api: api.patch_node_status("n1", {"status": {"conditions": [{"type": "X"}]}}),
    "list_node by label": lambda api: api.list_node(label_selector="a=b", _request_timeout=(5, 30)),
    "list_pod_for_all_namespaces": lambda api: api.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=n1", label_selector="app=x"
    ),
    "list_namespaced_pod": lambda api: api.list_namespaced_pod("ns", field_selector="metadata.name=p1"),
    "delete_namespaced_pod": lambda api: api.delete_namespaced_pod(
        "p1", "ns", grace_period_seconds=0, body=V1DeleteOptions(preconditions=V1Preconditions(uid="u2"))
    ),
    "create_namespaced_event": lambda api: api.create_namespaced_event("default", _event()),
    "read_namespaced_config_map": lambda api: api.read_namespaced_config_map("c", "kube-system"),
}


def _outcome(call: Call, api: Any) -> Any:
    try:
        value = call(api)
    except ApiException as error:
        return ("refused", error.status, json.loads(error.body or "null"))
    return value.to_dict() if hasattr(value, "to_dict") else value


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_call_sends_and_returns_what_the_generated_method_does(
    recorded: tuple[ApiClient, list[Seen]], case: str
) -> None:
    client, seen = recorded
    call = CASES[case]
    generated = _outcome(call, CoreV1Api(client))
    ours = _outcome(call, CoreV1Calls(client))
    assert len(seen) == 2
    assert seen[1] == seen[0]
    if case.startswith(("delete_", "create_namespaced_pod")):
        assert ours is None  # the answer is not read (the docstrings say why)
    else:
        assert ours == generated


REFUSED: dict[str, Call] = {
    "create_namespaced_pod_eviction": lambda api: api.create_namespaced_pod_eviction("p1", "ns", _eviction()),
    "read_namespaced_config_map": lambda api: api.read_namespaced_config_map("missing", "kube-system"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refusal_raises_the_same_api_exception_with_the_servers_status(
    recorded: tuple[ApiClient, list[Seen]], name: str
) -> None:
    client, seen = recorded
    errors = []
    for api in (CoreV1Api(client), CoreV1Calls(client)):
        with pytest.raises(ApiException) as info:
            REFUSED[name](api)
        errors.append((type(info.value), info.value.status, json.loads(info.value.body or "null")))
    assert errors[1] == errors[0]
    assert errors[0][1] in (404, 429)
    assert seen[1] == seen[0]


def test_a_watch_streams_the_same_typed_events(recorded: tuple[ApiClient, list[Seen]]) -> None:
    client, seen = recorded
    streams = []
    for api in (CoreV1Api(client), CoreV1Calls(client)):
        events = watch.Watch(return_type="V1Node").stream(  # type: ignore[no-untyped-call]
            api.list_node, resource_version="6", timeout_seconds=1, allow_watch_bookmarks=True
        )
        streams.append([(event["type"], event["raw_object"], type(event["object"]).__name__) for event in events])
    assert streams[1] == streams[0]
    assert [kind for kind, _, _ in streams[0]] == ["ADDED", "BOOKMARK"]
    assert streams[0][0][2] == "V1Node"
    assert seen[1] == seen[0]


def test_an_argument_the_generated_method_would_take_but_this_subset_does_not_is_refused_by_name(
    recorded: tuple[ApiClient, list[Seen]],
) -> None:
    client, seen = recorded
    with pytest.raises(TypeError, match="limit"):
        CoreV1Calls(client).list_node(limit=5)
    assert seen == []
