"""Make the NVIDIA device plugin let go of the GPUs during a change and re-advertise after it.

The plugin never re-enumerates MIG devices by itself (docs/device-plugin.md §2), so after an
apply it must restart. Strategies:
- `GpuOperatorPause`: the GPU Operator / k8s-mig-manager way (docs/mig-parted.md §7):
  set each present `nvidia.com/gpu.deploy.<component>` label to `paused-for-mig-change`
  (a `false` stays `false`), wait until the components' pods have left the node, and afterwards
  put back exactly what was changed, which makes the operator recreate them.
- `GpuOperatorPause(pause_absent=True)`, the `node-label` mode: the same label on a standalone
  plugin whose DaemonSet is patched to avoid nodes where it is `false` or `paused-for-mig-change`
  (deploy/overlays/standalone), so the plugin is off the GPUs while they change, not only after.
- `DeletePod`: delete the plugin pod on this node and wait for its DaemonSet to replace it.
- `NoRestart`: someone else restarts the plugin.
The wait for the plugin to advertise what the GPUs hold afterwards is attempt.advertise.wait's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from migagent.clock import Clock
from migagent.errors import TransientError
from migagent.node.names import (
    COMPONENT_POD_SELECTORS,
    DEFAULT_OPERATOR_NAMESPACE,
    DEPLOY_FALSE,
    DEPLOY_LABEL_PREFIX,
    DEPLOY_TRUE,
    DEVICE_PLUGIN_SELECTOR,
    GPU_OPERATOR_COMPONENTS,
    PAUSED_FOR_MIG_CHANGE,
    deploy_label,
)
from migagent.node.port import KubePort, NodeView, PodView
from migagent.node.selectors import parse_equality
from migagent.retrying import poll_until

log = structlog.get_logger(__name__)


FIRST_POLL_S = 0.05
"""The first pause of a wait for pods to leave or come back; doubled each time up to the poll interval."""


class ComponentsNotPausedError(TransientError):
    """Pods of paused components stayed on the node: their DaemonSet may lack the pause condition.
    `pods`: those pods as seen last, for the next attempt to look for before it cordons (attempt.blockers)."""

    def __init__(self, message: str, *, pods: tuple[PodView, ...]) -> None:
        super().__init__(message)
        self.pods = pods


@dataclass(frozen=True)
class PausedComponents:
    """What a pause changed: deploy label -> the value `resume` puts back. Empty when nothing changed."""

    restore: Mapping[str, str] = field(default_factory=dict, hash=False)


class DevicePluginRestarter(Protocol):
    pauses: bool
    """Whether `pause` waits for components to leave the node (a blocker there is looked for before a cordon)."""

    def pause(self) -> PausedComponents:
        """Before the apply: stop what holds GPU handles. Returns what to hand to `resume`."""
        ...

    def resume(self, paused: PausedComponents) -> None:
        """After the apply, and on every failure path: restore and make the plugin re-enumerate."""
        ...


def paused_deploy_labels(node: NodeView) -> dict[str, str]:
    """Deploy labels now `paused-for-mig-change` on the Node, each mapped to `true` (what resumes it)."""
    return {
        label: DEPLOY_TRUE
        for label, value in node.labels.items()
        if label.startswith(DEPLOY_LABEL_PREFIX) and value == PAUSED_FOR_MIG_CHANGE
    }


class NoRestart:
    pauses = False

    def pause(self) -> PausedComponents:
        return PausedComponents()

    def resume(self, paused: PausedComponents) -> None:
        return None


class AlsoRestart:
    """A restarter, then the DRA driver's kubelet plugin (`also`, a DeletePod) after every resume."""

    def __init__(self, first: DevicePluginRestarter, also: DevicePluginRestarter) -> None:
        self._first = first
        self._also = also
        self.pauses = first.pauses

    def pause(self) -> PausedComponents:
        return self._first.pause()

    def resume(self, paused: PausedComponents) -> None:
        self._first.resume(paused)
        self._also.resume(PausedComponents())


class GpuOperatorPause:
    pauses = True

    def __init__(
        self,
        api: KubePort,
        *,
        clock: Clock,
        components: Sequence[str] = GPU_OPERATOR_COMPONENTS,
        namespace: str = DEFAULT_OPERATOR_NAMESPACE,
        timeout_s: float = 300.0,
        poll_interval_s: float = 1.0,
        pod_selectors: Mapping[str, str] = COMPONENT_POD_SELECTORS,
        pause_absent: bool = False,
        owner_name: str | None = None,
    ) -> None:
        """`pause_absent`: also pause a component whose label is absent (a standalone plugin whose
        DaemonSet was patched to stay off nodes where the label is `false` or paused); its label is
        left `true` afterwards. `owner_name`: only pods of the DaemonSet of that name count."""
        self._api = api
        self._clock = clock
        self._components = tuple(components)
        self._pod_selectors = pod_selectors
        self._pause_absent = pause_absent
        self._owner_name = owner_name
        self._namespace = namespace
        self._timeout_s = timeout_s
        self._poll_interval_s = poll_interval_s

    def pause(self) -> PausedComponents:
        labels = self._api.get_node().labels
        restore: dict[str, str] = {}
        selectors: list[str] = []
        for component in self._components:
            label = deploy_label(component)
            value = labels.get(label) or (DEPLOY_TRUE if self._pause_absent else None)
            if not value or value == DEPLOY_FALSE:
                continue  # absent labels are not added; `false` stays `false`
            # A label left paused by an interrupted change goes back to `true`, not to "paused".
            restore[label] = DEPLOY_TRUE if value == PAUSED_FOR_MIG_CHANGE else value
            if component in self._pod_selectors:
                selectors.append(self._pod_selectors[component])
        paused = PausedComponents(restore=restore)
        changes = {label: PAUSED_FOR_MIG_CHANGE for label in restore if labels.get(label) != PAUSED_FOR_MIG_CHANGE}
        if changes:
            self._api.patch_metadata(labels=changes)
            log.info("gpu_operator_paused", labels=sorted(changes))
        try:
            self._wait_for_pods_to_leave(selectors)
        except BaseException:
            self.resume(paused)
            raise
        return paused

    def resume(self, paused: PausedComponents) -> None:
        labels = self._api.get_node().labels
        # Only labels still paused: one an admin set meanwhile (say to `false`) is theirs.
        changes = {
            label: value for label, value in paused.restore.items() if labels.get(label) == PAUSED_FOR_MIG_CHANGE
        }
        if changes:
            self._api.patch_metadata(labels=changes)
            log.info("gpu_operator_resumed", labels=sorted(changes))

    def _wait_for_pods_to_leave(self, selectors: Sequence[str]) -> None:
        def left() -> bool | None:
            return True if not self._remaining(selectors) else None

        _, in_time = poll_until(
            left,
            clock=self._clock,
            timeout_s=self._timeout_s,
            interval_s=self._poll_interval_s,
            first_interval_s=FIRST_POLL_S,
        )
        if not in_time:
            remaining = self._remaining(selectors)
            names = ", ".join(str(pod.ref) for pod in remaining)
            raise ComponentsNotPausedError(
                f"GPU Operator components did not leave the node within {self._timeout_s:g}s after pausing"
                f" (namespace {self._namespace}): {names}; a DaemonSet without the pause condition (a node selector"
                " or affinity on its nvidia.com/gpu.deploy.* label) keeps its pod there",
                pods=tuple(remaining),
            )

    def _remaining(self, selectors: Sequence[str]) -> list[PodView]:
        """The components' pods still on the node: one list of the namespace's pods on the node for
        every equality-based selector, one list per other selector."""
        if not selectors:
            return []
        matchers = [parse_equality(selector) for selector in selectors]
        pods: list[PodView] = []
        if any(m is not None for m in matchers):
            listed = self._api.list_pods_on_node(namespace=self._namespace)
            pods += [p for p in listed if any(m is not None and m(p.labels) for m in matchers)]
        for selector, matcher in zip(selectors, matchers, strict=True):
            if matcher is None:
                pods += self._api.list_pods_on_node(label_selector=selector, namespace=self._namespace)
        return [pod for pod in pods if self._owner_name is None or self._owner_name in pod.owner_names]


class DeletePod:
    pauses = False

    def __init__(
        self,
        api: KubePort,
        *,
        clock: Clock,
        namespace: str = DEFAULT_OPERATOR_NAMESPACE,
        label_selector: str = DEVICE_PLUGIN_SELECTOR,
        timeout_s: float = 120.0,
        poll_interval_s: float = 1.0,
        owner_name: str | None = None,
    ) -> None:
        self._api = api
        self._clock = clock
        self._namespace = namespace
        self._selector = label_selector
        self._owner_name = owner_name
        self._timeout_s = timeout_s
        self._poll_interval_s = poll_interval_s

    def pause(self) -> PausedComponents:
        return PausedComponents()

    def resume(self, paused: PausedComponents) -> None:
        """Delete the plugin pod(s) on this node; wait until a replacement (another UID) exists."""
        old = self._plugin_pods()
        for pod in old:
            self._api.delete_pod(pod.ref)
        old_uids = {pod.ref.uid for pod in old}

        def replacement() -> PodView | None:
            return next((p for p in self._plugin_pods() if p.ref.uid not in old_uids and not p.deleting), None)

        new_pod, in_time = poll_until(
            replacement,
            clock=self._clock,
            timeout_s=self._timeout_s,
            interval_s=self._poll_interval_s,
            first_interval_s=FIRST_POLL_S,
        )
        if not in_time or new_pod is None:
            raise TransientError(
                f"no device plugin pod ({self._selector} in namespace {self._namespace}) came back on the node"
                f" within {self._timeout_s:g}s after deleting {', '.join(str(p.ref) for p in old) or 'none'}"
            )
        log.info("device_plugin_restarted", deleted=[str(p.ref) for p in old], replacement=str(new_pod.ref))

    def _plugin_pods(self) -> list[PodView]:
        pods = self._api.list_pods_on_node(label_selector=self._selector, namespace=self._namespace)
        return [p for p in pods if self._owner_name is None or self._owner_name in p.owner_names]
