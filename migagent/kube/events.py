"""Events about our Node (core/v1, namespace `default`), the history `kubectl describe node` shows."""

from __future__ import annotations

import datetime
import itertools
import uuid

from kubernetes.client import CoreV1Event, V1EventSource, V1ObjectMeta, V1ObjectReference

from migagent.clock import Clock
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.core_v1 import CoreV1Calls
from migagent.kube.timeouts import RequestTimeout
from migagent.node.names import EVENT_COMPONENT, EVENT_NAMESPACE

_MAX_MESSAGE = 1024  # the API server's limit on an event note


class EventOps:
    def __init__(self, core: CoreV1Calls, *, node_name: str, clock: Clock, timeout: RequestTimeout) -> None:
        self._core = core
        self._timeout = timeout
        self._node_name = node_name
        self._clock = clock
        self._serial = itertools.count(1)
        self._instance = uuid.uuid4().hex[:8]

    def emit(self, reason: str, message: str, *, warning: bool, node_uid: str) -> None:
        now = datetime.datetime.fromtimestamp(int(self._clock.wall()), tz=datetime.UTC)
        event = CoreV1Event(
            api_version="v1",
            kind="Event",
            # Unique per agent process and event, like the `<object>.<hex>` names recorders use.
            metadata=V1ObjectMeta(
                name=f"{self._node_name}.{self._instance}{next(self._serial):06x}", namespace=EVENT_NAMESPACE
            ),
            involved_object=V1ObjectReference(api_version="v1", kind="Node", name=self._node_name, uid=node_uid),
            reason=reason,
            message=message[:_MAX_MESSAGE],
            type="Warning" if warning else "Normal",
            source=V1EventSource(component=EVENT_COMPONENT, host=self._node_name),
            reporting_component=EVENT_COMPONENT,
            reporting_instance=self._node_name,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        call = f"record event {reason} on node {self._node_name}"

        def send() -> None:
            with classified(call):
                self._core.create_namespaced_event(EVENT_NAMESPACE, event, _request_timeout=self._timeout.request)

        call_with_retries(call, send, clock=self._clock, budget_s=self._timeout.call_budget)
