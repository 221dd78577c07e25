"""Everything migagent tells the cluster about its node's MIG state, written from one place.

Per attempt the agent reports the coarse state (`nvidia.com/mig.config.state`, GPU Operator
compatible), the `MigConfigReady` condition (reason + message), detail annotations under
`migagent.io/` and Events for the history. Events are best effort: failing to record one is
logged and never fails a reconcile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from migagent.catalog.model import Placement
from migagent.errors import MigAgentError
from migagent.layout.observed import Observation, ObservedGi, ObservedGpu
from migagent.layout.profile import ci_profile_name, gi_profile_name
from migagent.node.names import (
    ATTEMPT_ANNOTATION,
    CONDITION_TYPE,
    DESIRED_ANNOTATION,
    HANDED_OVER_ANNOTATION,
    LAST_ERROR_ANNOTATION,
    MIG_CONFIG_STATE_LABEL,
    NEXT_RETRY_ANNOTATION,
    OBSERVED_ANNOTATION,
    PLAN_ANNOTATION,
    ConditionReason,
    ConditionStatus,
    EventReason,
    MigConfigState,
)
from migagent.node.port import KubePort, NodeView
from migagent.planning import GpuPlan, Plan

log = structlog.get_logger(__name__)

_MAX_ERROR_ANNOTATION = 4096

_PROGRESS_EVENTS: Mapping[ConditionReason, EventReason] = {
    ConditionReason.DRAINING: EventReason.DRAINING,
    ConditionReason.WAITING_FOR_DEVICE_PLUGIN: EventReason.WAITING_FOR_DEVICE_PLUGIN,
}
_FAILURE_EVENTS: Mapping[ConditionReason, EventReason] = {
    ConditionReason.DRAIN_BLOCKED: EventReason.DRAIN_BLOCKED,
    ConditionReason.REBOOT_REQUIRED: EventReason.REBOOT_REQUIRED,
}


class StatusReporter:
    def __init__(self, api: KubePort) -> None:
        self._api = api

    def report(
        self,
        *,
        status: ConditionStatus,
        reason: ConditionReason,
        message: str,
        state: MigConfigState | None = None,
        annotations: Mapping[str, str | None] | None = None,
        event: EventReason | None = None,
        warning: bool = False,
        resource_version: str | None = None,
    ) -> None:
        """Label and annotations in one patch, then the condition, then (optionally) an Event.

        With `resource_version`, the patch is conditional: NodeChangedError (nothing written) when the
        Node is no longer at that version."""
        labels = {MIG_CONFIG_STATE_LABEL: str(state)} if state is not None else None
        if labels or annotations:
            self._api.patch_metadata(labels=labels, annotations=annotations, resource_version=resource_version)
        self._api.set_condition(CONDITION_TYPE, str(status), str(reason), message)
        if event is not None:
            self.event(event, message, warning=warning)

    def pending(self, desired: str, message: str, *, attempt: str | None = None) -> None:
        """A change starts: state pending, condition False/Reconfiguring (and the attempt marker, if given)."""
        annotations = {DESIRED_ANNOTATION: desired}
        if attempt is not None:
            annotations[ATTEMPT_ANNOTATION] = attempt
        self.report(
            state=MigConfigState.PENDING,
            status=ConditionStatus.FALSE,
            reason=ConditionReason.RECONFIGURING,
            message=message,
            annotations=annotations,
            event=EventReason.RECONFIGURING,
        )

    def progress(self, reason: ConditionReason, message: str) -> None:
        """A phase of a running change (Draining, WaitingForDevicePlugin): the condition only."""
        self.report(status=ConditionStatus.FALSE, reason=reason, message=message, event=_PROGRESS_EVENTS.get(reason))

    def succeeded(
        self,
        *,
        desired: str,
        observed: str,
        message: str,
        plan: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        """`resource_version`: write only if the Node is still at that version (the label read with it)."""
        annotations: dict[str, str | None] = {
            DESIRED_ANNOTATION: desired,
            OBSERVED_ANNOTATION: observed,
            LAST_ERROR_ANNOTATION: None,
            ATTEMPT_ANNOTATION: None,
            NEXT_RETRY_ANNOTATION: None,
            HANDED_OVER_ANNOTATION: None,
        }
        if plan is not None:
            annotations[PLAN_ANNOTATION] = plan
        self.report(
            state=MigConfigState.SUCCESS,
            status=ConditionStatus.TRUE,
            reason=ConditionReason.APPLIED,
            message=message,
            annotations=annotations,
            event=EventReason.APPLIED,
            resource_version=resource_version,
        )

    def failed(self, reason: ConditionReason, message: str, *, attempt: int, next_retry: str | None = None) -> None:
        """`next_retry`: the retry time and what it is held on (attempt.backoff), kept for a restarted agent.

        The condition and the Event carry the reason's suggested action after the message; the
        last-error annotation keeps the message alone."""
        annotations = {LAST_ERROR_ANNOTATION: message[:_MAX_ERROR_ANNOTATION], ATTEMPT_ANNOTATION: str(attempt)}
        if next_retry is not None:
            annotations[NEXT_RETRY_ANNOTATION] = next_retry
        shown = with_action(reason, message)
        event = _FAILURE_EVENTS.get(reason, EventReason.FAILED)
        try:
            self.report(
                state=MigConfigState.FAILED, status=ConditionStatus.FALSE, reason=reason, message=shown,
                annotations=annotations,
            )
        except Exception as refused:
            # The Event is the admin's other channel: tried even when every status write is refused.
            self.event(event, f"{shown} (the Node's status could not be written: {refused})", warning=True)
            raise
        self.event(event, shown, warning=True)

    def nothing_desired(self, message: str) -> None:
        """No layout is asked for: no state label, no attempt, retry or error left over; condition True."""
        leftovers = (ATTEMPT_ANNOTATION, NEXT_RETRY_ANNOTATION, LAST_ERROR_ANNOTATION, HANDED_OVER_ANNOTATION)
        cleared: dict[str, str | None] = dict.fromkeys(leftovers)
        self._api.patch_metadata(labels={MIG_CONFIG_STATE_LABEL: None}, annotations=cleared)
        self._api.set_condition(
            CONDITION_TYPE, str(ConditionStatus.TRUE), str(ConditionReason.NO_DESIRED_LAYOUT), message
        )

    def rebooting(self, message: str) -> None:
        self.report(
            state=MigConfigState.REBOOTING,
            status=ConditionStatus.FALSE,
            reason=ConditionReason.REBOOT_REQUIRED,
            message=message,
            event=EventReason.REBOOT_REQUIRED,
            warning=True,
        )

    def event(self, reason: EventReason | str, message: str, *, warning: bool = False) -> None:
        try:
            self._api.emit_event(str(reason), message, warning=warning)
        except MigAgentError as error:
            log.warning("event_not_recorded", reason=str(reason), error=str(error))


def with_action(reason: ConditionReason, message: str) -> str:
    """`message`, then the reason's one-line suggested action (when it has one)."""
    return f"{message}. Action: {reason.action}" if reason.action else message


def reports_success(node: NodeView, desired: str) -> bool:
    """True when the Node already says `success` for exactly `desired` (an idle re-check writes nothing)."""
    condition = node.condition(CONDITION_TYPE)
    return (
        node.labels.get(MIG_CONFIG_STATE_LABEL) == MigConfigState.SUCCESS
        and node.annotations.get(DESIRED_ANNOTATION) == desired
        and condition is not None
        and (condition.status, condition.reason) == (ConditionStatus.TRUE, ConditionReason.APPLIED)
    )


# --- annotation values --------------------------------------------------------------------------


def desired_annotation(layout_name: str, layout_hash: str) -> str:
    return json.dumps({"layout": layout_name, "hash": layout_hash}, sort_keys=True)


GiPods = Mapping[tuple[int, Placement], Sequence[str]]
"""Pods (`namespace/name`) holding each GI, by (GPU index, GI placement): drain_scope.gi_pods."""


def _gi_json(gpu: ObservedGpu, gi: ObservedGi, pods: GiPods) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "placement": str(gi.placement),
        "profile_id": gi.profile_id,
        "ci_profile_ids": list(gi.ci_profile_ids),
    }
    held = pods.get((gpu.index, gi.placement))
    if held:
        entry["pods"] = sorted(held)
    table = gpu.profiles
    gi_profile = table.gi_profile(gi.profile_id) if table is not None else None
    if table is not None and gi_profile is not None:
        entry["profile"] = str(gi_profile_name(gi_profile, table))
        cis = [gi_profile.ci_profile(ci.profile_id) for ci in gi.compute_instances]
        entry["compute_instances"] = [
            str(ci_profile_name(gi_profile, ci, table)) if ci is not None else f"CI profile {raw.profile_id}"
            for ci, raw in zip(cis, gi.compute_instances, strict=True)
        ]
    return entry


def observed_annotation(observation: Observation, pods: GiPods | None = None) -> str:
    """Per GPU: index, uuid, model name and PCI ids, MIG mode (and pending mode) and its GIs by profile
    name and placement, each with the pods holding it (`pods`, when known): what `migagent rollout`
    plans a pool from without reaching the node."""
    held = pods or {}
    gpus = [
        {
            "index": gpu.index,
            "uuid": gpu.uuid,
            "name": gpu.name,
            "pci_device_id": gpu.pci_device_id,
            **({"pci_subsystem_id": gpu.pci_subsystem_id} if gpu.pci_subsystem_id is not None else {}),
            "mig_capable": gpu.mig_capable,
            "mode": "enabled" if gpu.mig_current else "disabled",
            **({"pending_mode": "enabled" if gpu.mig_pending else "disabled"} if gpu.mode_change_pending else {}),
            "gpu_instances": [
                _gi_json(gpu, gi, held) for gi in sorted(gpu.gpu_instances, key=lambda g: g.placement)
            ],
        }
        for gpu in sorted(observation.gpus, key=lambda g: g.index)
    ]
    return json.dumps(gpus, separators=(",", ":"))


def _counts(gpus: Sequence[GpuPlan]) -> dict[str, int]:
    return {
        "kept": sum(len(g.keep) for g in gpus),
        "destroyed": sum(len(g.destroy) for g in gpus),
        "created": sum(len(g.create) for g in gpus),
        "mode_changes": sum(1 for g in gpus if g.mode_change is not None),
        "resets": sum(1 for g in gpus if g.reset),
    }


def plan_annotation(plan: Plan) -> str:
    """The `migagent.io/plan` annotation: a plan's counts."""
    return json.dumps(_counts(plan.gpus), sort_keys=True)


def plan_summary(plan: Plan) -> str:
    """`4 GPU(s) change: keep 8 GPU instances, destroy 20, create 8; 4 GPU(s) unchanged`."""
    changing = [g for g in plan.gpus if not g.is_unchanged]
    counts = _counts(changing)
    parts = [f"keep {counts['kept']} GPU instance(s)", f"destroy {counts['destroyed']}", f"create {counts['created']}"]
    if counts["mode_changes"]:
        parts.append(f"switch MIG mode on {counts['mode_changes']} GPU(s)")
    unchanged = len(plan.gpus) - len(changing)
    return f"{len(changing)} GPU(s) change ({', '.join(parts)}); {unchanged} GPU(s) left as they are"
