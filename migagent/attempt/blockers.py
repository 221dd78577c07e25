"""What an attempt met after its cordon and could not get past, remembered and checked before the next cordon.

Two blockers outlive an attempt and meet the next one in the same place unless someone acts:
* a pod stuck Terminating past its grace period (a finalizer, a hung container or volume): the
  drain waits for it until it times out, and evicting it again does nothing;
* a device plugin pod that stays when its deploy label is paused: its DaemonSet lacks the pause
  condition, so the wait for it to leave times out.
A failed attempt records them in its back-off hold (memory and the Node's `migagent.io/next-retry`),
and the next attempt looks for each one before it cordons: still there (the same pod, still
Terminating; a pod of the same DaemonSet revision), the change is refused up front with the remedy,
and the node is not cordoned again for nothing. Gone (the pod removed, the DaemonSet patched and
rolled), the attempt goes ahead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from migagent.attempt.drain.drainer import PodsStuckTerminatingError
from migagent.attempt.window.deviceplugin import ComponentsNotPausedError
from migagent.errors import DrainBlockedError, PermanentError
from migagent.node.port import PodView

TERMINATING = "terminating"
NOT_PAUSED = "not-paused"
REVISION_LABEL = "controller-revision-hash"
"""The DaemonSet controller's label on each pod: a patched DaemonSet rolls pods of a new revision."""
_PAUSE_PATCH = "deploy/overlays/standalone/device-plugin-affinity.json"


@dataclass(frozen=True)
class Blocker:
    kind: str
    namespace: str
    name: str
    uid: str
    daemonset: str | None = None
    revision: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: Any) -> Blocker | None:
        """None for anything that is not a blocker (an annotation edited by hand is ignored, not fatal)."""
        if not isinstance(data, dict) or data.get("kind") not in (TERMINATING, NOT_PAUSED):
            return None
        try:
            return cls(**{k: str(v) for k, v in data.items() if k in cls.__dataclass_fields__})
        except TypeError:
            return None

    def found_in(self, pods: Iterable[PodView]) -> PodView | None:
        """The pod that is this blocker, still there: the same pod still Terminating, or a pod of the
        same DaemonSet revision (the same pod when the revision is not known)."""
        for pod in pods:
            if self.kind == TERMINATING and pod.ref.uid == self.uid and pod.deleting:
                return pod
            if self.kind == NOT_PAUSED and self.daemonset in pod.owner_names and (
                pod.labels.get(REVISION_LABEL) == self.revision if self.revision else pod.ref.uid == self.uid
            ):
                return pod
        return None


class BlockerStillThereError(DrainBlockedError):
    """A blocker the last attempt met after its cordon is still there: refused before any cordon."""

    def __init__(self, message: str, *, pods: tuple[str, ...], blockers: tuple[Blocker, ...]) -> None:
        super().__init__(message, pods=pods)
        self.blockers = blockers


class PluginStillNotPausedError(PermanentError):
    """The device plugin pod that stayed when paused is still there, its DaemonSet unchanged."""

    def __init__(self, message: str, *, blockers: tuple[Blocker, ...]) -> None:
        super().__init__(message)
        self.blockers = blockers


def learned_from(error: BaseException) -> tuple[Blocker, ...]:
    """The blockers a failed attempt's error names, to be looked for before the next cordon."""
    if isinstance(error, PodsStuckTerminatingError):
        return tuple(Blocker(TERMINATING, ref.namespace, ref.name, ref.uid) for ref in error.stuck)
    if isinstance(error, ComponentsNotPausedError):
        return tuple(
            Blocker(NOT_PAUSED, pod.ref.namespace, pod.ref.name, pod.ref.uid, daemonset=owner,
                    revision=pod.labels.get(REVISION_LABEL))
            for pod in error.pods
            for owner in pod.owner_names[:1]
            if pod.is_daemonset_pod
        )
    if isinstance(error, BlockerStillThereError | PluginStillNotPausedError):
        return error.blockers
    return ()


def refuse_if_still_there(
    blockers: Sequence[Blocker], pods: Sequence[PodView], *, evicting: Sequence[PodView], pausing: bool
) -> None:
    """Raise, naming each blocker and its remedy, when one the last attempt met is still in the way of
    this change: a stuck pod this change must evict, a plugin pod its pause would wait for (`pausing`:
    the agent pauses components; with another restart strategy, say delete-pod, none is waited for)."""
    stuck = [b for b in blockers if b.kind == TERMINATING and b.found_in(evicting) is not None]
    if stuck:
        names = ", ".join(f"{b.namespace}/{b.name}" for b in stuck)
        raise BlockerStillThereError(
            f"pod(s) {names} on devices this change needs are still Terminating past their grace period, as when"
            " the last attempt's drain timed out waiting for them: their kubelet cannot finish them (a finalizer,"
            " a hung container or volume). Remove their finalizers, or `kubectl delete --grace-period=0 --force` them;"
            " nothing was cordoned, paused or evicted",
            pods=tuple(f"{b.namespace}/{b.name}" for b in stuck), blockers=tuple(stuck),
        )
    stayed = [(b, pod) for b in blockers if pausing and b.kind == NOT_PAUSED and (pod := b.found_in(pods)) is not None]
    if stayed:
        named = ", ".join(f"{pod.ref.namespace}/{pod.ref.name} (DaemonSet {b.daemonset})" for b, pod in stayed)
        raise PluginStillNotPausedError(
            f"device plugin pod(s) {named} stayed on the node when the last attempt paused them, and the DaemonSet"
            " has not changed since: it lacks the pause condition (a node selector or affinity on"
            f" nvidia.com/gpu.deploy.device-plugin; for the plugin's chart, the patch {_PAUSE_PATCH}), or run"
            " the agent with --device-plugin-restart=delete-pod; nothing was cordoned",
            blockers=tuple(b for b, _ in stayed),
        )
