"""The change window: every way an attempt disturbs the node outside the GPUs, and how it is undone.

An attempt opens the window step by step (cordon, pause the operands, stop host GPU clients) and
closes it on the forward path (start the clients, resume the plugin, uncordon) or, on failure, by
`unwind`, which runs the inverse of what is still open, last in first out. Each rule is one method:

* `adopt`: what an interrupted attempt left on the Node (our cordon, paused deploy labels) is this
  attempt's to end, either way; so is a node handed over by an agent stopped mid-change.
* `cordon`: undo lifts only a cordon migagent made; an admin's cordon stays.
* `pause`: until the pause returns, a failure restores whatever it had paused by then; afterwards,
  exactly what it paused. Nothing paused (and nothing adopted): nothing to resume, yet.
* `gpus_may_change`: from the first NVML write on, any failure must let the device plugin
  re-enumerate, even if nothing was paused.
* `before_change` / `after_change`: host GPU clients stopped once per change (a superseded layout
  re-planned in the same attempt keeps them stopped) and started again exactly once.
* `resume_plugin` / `uncordon`: the forward path closes the window; a failed resume stays open, so
  the undo retries it.
* `abandon`: a change given up (failed, or stopped with no label left) first leaves every GPU it
  may have touched consistent (no GPU instance without compute instances), then unwinds.
* `hand_over`: an agent stopped mid-change leaves the window open on the Node for its successor
  (one cordon episode across the handover), recorded in an annotation; host GPU clients are
  started again first (the successor cannot know which were stopped).

The undo stack lives in the window, never in module state, so a later attempt cannot inherit a
stale "already restored" flag (mig-manager's package-level flags do exactly that).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import structlog

from migagent.attempt.report.status import StatusReporter
from migagent.attempt.undo import UndoStack
from migagent.attempt.window.cordon import Cordon, cordoned_by_us
from migagent.attempt.window.deviceplugin import DevicePluginRestarter, PausedComponents, paused_deploy_labels
from migagent.attempt.window.post_change import ChangeContext, PostChangeSteps
from migagent.clock import Clock
from migagent.node.names import HANDED_OVER_ANNOTATION, EventReason
from migagent.node.port import KubePort, NodeView

log = structlog.get_logger(__name__)

UNCORDON = "uncordon"
RESUME_PLUGIN = "resume-device-plugin"
START_HOST_CLIENTS = "host-gpu-clients"


class ChangeWindow:
    """One attempt's disturbances of the node; build one per attempt."""

    def __init__(
        self,
        api: KubePort,
        restarter: DevicePluginRestarter,
        status: StatusReporter,
        *,
        clock: Clock,
        post_change: PostChangeSteps | None = None,
        settle_gpus: Callable[[], object] | None = None,
    ) -> None:
        """`settle_gpus`: leave no GPU instance without compute instances (ApplyEngine.settle)."""
        self._api = api
        self._restarter = restarter
        self._status = status
        self._clock = clock
        self._post_change = post_change
        self._settle_gpus = settle_gpus
        self._cordon = Cordon(api)
        self._undo = UndoStack()
        self._paused = PausedComponents()
        self._context: ChangeContext | None = None
        self.gpus_touched = False
        """True once the GPUs may have changed: an abandoned attempt must leave them consistent."""

    @property
    def open(self) -> tuple[str, ...]:
        """What is still to undo (or to hand over), oldest first; empty: the node is undisturbed."""
        return self._undo.names

    # -- the rules, in the order an attempt meets them ------------------------------------------------

    def adopt(self, node: NodeView) -> tuple[str, ...]:
        """Take over what an interrupted (or handed-over) attempt left on the Node."""
        if cordoned_by_us(node):
            self._undo.push(UNCORDON, self._lift_cordon)
        if paused_deploy_labels(node):
            self._undo.push(RESUME_PLUGIN, self._resume_paused_labels)
        return self._undo.names

    def cordon(self, layout: str) -> None:
        if self._cordon.cordon():
            already = UNCORDON in self._undo
            self._undo.push(UNCORDON, self._lift_cordon)
            if not already:
                self._status.event(EventReason.CORDONED, f"node cordoned while layout {layout} is applied")

    def pause(self) -> None:
        """Pause the operands (the device plugin first of all) so they let go of the GPUs."""
        adopted = RESUME_PLUGIN in self._undo
        self._undo.push(RESUME_PLUGIN, self._resume_paused_labels)
        paused = self._restarter.pause()
        self._paused = paused
        if paused.restore:
            self._undo.push(RESUME_PLUGIN, lambda: self._restarter.resume(paused))
            self._status.event(EventReason.DEVICE_PLUGIN_PAUSED, f"paused {', '.join(sorted(paused.restore))}")
        elif not adopted:
            self._undo.pop(RESUME_PLUGIN)

    def pause_again(self) -> None:
        """After a supersede: pause once more if the plugin was already resumed (the GPUs change again)."""
        if RESUME_PLUGIN not in self._undo:
            self.pause()

    def gpus_may_change(self) -> None:
        self.gpus_touched = True
        if RESUME_PLUGIN not in self._undo:
            self._undo.push(RESUME_PLUGIN, lambda: self._restarter.resume(PausedComponents()))

    def before_change(self) -> None:
        """Operator validators and host GPU clients let go of the GPUs (attempt.window.post_change)."""
        steps = self._post_change
        if steps is None or (self._context is not None and START_HOST_CLIENTS in self._undo):
            return
        context = self._context = steps.before_change()
        if context.stopped_units:
            self._undo.push(START_HOST_CLIENTS, lambda: steps.restart_host_clients(context))

    def after_change(self) -> None:
        """CDI spec, host GPU clients, validator restart: what the operator needs to see the new devices."""
        if self._post_change is not None:
            self._post_change.after_change(self._context or ChangeContext())
            self._undo.pop(START_HOST_CLIENTS)

    def resume_plugin(self) -> None:
        self._restarter.resume(self._paused)
        self._undo.pop(RESUME_PLUGIN)
        self._status.event(EventReason.DEVICE_PLUGIN_RESTARTED, "device plugin restarted to re-enumerate MIG devices")

    def uncordon(self) -> None:
        if UNCORDON in self._undo:
            self._lift_cordon()
            self._undo.pop(UNCORDON)

    # -- closing ----------------------------------------------------------------------------------

    def unwind(self) -> tuple[str, ...]:
        """Undo everything still open, newest first, past failures; returns what failed and why."""
        return self._undo.unwind()

    def abandon(self) -> tuple[str, ...]:
        """The change is given up: GPUs it may have touched made consistent first, then `unwind`."""
        failures: list[str] = []
        if self.gpus_touched and self._settle_gpus is not None:
            try:
                self._settle_gpus()
            except Exception as exc:  # the undo still runs: the next attempt plans from what is there
                log.error("gpus_not_settled", error=str(exc))
                failures.append(f"settle GPUs: {exc}")
        return (*failures, *self.unwind())

    def hand_over(self, *, layout: str, attempt: int) -> tuple[str, ...]:
        """Leave the window open for the next agent and say so on the Node; returns what stays open."""
        if START_HOST_CLIENTS in self._undo:  # the successor cannot know which units were stopped
            self._undo.run(START_HOST_CLIENTS)
        held = self._undo.names
        if held:
            note = {"layout": layout, "attempt": attempt, "at": self._clock.wall(), "open": list(held)}
            self._api.patch_metadata(annotations={HANDED_OVER_ANNOTATION: json.dumps(note, sort_keys=True)})
            log.info("change_handed_over", layout=layout, open=list(held))
        return held

    def _lift_cordon(self) -> None:
        if self._cordon.uncordon():
            self._status.event(EventReason.UNCORDONED, "node uncordoned: migagent's change window is over")

    def _resume_paused_labels(self) -> None:
        """Put every `paused-for-mig-change` deploy label on the Node back to `true` (a `false` stays)."""
        paused = paused_deploy_labels(self._api.get_node())
        if paused:
            self._restarter.resume(PausedComponents(restore=paused))
