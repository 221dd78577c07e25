"""Install one of deploy/'s variants on the real control plane, and the objects a GPU node's world has.

A variant is what an admin renders: an overlay, possibly with components. It is applied with
`kubectl apply --server-side --validate=strict` (the server's own schema validation). Switching
variants deletes what the previous one had and the next one lacks (a component's Role, say), but
never the namespace or the service account: the agent's pod-bound token names the account's UID.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import yaml

from migagent_sim.deadline import Deadline
from tests.integration.deploy.manifests import of_kind, only, render, render_with_components
from tests.realkube.control_plane import ControlPlane, Identity
from tests.realkube.policy_cases import NODE, Case, stored_node
from tests.realkube.rest import SMP, HttpError

JsonDict = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace, name
PROBE_NODE = "policy-probe-node"
"""A node no agent runs on: the dry-run probes that the policies are in force touch it."""


@dataclass(frozen=True)
class Variant:
    overlay: str
    components: tuple[str, ...] = ()
    delete_namespaces: tuple[str, ...] = ()
    """Namespaces where its RBAC grants deleting pods (cluster-wide: ("*",))."""

    @property
    def name(self) -> str:
        return "+".join([self.overlay, *self.components])

    def render(self) -> list[JsonDict]:
        if self.components:
            return render_with_components(f"overlays/{self.overlay}", *(f"components/{c}" for c in self.components))
        return render(f"overlays/{self.overlay}")

    def may_delete_in(self, namespace: str) -> bool:
        return "*" in self.delete_namespaces or namespace in self.delete_namespaces

    @property
    def force_delete(self) -> bool:
        return "force-delete" in self.components


GPU_OPERATOR = Variant("gpu-operator", delete_namespaces=("gpu-operator",))
STANDALONE_DELETE_POD = Variant("standalone", ("delete-pod-restart",), delete_namespaces=("nvidia-device-plugin",))
STANDALONE = Variant("standalone")
FORCE_DELETE = Variant("gpu-operator", ("force-delete",), delete_namespaces=("gpu-operator", "*"))
ROLLOUT_CONTROLLER = Variant("gpu-operator", ("rollout-controller",), delete_namespaces=("gpu-operator",))
VARIANTS = (GPU_OPERATOR, STANDALONE, STANDALONE_DELETE_POD, FORCE_DELETE, ROLLOUT_CONTROLLER)


def _key(obj: JsonDict) -> Key:
    metadata = obj["metadata"]
    return obj["kind"], metadata.get("namespace", ""), metadata["name"]


class Deployer:
    """Keeps track of the variant installed on one control plane."""

    KEEP = frozenset({"Namespace", "ServiceAccount"})

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.current: Variant | None = None
        self._applied: dict[Key, JsonDict] = {}
        self._tokens: dict[tuple[str, str, str], Identity] = {}

    def install(self, variant: Variant) -> list[JsonDict]:
        objects = variant.render()
        if self.current == variant:
            return objects
        wanted = {_key(o): o for o in objects}
        stale = [o for k, o in self._applied.items() if k not in wanted and o["kind"] not in self.KEEP]
        if stale:
            self.plane.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=_dump(stale))
        # The namespaces the overlays expect to exist (the GPU Operator's, the plugin chart's).
        created = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
        for namespace in {o["metadata"].get("namespace") for o in objects} - created - {None}:
            ensure_namespace(self.plane, namespace)
        self.plane.apply(objects)
        self._applied = wanted
        self.current = variant
        self._wait_in_force(variant, objects)
        return objects

    def _wait_in_force(self, variant: Variant, objects: list[JsonDict], timeout_s: float = 60) -> None:
        """Until the API server's admission enforces the policies just applied (its informers lag the
        write by a moment): an escalation by the agent, sent as a dry run, must be refused by each."""
        agent = self.plane.rest(self.agent(objects, NODE))
        admin = self.plane.rest(self.plane.admin)
        self.plane.ensure_node(PROBE_NODE)
        namespace = next((n for n in variant.delete_namespaces if n != "*"), None)
        probe_pod = None
        if namespace is not None:
            probe_pod = f"/api/v1/namespaces/{namespace}/pods/policy-probe"
            try:
                admin.get(probe_pod)
            except HttpError:
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "policy-probe", "namespace": namespace},
                    "spec": {"nodeName": PROBE_NODE, "containers": [{"name": "main", "image": "example.com/app:1"}]},
                }
                admin.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        deadline = Deadline(timeout_s)
        while True:
            refused = 0
            answers: list[str] = []
            try:
                agent.request(
                    "PATCH",
                    f"/api/v1/nodes/{NODE}",
                    {"metadata": {"labels": {"nvidia.com/gpu.deploy.driver": "probe"}}},
                    query={"dryRun": "All"},
                    content_type=SMP,
                )
                answers.append("node patch allowed")
            except HttpError as error:
                answers.append(error.message)
                refused += "migagent-own-node-only" in error.message
            if probe_pod is None:
                refused += 1
            else:
                try:
                    # (with a body, the server reads DeleteOptions from it alone: dryRun goes there)
                    agent.delete(probe_pod, {"gracePeriodSeconds": 0, "dryRun": ["All"]})
                    answers.append("pod delete allowed")
                except HttpError as error:
                    answers.append(error.message)
                    refused += "migagent-own-node-pods" in error.message
            if refused == 2:
                return
            if deadline.passed():
                raise AssertionError(
                    f"the admission policies of {variant.name} were not in force after {timeout_s}s: {answers}"
                )
            time.sleep(0.2)

    def agent(self, objects: list[JsonDict], node: str, *, service_account: str | None = None) -> Identity:
        """The agent's service account (its DaemonSet's), or another rendered one by name, authenticated by a
        token bound to a pod on `node`."""
        account = service_account or only(objects, "DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"]
        metadata = next(o for o in of_kind(objects, "ServiceAccount") if o["metadata"]["name"] == account)["metadata"]
        key = (metadata["namespace"], metadata["name"], node)
        if key not in self._tokens:
            self.plane.ensure_node(node)
            self._tokens[key] = self.plane.agent_identity(
                namespace=metadata["namespace"], service_account=metadata["name"], node=node
            )
        return self._tokens[key]


def _dump(objects: list[JsonDict]) -> str:
    return yaml.safe_dump_all(objects)


def ensure_namespace(plane: ControlPlane, name: str) -> None:
    try:
        plane.rest(plane.admin).create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    except HttpError as error:
        if error.status != 409:
            raise


def ensure_owner(plane: ControlPlane, kind: str, namespace: str, name: str, *, replicas: int = 1) -> str:
    """An inert DaemonSet or ReplicaSet (no controller runs them) so a pod may name it as its owner; its UID.

    The garbage collector deletes a pod whose owner does not exist, so an owner must be real."""
    admin = plane.rest(plane.admin)
    collection = f"/apis/apps/v1/namespaces/{namespace}/{'daemonsets' if kind == 'DaemonSet' else 'replicasets'}"
    spec: JsonDict = {
        "selector": {"matchLabels": {"migagent-test-owner": name}},
        "template": {
            "metadata": {"labels": {"migagent-test-owner": name}},
            "spec": {"containers": [{"name": "main", "image": "example.com/app:1"}]},
        },
    }
    if kind != "DaemonSet":
        spec["replicas"] = replicas  # what the disruption controller counts as expected pods
    try:
        found = admin.get(f"{collection}/{name}")
    except HttpError as error:
        if error.status != 404:
            raise
        found = admin.create(
            collection, {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}
        )
    if kind != "DaemonSet" and found["spec"].get("replicas") != replicas:
        # An earlier test on this worker's control plane made it with another count: the budget's
        # expected pods follow this test's (else a budget meant to block allows a disruption).
        found = admin.patch(f"{collection}/{name}", {"spec": {"replicas": replicas}})
    uid: str = found["metadata"]["uid"]
    return uid


def create_pod(plane: ControlPlane, pod: JsonDict, *, replicas: int = 1) -> JsonDict:
    """Create `pod` as the admin (bound to its node by spec.nodeName), its owners made real first
    (`replicas`: what a ReplicaSet owner says it wants)."""
    metadata = pod["metadata"]
    namespace = metadata["namespace"]
    ensure_namespace(plane, namespace)
    for reference in metadata.get("ownerReferences") or []:
        reference["uid"] = ensure_owner(plane, reference["kind"], namespace, reference["name"], replicas=replicas)
    return plane.rest(plane.admin).create(f"/api/v1/namespaces/{namespace}/pods", pod)


def merge_patch(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch taking `old` to `new` (lists are replaced whole; a removed key is null)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: JsonDict = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch(old[key], value)
    return patch


def reset_node(plane: ControlPlane, case: Case, name: str = NODE) -> JsonDict:
    """As the admin: put the Node back to `stored_node` with the case's `before`; returns that state."""
    target = stored_node(name)
    case.before(target)
    admin = plane.rest(plane.admin)
    current = plane.ensure_node(name)
    current["metadata"]["labels"] = target["metadata"]["labels"]
    current["metadata"]["annotations"] = target["metadata"]["annotations"]
    current["spec"] = target["spec"]
    updated = admin.replace(f"/api/v1/nodes/{name}", current)
    updated["status"] = target["status"]
    admin.replace(f"/api/v1/nodes/{name}/status", updated)
    return target
