"""The device plugin as the fake kubelet sees it: its pod, and the container that runs in it.

- "gpu-operator" mode: the plugin pod exists iff the node label `nvidia.com/gpu.deploy.device-plugin`
  is "true" (the operator's DaemonSet nodeSelector); any other value removes it.
- "daemonset" mode: a deleted plugin pod is recreated at once with a new name and UID.
- "absent": no device plugin on the node at all (a node served by the DRA driver only).
- "node-label" mode: a standalone plugin DaemonSet patched with a node affinity on that label: the
  pod runs unless the label is "false" or "paused-for-mig-change" (absent runs), and is recreated
  when deleted.

What runs in the pod is a `PluginContainer`: the simulated plugin (kubelet_plugin_sim, the fast
suite) or NVIDIA's own binaries (nvidia_plugin). Either registers with the kubelet's device manager
over the real device plugin API, which turns what it lists into the Node's status (kubelet_status).
A change of the node label `nvidia.com/device-plugin.config` while the pod runs is the container's
to act on (NVIDIA's config-manager sidecar restarts the plugin in place with SIGHUP: same pod); a
container that exits makes the pod crash-loop.
"""

from __future__ import annotations

import logging
import random
import string
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from migagent_sim.apiserver.errors import ApiError
from migagent_sim.cluster_api import ClusterApi

PluginMode = Literal["gpu-operator", "daemonset", "node-label", "absent"]
PLUGIN_MODES: tuple[PluginMode, ...] = ("gpu-operator", "daemonset", "node-label", "absent")
# What a DaemonSet patched as deploy/overlays/standalone says keeps it off a node (node affinity NotIn).
NODE_LABEL_OFF = ("false", "paused-for-mig-change")
DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
PLUGIN_POD_PREFIX = "nvidia-device-plugin-daemonset-"
JsonDict = dict[str, Any]
_LOG = logging.getLogger(__name__)


class PluginContainer(Protocol):
    """The device plugin process(es) of one pod, as the pod's lifecycle drives them."""

    @property
    def error(self) -> str | None:
        """Why the plugin exited on the current node, or None."""
        ...

    @property
    def config_restarts(self) -> int:
        """How often the config manager restarted the plugin in place (label changes)."""
        ...

    def start(self, selected: str | None) -> None:
        """The pod started; `selected`: the node's config label (None when absent)."""
        ...

    def config_selected(self, selected: str | None) -> None:
        """The node's config label changed while the pod runs."""
        ...

    def kubelet_restarted(self) -> None:
        """kubelet.sock was created again (the kubelet restarted)."""
        ...

    def stop(self) -> None:
        """The pod is gone: the plugin stops and the kubelet shows its devices unhealthy."""
        ...

    def shut_down(self) -> None:
        """The node goes away with its kubelet: stop without touching the Node."""
        ...

    def join(self) -> None:
        """Wait for background work to end (called without the kubelet's lock)."""
        ...


ContainerFactory = Callable[[Callable[[str], None]], PluginContainer]
"""Makes the pod's container, given what to call when the plugin exits (with its message)."""


class FakeDevicePlugin:
    """Keeps the plugin pod in step with the mode and the node's labels; its container does the rest.

    Every method runs under the kubelet's lock (`lock`).
    """

    def __init__(
        self,
        api: ClusterApi,
        *,
        node_name: str,
        namespace: str,
        labels: Mapping[str, str],
        mode: PluginMode,
        lock: threading.RLock,
        container: ContainerFactory,
        daemonset: str = "nvidia-device-plugin-daemonset",
    ) -> None:
        if mode not in PLUGIN_MODES:
            raise ValueError(f"plugin_mode {mode!r} is not valid; valid modes: {', '.join(PLUGIN_MODES)}")
        self._api = api
        self._node = node_name
        self._namespace = namespace
        self._labels = dict(labels)
        self._mode = mode
        self._daemonset = daemonset
        self._lock = lock
        self.container = container(self._exited)
        self.pod: JsonDict | None = None
        self._selected: str | None = None

    # --- pod lifecycle ---------------------------------------------------------------------------

    def adopt_or_sync(self, node: JsonDict) -> None:
        """At kubelet start: take over a plugin pod already on the node, else behave as on any node change."""
        self._selected = node["metadata"].get("labels", {}).get(CONFIG_LABEL)
        for pod in self._api.pods(self._node):
            if pod["metadata"].get("namespace") == self._namespace and self._is_plugin_labelled(pod):
                self.pod = pod
                self.container.start(self._selected)
                break
        self.node_changed(node)

    def node_changed(self, node: JsonDict) -> None:
        selected = node["metadata"].get("labels", {}).get(CONFIG_LABEL)
        if selected != self._selected:
            self._selected = selected
            if self.pod is not None:
                self.container.config_selected(selected)
        wanted = self._should_run(node)
        if wanted and self.pod is None:
            self._create_pod()
        elif not wanted and self.pod is not None:
            pod, self.pod = self.pod, None
            self.container.stop()
            self._delete(pod)

    def pod_deleted(self, pod: JsonDict) -> bool:
        """True when `pod` was the plugin pod (then recreated where its controller would)."""
        if self.pod is None or pod["metadata"].get("uid") != self.pod["metadata"].get("uid"):
            return False
        self.pod = None
        self.container.stop()
        # The node write in stop() re-enters node_changed, which may already have recreated the pod.
        if self.pod is None and self._should_run(self._api.node(self._node)):
            self._create_pod()
        return True

    def kubelet_restarted(self) -> None:
        if self.pod is not None:
            self.container.kubelet_restarted()

    def _exited(self, message: str) -> None:
        """The plugin exited: the pod stays, not ready, its container waiting in CrashLoopBackOff."""
        with self._lock:
            if self.pod is None:
                return
            metadata = self.pod["metadata"]
            try:
                self.pod = self._api.update_pod(metadata["namespace"], metadata["name"], _crash_looping(message))
            except (ApiError, KeyError):
                _LOG.info("the plugin pod %s went away as its plugin exited", metadata["name"])

    def _should_run(self, node: JsonDict) -> bool:
        if self._mode == "absent":  # no device plugin on the node (the DRA driver serves it)
            return False
        if self._mode == "daemonset":
            return True
        if self._mode == "node-label":
            return node["metadata"].get("labels", {}).get(DEPLOY_LABEL) not in NODE_LABEL_OFF
        return bool(node["metadata"].get("labels", {}).get(DEPLOY_LABEL) == "true")

    def _is_plugin_labelled(self, pod: JsonDict) -> bool:
        labels = pod["metadata"].get("labels") or {}
        return all(labels.get(key) == value for key, value in self._labels.items())

    def _create_pod(self) -> None:
        pod = self._api.create_pod(
            node_name=self._node,
            namespace=self._namespace,
            name=PLUGIN_POD_PREFIX + random_suffix(),
            labels=self._labels,
            owner_kind="DaemonSet",
            owner_name=self._daemonset,
        )
        self.pod = pod
        self.container.start(self._selected)

    def _delete(self, pod: JsonDict) -> None:
        metadata = pod["metadata"]
        try:
            self._api.delete_pod(metadata["namespace"], metadata["name"])
        except ApiError as exc:
            if exc.code != 404:
                raise
            # someone else deleted it first; pod_deleted no longer matches it, so nothing else to do


def random_suffix() -> str:
    """Five characters, as a controller's generated pod name ends."""
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def _crash_looping(message: str) -> Callable[[JsonDict], None]:
    """What the pod looks like while its plugin keeps exiting: not ready, waiting in CrashLoopBackOff."""

    def mark(pod: JsonDict) -> None:
        status = pod.setdefault("status", {})
        for condition in status.get("conditions", []):
            if condition.get("type") in ("Ready", "ContainersReady"):
                condition["status"] = "False"
        for container in status.get("containerStatuses", []):
            container.update(ready=False, started=False, restartCount=int(container.get("restartCount", 0)) + 1)
            container["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}

    return mark
