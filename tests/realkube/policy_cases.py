"""The least-privilege cases: Node updates and Pod deletes by the agent, each allowed or denied.

One table serves two judges: tests/realkube sends each case to the real kube-apiserver as the agent's
service account (pod-bound token, the overlays' RBAC and admission policies applied), and
tests/integration/deploy evaluates the same cases with the fake API server's cel-python admission.
The real server is the proof; the fake one must agree with it while it exists.

A Node case edits a stored Node (`stored_node`) the way the agent's request would; the real test turns
the edit into a JSON merge patch. A Pod case names a pod (node, namespace, labels, owner) that the
agent then tries to delete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NODE = "gpu-1"
OTHER_NODE = "gpu-2"
Obj = dict[str, Any]
Edit = Callable[[Obj], None]
PAUSED = "paused-for-mig-change"


def stored_node(name: str = NODE) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/mig.config": "all-1g.10gb",
                "nvidia.com/mig.config.state": "success",
                "nvidia.com/gpu.deploy.driver": "true",
                "nvidia.com/gpu.deploy.device-plugin": "true",
                "nvidia.com/gpu.deploy.gpu-feature-discovery": PAUSED,
                "nvidia.com/gpu.deploy.dcgm": "false",
                "nvidia.com/gpu.deploy.mig-manager": "false",
                "node-role.kubernetes.io/gpu": "",
            },
            "annotations": {"migagent.io/desired": "{}", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": "10.0.1.0/24",
            "podCIDRs": ["10.0.1.0/24"],
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
            "nodeInfo": {
                "kubeletVersion": "v1.37.2",
                "machineID": "m",
                "systemUUID": "s",
                "bootID": "b",
                "kernelVersion": "6.1",
                "osImage": "Linux",
                "containerRuntimeVersion": "containerd://2.0",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def admin_cordoned(node: Obj) -> None:
    """The stored node as an admin cordoned it (no migagent mark)."""
    node["spec"]["unschedulable"] = True


def migagent_cordoned(node: Obj) -> None:
    node["spec"]["unschedulable"] = True
    node["metadata"]["annotations"]["migagent.io/cordoned-by-migagent"] = "true"


def stale_mark(node: Obj) -> None:
    """Marked as migagent's cordon, but an admin uncordoned it meanwhile."""
    node["metadata"]["annotations"]["migagent.io/cordoned-by-migagent"] = "true"


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


def deploy(component: str, value: str | None) -> Edit:
    """Set (or remove) nvidia.com/gpu.deploy.<component>."""

    def edit(node: Obj) -> None:
        name = f"nvidia.com/gpu.deploy.{component}"
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


def _unchanged(node: Obj) -> None:
    return None


@dataclass(frozen=True)
class Case:
    what: str
    edit: Edit
    allowed: bool
    subresource: str = ""
    before: Edit = field(default=_unchanged)
    """How the stored node differs from `stored_node` before the agent's request (an admin's cordon, say)."""


MIG_READY_FALSE = {"type": "MigConfigReady", "status": "False", "reason": "Applying"}
MARK = "migagent.io/cordoned-by-migagent"
CORDON_OURS = both(at("spec.unschedulable", True), annotation(MARK, "true"))
UNCORDON_OURS = both(at("spec.unschedulable", False), annotation(MARK, None))

# Changes a MIG change needs: allowed for the agent on its own Node.
ALLOWED = [
    Case(
        "state label removed from a node whose desired layout label the admin removed",
        labels(nvidia_com__mig_config_state=None), True, before=labels(nvidia_com__mig_config=None),
    ),
    Case("state label to pending", labels(nvidia_com__mig_config_state="pending"), True),
    Case("state label to rebooting", labels(nvidia_com__mig_config_state="rebooting"), True),
    Case("state label to failed", labels(nvidia_com__mig_config_state="failed"), True),
    Case("state label set where it was absent", labels(nvidia_com__mig_config_state="pending"), True,
         before=labels(nvidia_com__mig_config_state=None)),
    Case("pause the device plugin (true to paused)", deploy("device-plugin", PAUSED), True),
    Case("resume a paused component (paused to true)", deploy("gpu-feature-discovery", "true"), True),
    Case(
        "pause dcgm-exporter where it is true",
        deploy("dcgm-exporter", PAUSED),
        True,
        before=deploy("dcgm-exporter", "true"),
    ),
    Case("a false deploy label stays false", deploy("dcgm", "false"), True),
    Case("own annotation changed", annotation("migagent.io/desired", '{"layout": "all-7g"}'), True),
    Case("own annotation added", annotation("migagent.io/last-error", "drain timed out"), True),
    Case("own annotation removed", annotation("migagent.io/desired", None), True),
    Case("cordon, marking the cordon its own", CORDON_OURS, True),
    Case("uncordon its own cordon, removing the mark", UNCORDON_OURS, True, before=migagent_cordoned),
    Case("drop a stale mark from a node an admin uncordoned", annotation(MARK, None), True, before=stale_mark),
    Case("cordon a node still carrying a stale mark", CORDON_OURS, True, before=stale_mark),
    Case(
        "other annotations on a node it cordoned",
        annotation("migagent.io/attempt", "3"),
        True,
        before=migagent_cordoned,
    ),
    Case("nothing changed", _unchanged, True),
    Case("MigConfigReady condition changed", at("status.conditions.1", MIG_READY_FALSE), True, "status"),
    Case(
        "MigConfigReady condition added",
        at("status.conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}, MIG_READY_FALSE]),
        True,
        "status",
    ),
    Case(
        "state, annotation and cordon at once",
        both(labels(nvidia_com__mig_config_state="pending"), CORDON_OURS),
        True,
    ),
]

# Allowed only where the standalone overlay's marker (pause-absent-device-plugin) is granted: its plugin
# runs where the label is absent. Denied on a GPU Operator overlay, where it would add the label.
PAUSE_ABSENT_PLUGIN = Case(
    "pause an absent device-plugin label",
    deploy("device-plugin", PAUSED),
    True,
    before=deploy("device-plugin", None),
)

# Anything else: denied to the agent even on its own Node.
ESCALATIONS = [
    Case("the admin's layout label", labels(nvidia_com__mig_config="all-7g"), False),
    Case("the admin's layout label removed", labels(nvidia_com__mig_config=None), False),
    Case("a node-restriction label", labels(**{"node-restriction.kubernetes.io__trusted": "true"}), False),
    Case("a node role label removed", labels(**{"node-role.kubernetes.io__gpu": None}), False),
    Case("the hostname label", labels(kubernetes_io__hostname="gpu-9"), False),
    Case(
        "a look-alike of a pause label",
        labels(**{"evil_nvidia_com__gpu_deploy_device-plugin": "paused-for-mig-change"}),
        False,
    ),
    Case("state label set to a value outside the contract", labels(nvidia_com__mig_config_state="owned"), False),
    Case("state label removed", labels(nvidia_com__mig_config_state=None), False),
    Case("the node's mig.capable label", labels(nvidia_com__mig_capable="true"), False),
    # The GPU Operator's labels the agent never pauses, and pauses it never makes.
    Case("setting gpu.deploy.driver=false (the operator removes the driver)", deploy("driver", "false"), False),
    Case("pausing the driver label", deploy("driver", PAUSED), False),
    Case(
        "adding gpu.deploy.mig-manager=true", deploy("mig-manager", "true"), False, before=deploy("mig-manager", None)
    ),
    Case("flipping gpu.deploy.mig-manager=false to true", deploy("mig-manager", "true"), False),
    Case(
        "flipping an admin's device-plugin=false to true",
        deploy("device-plugin", "true"),
        False,
        before=deploy("device-plugin", "false"),
    ),
    Case(
        "pausing an admin's device-plugin=false",
        deploy("device-plugin", PAUSED),
        False,
        before=deploy("device-plugin", "false"),
    ),
    Case("setting an admin's false dcgm to true", deploy("dcgm", "true"), False),
    Case("setting a paused component to false", deploy("gpu-feature-discovery", "false"), False),
    Case("removing a pause label", deploy("device-plugin", None), False),
    Case("removing a paused label", deploy("gpu-feature-discovery", None), False),
    Case("adding an absent component label as true", deploy("dcgm-exporter", "true"), False),
    Case("pausing an absent label other than the device plugin's", deploy("dcgm-exporter", PAUSED), False),
    Case("a pause label set to another value", deploy("device-plugin", "yes"), False),
    Case("another gpu.deploy label (container-toolkit) added", deploy("container-toolkit", "false"), False),
    Case("another annotation changed", annotation("node.alpha.kubernetes.io/ttl", "30"), False),
    Case("another annotation added", annotation("cluster-autoscaler.kubernetes.io/scale-down-disabled", "true"), False),
    Case("another annotation removed", annotation("node.alpha.kubernetes.io/ttl", None), False),
    Case("an annotation under a look-alike prefix", annotation("migagent.io.evil/x", "1"), False),
    # Cordons: only its own.
    Case("cordon without marking it its own", at("spec.unschedulable", True), False),
    Case("lifting an admin's cordon", at("spec.unschedulable", False), False, before=admin_cordoned),
    Case("lifting an admin's cordon while adding the mark", UNCORDON_OURS, False, before=admin_cordoned),
    Case("adopting an admin's cordon (adding the mark)", annotation(MARK, "true"), False, before=admin_cordoned),
    Case("marking an uncordoned node as its cordon", annotation(MARK, "true"), False),
    Case(
        "uncordoning its own cordon but keeping the mark",
        at("spec.unschedulable", False),
        False,
        before=migagent_cordoned,
    ),
    Case("taints removed", at("spec.taints", None), False),
    Case(
        "a taint added",
        at("spec.taints", [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}]),
        False,
    ),
    Case(
        "a taint's effect changed", at("spec.taints.0", {"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}), False
    ),
    Case(
        "addresses rewritten", at("status.addresses", [{"type": "InternalIP", "address": "6.6.6.6"}]), False, "status"
    ),
    Case(
        "allocatable raised", at("status.allocatable", {"cpu": "63", "nvidia.com/mig-1g.10gb": "70"}), False, "status"
    ),
    Case("capacity changed", at("status.capacity", {"cpu": "640"}), False, "status"),
    Case("daemon endpoints changed", at("status.daemonEndpoints", {"kubeletEndpoint": {"Port": 1}}), False, "status"),
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
    Case(
        "the MigConfigReady condition removed",
        at("status.conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]),
        False,
        "status",
    ),
    Case("a finalizer added", at("metadata.finalizers", ["example.com/keep"]), False),
    Case(
        "an allowed change smuggling the admin's layout label",
        both(labels(nvidia_com__mig_config_state="pending"), labels(nvidia_com__mig_config="all-7g")),
        False,
    ),
]

# Denied by the fake's cel-python evaluation; on the real server validation refuses them first (422:
# an invalid label key; podCIDR and providerID are immutable once set) or they are not tried there
# (nodeInfo and phase belong to the kubelet's status; an owner reference the garbage collector would
# act on). Kept for the fake, where nothing else stands in the way.
FAKE_ONLY_ESCALATIONS = [
    Case("a label that merely contains the prefix", labels(**{"evil__nvidia_com__gpu_deploy_x": "1"}), False),
    Case("providerID changed", at("spec.providerID", "aws:///i-2"), False),
    Case("podCIDR changed", at("spec.podCIDR", "10.9.9.0/24"), False),
    Case("nodeInfo changed", at("status.nodeInfo", {"kubeletVersion": "v9"}), False, "status"),
    Case("phase set", at("status.phase", "Running"), False, "status"),
    Case(
        "an owner reference added",
        at("metadata.ownerReferences", [{"kind": "X", "name": "x", "uid": "1", "apiVersion": "v1"}]),
        False,
    ),
]


# --- Pod deletes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodCase:
    what: str
    namespace: str
    labels: dict[str, str]
    allowed: bool
    node: str = NODE
    owner: tuple[str, str] | None = None  # (kind, name), a controller reference
    gpu: bool = False
    """The pod requests an nvidia.com/ resource (a workload holding a GPU)."""
    needs_force_delete: bool = False
    """Allowed only where components/force-delete is installed (its grant and its marker)."""


OPERATOR = "gpu-operator"
STANDALONE = "nvidia-device-plugin"
PLUGIN_DS = ("DaemonSet", "nvidia-device-plugin-daemonset")
NVDP_DS = ("DaemonSet", "nvdp-nvidia-device-plugin")

POD_CASES = [
    PodCase("the CUDA validator on its node", OPERATOR, {"app": "nvidia-cuda-validator"}, True),
    PodCase("the plugin validator on its node", OPERATOR, {"app": "nvidia-device-plugin-validator"}, True),
    PodCase(
        "the operator validator on its node",
        OPERATOR,
        {"app": "nvidia-operator-validator"},
        True,
        owner=("DaemonSet", "nvidia-operator-validator"),
    ),
    PodCase(
        "the operator's device plugin on its node",
        OPERATOR,
        {"app": "nvidia-device-plugin-daemonset"},
        True,
        owner=PLUGIN_DS,
    ),
    PodCase(
        "the standalone plugin on its node",
        STANDALONE,
        {"app.kubernetes.io/name": "nvidia-device-plugin"},
        True,
        owner=NVDP_DS,
    ),
    PodCase(
        "a workload holding a GPU on its node (force delete)",
        "default",
        {"app": "inference"},
        True,
        owner=("ReplicaSet", "inference-1"),
        gpu=True,
        needs_force_delete=True,
    ),
    # Escalations.
    PodCase(
        "the driver pod on another node",
        OPERATOR,
        {"app": "nvidia-driver-daemonset"},
        False,
        node=OTHER_NODE,
        owner=("DaemonSet", "nvidia-driver-daemonset"),
    ),
    PodCase(
        "the driver pod on its own node",
        OPERATOR,
        {"app": "nvidia-driver-daemonset"},
        False,
        owner=("DaemonSet", "nvidia-driver-daemonset"),
    ),
    PodCase(
        "the GPU Operator's controller pod on its own node",
        OPERATOR,
        {"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"},
        False,
        owner=("ReplicaSet", "gpu-operator-5d8f"),
    ),
    PodCase(
        "the GPU Operator's controller pod on another node",
        OPERATOR,
        {"app": "gpu-operator"},
        False,
        node=OTHER_NODE,
        owner=("ReplicaSet", "gpu-operator-5d8f"),
    ),
    PodCase("a validator on another node", OPERATOR, {"app": "nvidia-cuda-validator"}, False, node=OTHER_NODE),
    PodCase(
        "the device plugin on another node",
        OPERATOR,
        {"app": "nvidia-device-plugin-daemonset"},
        False,
        node=OTHER_NODE,
        owner=PLUGIN_DS,
    ),
    PodCase(
        "a pod wearing the plugin's label, not owned by its DaemonSet",
        OPERATOR,
        {"app": "nvidia-device-plugin-daemonset"},
        False,
        owner=("ReplicaSet", "impostor"),
    ),
    PodCase(
        "GFD wearing the plugin chart's label",
        STANDALONE,
        {"app.kubernetes.io/name": "nvidia-device-plugin"},
        False,
        owner=("DaemonSet", "nvdp-nvidia-device-plugin-gpu-feature-discovery"),
    ),
    PodCase(
        "a workload holding a GPU on another node (force delete)",
        "default",
        {"app": "inference"},
        False,
        node=OTHER_NODE,
        owner=("ReplicaSet", "inference-1"),
        gpu=True,
    ),
    PodCase(
        "a workload without a GPU on its node (force delete)",
        "default",
        {"app": "web"},
        False,
        owner=("ReplicaSet", "web-1"),
    ),
    PodCase(
        "a DaemonSet pod holding a GPU on its node (force delete)",
        "default",
        {"app": "monitor"},
        False,
        owner=("DaemonSet", "monitor"),
        gpu=True,
    ),
]


def pod_object(case: PodCase, name: str, *, owner_uid: str = "00000000-0000-0000-0000-000000000001") -> Obj:
    container: Obj = {"name": "main", "image": "example.com/app:1"}
    if case.gpu:
        container["resources"] = {
            "limits": {"nvidia.com/mig-1g.10gb": "1"},
            "requests": {"nvidia.com/mig-1g.10gb": "1"},
        }
    metadata: Obj = {"name": name, "namespace": case.namespace, "labels": dict(case.labels)}
    if case.owner is not None:
        kind, owner_name = case.owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": owner_name,
                "uid": owner_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"nodeName": case.node, "containers": [container], "terminationGracePeriodSeconds": 0},
    }
