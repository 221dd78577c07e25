"""The GPU Operator's operands besides the device plugin, as pods on a simulated node.

On a GPU Operator node, GPU Feature Discovery, DCGM and the DCGM exporter are DaemonSets whose
nodeSelector is their `nvidia.com/gpu.deploy.<component>: "true"` label: a pod of each runs on the
node while that label is "true", and the DaemonSet controller deletes it when the label is anything
else (NVIDIA's mig-manager and migagent set `paused-for-mig-change` while the GPUs change) and
creates a new one when the label is "true" again. The operator validator is a DaemonSet as well (both
managers delete its pod after a change so the validations run again; it comes back), and the CUDA and
device-plugin validators are pods it ran to completion (both managers delete them before a change).
The device plugin itself is `kubelet_plugin.FakeDevicePlugin`, which also publishes the advertisement.

Not modelled: the operands' own NVML handles (DCGM holds the GPUs open on a real node, which blocks a
GPU reset; the scenarios here change Hopper GPUs, whose MIG changes need none).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from migagent_sim.apiserver.errors import ApiError
from migagent_sim.cluster_api import ClusterApi
from migagent_sim.kubelet_plugin import random_suffix

JsonDict = dict[str, Any]
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."


@dataclass(frozen=True)
class Operand:
    component: str
    """The `nvidia.com/gpu.deploy.<component>` label its DaemonSet selects on."""
    app: str
    """Its pods' `app` label (the selector both managers wait on) and its DaemonSet's name."""


OPERANDS = (
    Operand("gpu-feature-discovery", "gpu-feature-discovery"),
    Operand("dcgm-exporter", "nvidia-dcgm-exporter"),
    Operand("dcgm", "nvidia-dcgm"),
    Operand("operator-validator", "nvidia-operator-validator"),
)
COMPLETED_VALIDATORS = ("nvidia-cuda-validator", "nvidia-device-plugin-validator")
"""Pods the operator validator ran to completion; not recreated when deleted."""


class OperandPods:
    """Keeps one pod per operand on the node while its deploy label is "true" (a DaemonSet controller)."""

    def __init__(
        self,
        api: ClusterApi,
        *,
        node_name: str,
        namespace: str = "gpu-operator",
        operands: tuple[Operand, ...] = OPERANDS,
    ) -> None:
        self._api = api
        self._node = node_name
        self._namespace = namespace
        self._operands = {operand.app: operand for operand in operands}
        self._pods: dict[str, JsonDict] = {}
        self._lock = threading.RLock()
        self._running = False

    def start(self) -> None:
        """Listen to the node and its pods (once), run what the labels allow, and the completed validators."""
        with self._lock:
            self._running = True
            self._api.on_node_changed(self._node_changed)
            self._api.on_pod_deleted(self._pod_deleted)
            for app in COMPLETED_VALIDATORS:
                self._create(app, owned=False, phase="Succeeded")
            self._node_changed(self._api.node(self._node))

    def stop(self) -> None:
        with self._lock:
            self._running = False

    def running(self) -> dict[str, str]:
        """app -> pod name, for the operands that have a pod on the node now."""
        with self._lock:
            return {app: pod["metadata"]["name"] for app, pod in self._pods.items()}

    def _node_changed(self, node: JsonDict) -> None:
        if node["metadata"]["name"] != self._node:
            return
        with self._lock:
            if not self._running:
                return
            labels = node["metadata"].get("labels") or {}
            for app, operand in self._operands.items():
                wanted = labels.get(DEPLOY_PREFIX + operand.component) == "true"
                if wanted and app not in self._pods:
                    self._pods[app] = self._create(app)
                elif not wanted and app in self._pods:
                    self._delete(self._pods.pop(app))

    def _pod_deleted(self, pod: JsonDict) -> None:
        """Someone deleted an operand's pod (a validator restart): its DaemonSet makes a new one."""
        metadata = pod["metadata"]
        with self._lock:
            app = (metadata.get("labels") or {}).get("app", "")
            ours = self._pods.get(app)
            if not self._running or ours is None or ours["metadata"]["uid"] != metadata.get("uid"):
                return
            del self._pods[app]
            self._node_changed(self._api.node(self._node))

    def _create(self, app: str, *, owned: bool = True, phase: str | None = None) -> JsonDict:
        """A pod of `app` on the node (owned: by its DaemonSet, named `app`), Running unless `phase` says."""
        return self._api.create_pod(
            node_name=self._node,
            namespace=self._namespace,
            name=f"{app}-{random_suffix()}",
            labels={"app": app},
            owner_kind="DaemonSet" if owned else None,
            owner_name=app if owned else None,
            phase=phase,
        )

    def _delete(self, pod: JsonDict) -> None:
        metadata = pod["metadata"]
        try:
            self._api.delete_pod(metadata["namespace"], metadata["name"])
        except ApiError as error:
            if error.code != 404:
                raise
