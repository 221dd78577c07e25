"""What one attempt writes about the node's MIG state: pending, success, failed, nothing to do.

The writes themselves (label, condition, annotations, Events) are attempt.report.status's; this module
composes them for the agent flow. `success` is the one conditional write: it is recorded only
while the label still names the layout applied, at the resourceVersion the label was read at, so
a label changed in between is never reported as applied.
"""

from __future__ import annotations

import structlog

from migagent.attempt.drain.gate import Target
from migagent.attempt.drain.scope import PodDevicesLister, gi_pods
from migagent.attempt.report.status import (
    StatusReporter,
    desired_annotation,
    observed_annotation,
    plan_annotation,
    plan_summary,
    reports_success,
)
from migagent.attempt.supersede import LayoutSuperseded
from migagent.attempt.undo import ApplyFailedError, AttemptMarker
from migagent.clock import Clock
from migagent.layout.observed import Observation
from migagent.node.names import (
    CONDITION_TYPE,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    OBSERVED_ANNOTATION,
    ConditionReason,
)
from migagent.node.port import KubePort, NodeChangedError, NodeView

log = structlog.get_logger(__name__)

SUCCESS_WRITE_TRIES = 5


class NodeReport:
    def __init__(
        self, api: KubePort, status: StatusReporter, *, clock: Clock, pod_resources: PodDevicesLister | None = None
    ) -> None:
        self._api = api
        self._status = status
        self._clock = clock
        self._pod_resources = pod_resources

    def observed(self, observation: Observation) -> str:
        """The observed annotation, with the pods holding each GI (what `migagent rollout` predicts
        evictions from) when the kubelet can be asked right now."""
        if self._pod_resources is None:
            return observed_annotation(observation)
        try:
            holdings = self._pod_resources.list()
        except Exception as exc:  # best effort: the layout report must not fail on it
            log.warning("pods_per_gpu_instance_unknown", error=str(exc))
            return observed_annotation(observation)
        return observed_annotation(observation, gi_pods(observation, holdings))

    def pending(self, target: Target, *, attempt: int) -> None:
        marker = AttemptMarker(attempt, target.name, self._clock.wall())
        self._status.pending(
            desired_annotation(target.name, target.layout_hash),
            f"applying layout {target.name}: {plan_summary(target.steps)}",
            attempt=marker.to_annotation(),
        )

    def already_applied(self, node: NodeView, target: Target) -> bool:
        """Report success unless the Node already says so (idle re-checks write nothing); True if it did."""
        name = target.name
        wanted = desired_annotation(name, target.layout_hash)
        observed = self.observed(target.observation)
        if reports_success(node, wanted):
            if observed != node.annotations.get(OBSERVED_ANNOTATION):
                # Pods came or went since: the annotation alone, no state change, no Event.
                self._api.patch_metadata(annotations={OBSERVED_ANNOTATION: observed})
            return True
        self._status.succeeded(desired=wanted, observed=observed, message=f"layout {name} is applied")
        return False

    def success(self, target: Target, after: Observation) -> None:
        """`success`, only while the label still names the layout, conditional on the resourceVersion read."""
        name, steps = target.name, target.steps
        for _ in range(SUCCESS_WRITE_TRIES):
            node = self._api.get_node()
            label = node.labels.get(MIG_CONFIG_LABEL)
            if label is not None and label != name:
                raise LayoutSuperseded(label)
            try:
                self._status.succeeded(
                    desired=desired_annotation(name, target.layout_hash),
                    observed=self.observed(after),
                    plan=plan_annotation(steps),
                    message=f"layout {name} applied: {plan_summary(steps)}",
                    resource_version=node.resource_version,
                )
                return
            except NodeChangedError:
                continue  # the Node moved on (a label, a kubelet update): read it again and decide afresh
        raise ApplyFailedError(f"layout {name} is applied but the node kept changing while success was recorded")

    def no_desired_layout(self, node: NodeView) -> None:
        """No label: a state left from an earlier change (`pending`, `failed`) is taken down, once."""
        condition = node.condition(CONDITION_TYPE)
        stale = MIG_CONFIG_STATE_LABEL in node.labels or (
            condition is not None and condition.reason != ConditionReason.NO_DESIRED_LAYOUT
        )
        if stale:
            self._status.nothing_desired(f"no {MIG_CONFIG_LABEL} label on the node: no layout to apply")
            log.info("stale_state_cleared", state=node.labels.get(MIG_CONFIG_STATE_LABEL))
