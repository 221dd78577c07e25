"""Builders for the JSON objects the fake serves; each satisfies the kubernetes v37 client's strict models.

Quantities and all metadata strings are JSON strings, integers are JSON integers, required members
(`spec.containers`, condition `type`/`status`, DaemonSet status counters, ...) are always present.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any, Required, TypedDict, Unpack

JsonDict = dict[str, Any]

DEFAULT_NODE_CAPACITY = {"cpu": "64", "memory": "528280532Ki", "pods": "110", "ephemeral-storage": "1845017560Ki"}
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
_OWNER_API_VERSIONS = {"DaemonSet": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


def timestamp(wall_s: float) -> str:
    """RFC 3339 with second precision and a Z, as metav1.Time marshals."""
    return datetime.datetime.fromtimestamp(wall_s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_timestamp(wall_s: float) -> str:
    """metav1.MicroTime: always six fractional digits."""
    return datetime.datetime.fromtimestamp(wall_s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def quantities(values: Mapping[str, str | int] | None) -> dict[str, str]:
    """Quantities go over the wire as strings; callers may hand in ints for convenience."""
    return {name: str(amount) for name, amount in (values or {}).items()}


def node_object(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str | int] | None = None,
    capacity: Mapping[str, str | int] | None = None,
    wall_s: float,
) -> JsonDict:
    """A Ready node; capacity defaults to a plausible GPU server, allocatable to the capacity."""
    full_capacity = {**DEFAULT_NODE_CAPACITY, **quantities(capacity)}
    now = timestamp(wall_s)
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
            "annotations": {},
        },
        "spec": {},
        "status": {
            "capacity": full_capacity,
            "allocatable": {**full_capacity, **quantities(allocatable)},
            "conditions": [ready],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": _node_info(name),
        },
    }


def _node_info(name: str) -> JsonDict:
    return {
        "architecture": "amd64",
        "bootID": new_uid(),
        "containerRuntimeVersion": "containerd://2.1.0",
        "kernelVersion": "6.8.0-generic",
        "kubeProxyVersion": "",
        "kubeletVersion": "v1.37.0",
        "machineID": name,
        "operatingSystem": "linux",
        "osImage": "Ubuntu 24.04 LTS",
        "systemUUID": new_uid(),
    }


def owner_reference(kind: str, name: str, uid: str) -> JsonDict:
    return {
        "apiVersion": _OWNER_API_VERSIONS.get(kind, "v1"),
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


class PodArgs(TypedDict, total=False):
    """What a test says about a pod it creates; `pod_object` fills in the rest."""

    node_name: Required[str | None]
    namespace: Required[str]
    name: Required[str]
    labels: Mapping[str, str] | None
    owner_kind: str | None
    """"DaemonSet", "ReplicaSet", ... or None (no controller)."""
    owner_name: str | None
    """Defaults to "<name>-owner"."""
    owner_uid: str | None
    """Defaults to a new UID (a replacement passes its ReplicaSet's)."""
    priority: int | None
    """spec.priority, as admission resolves it from the pod's PriorityClass (None: not set)."""
    priority_class_name: str | None
    mirror: bool
    resources: Mapping[str, str | int] | None
    phase: str | None


def pod_object(*, wall_s: float, **pod: Unpack[PodArgs]) -> JsonDict:
    """A pod bound to `node_name` (Running) or unscheduled (Pending); `resources` become limits and requests."""
    namespace, name, node_name = pod["namespace"], pod["name"], pod["node_name"]
    labels, resources, owner_kind = pod.get("labels"), pod.get("resources"), pod.get("owner_kind")
    phase = pod.get("phase") or ("Running" if node_name else "Pending")
    metadata: JsonDict = {"name": name, "namespace": namespace, "labels": dict(labels or {}), "annotations": {}}
    if owner_kind is not None:
        owner_name = pod.get("owner_name") or f"{name}-owner"
        metadata["ownerReferences"] = [owner_reference(owner_kind, owner_name, pod.get("owner_uid") or new_uid())]
    if pod.get("mirror"):
        metadata["annotations"][MIRROR_POD_ANNOTATION] = new_uid().replace("-", "")
        metadata["ownerReferences"] = [owner_reference("Node", node_name or "", new_uid())]
    container: JsonDict = {"name": "main", "image": "registry.example/workload:1"}
    if resources:
        container["resources"] = {"limits": quantities(resources), "requests": quantities(resources)}
    spec: JsonDict = {
        "containers": [container],
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
    }
    if node_name:
        spec["nodeName"] = node_name
    for field, key in (("priority", "priority"), ("priority_class_name", "priorityClassName")):
        if pod.get(field) is not None:
            spec[key] = pod.get(field)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": _pod_status(phase, bound=bool(node_name), wall_s=wall_s),
    }


def running_status(wall_s: float) -> JsonDict:
    """The status a kubelet writes once a bound pod's containers run (Running, Ready)."""
    return _pod_status("Running", bound=True, wall_s=wall_s)


def _pod_status(phase: str, *, bound: bool, wall_s: float) -> JsonDict:
    now = timestamp(wall_s)
    running = phase == "Running"
    conditions = [
        {"type": "PodScheduled", "status": "True" if bound else "False", "lastTransitionTime": now},
        {"type": "Ready", "status": "True" if running else "False", "lastTransitionTime": now},
    ]
    status: JsonDict = {"phase": phase, "conditions": conditions, "qosClass": "BestEffort"}
    if bound:
        status["startTime"] = now
        status["containerStatuses"] = [
            {
                "name": "main",
                "image": "registry.example/workload:1",
                "imageID": "registry.example/workload@sha256:" + "0" * 64,
                "ready": running,
                "restartCount": 0,
                "started": running,
                "state": {"running": {"startedAt": now}} if running else {"waiting": {"reason": "ContainerCreating"}},
            }
        ]
    return status


def pdb_object(namespace: str, name: str, *, match_labels: Mapping[str, str], disruptions_allowed: int) -> JsonDict:
    """A PDB whose status the (absent) disruption controller has already observed."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"selector": {"matchLabels": dict(match_labels)}, "minAvailable": 1},
        "status": pdb_status(disruptions_allowed),
    }


def pdb_status(disruptions_allowed: int) -> JsonDict:
    healthy = 1 + max(disruptions_allowed, 0)
    return {
        "observedGeneration": 1,
        "disruptionsAllowed": disruptions_allowed,
        "currentHealthy": healthy,
        "desiredHealthy": 1,
        "expectedPods": healthy,
    }


def daemonset_object(
    namespace: str,
    name: str,
    *,
    match_labels: Mapping[str, str],
    node_selector: Mapping[str, str] | None = None,
) -> JsonDict:
    """A DaemonSet whose pod template carries `match_labels` (what `add_daemonset` expects)."""
    pod_spec: JsonDict = {"containers": [{"name": name, "image": f"registry.example/{name}:1"}]}
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {
            "selector": {"matchLabels": dict(match_labels)},
            "template": {"metadata": {"labels": dict(match_labels)}, "spec": pod_spec},
        },
        "status": daemonset_status(),
    }


def daemonset_status(scheduled: int = 1) -> JsonDict:
    return {
        "currentNumberScheduled": scheduled,
        "desiredNumberScheduled": scheduled,
        "numberMisscheduled": 0,
        "numberReady": scheduled,
        "numberAvailable": scheduled,
        "updatedNumberScheduled": scheduled,
        "observedGeneration": 1,
    }
