"""Event creation for core/v1 and events.k8s.io/v1 with the apiserver's create-time validation.

Rules (pkg/apis/core/validation/events.go, docs/kubernetes.md §4): an event with eventTime (always for events.k8s.io)
needs reportingController (a qualified name), reportingInstance, action and reason (each <= 128); a note or
message <= 1024; an event about a cluster-scoped object lives in `default` (or `kube-system` when it has an
eventTime). events.k8s.io also demands type Normal/Warning and no deprecated* fields.
"""

from __future__ import annotations

import re
from typing import Any

from migagent_sim.apiserver.errors import invalid
from migagent_sim.apiserver.routing import CORE_EVENTS, ResourceType
from migagent_sim.apiserver.store import Store
from migagent_sim.apiserver.validation import check_namespace, metadata_problems, require_object

JsonDict = dict[str, Any]
_MAX_SHORT = 128
_MAX_NOTE = 1024
_QUALIFIED_NAME = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)
_DEPRECATED_V1_FIELDS = ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount", "deprecatedSource")


def create_event(store: Store, resource: ResourceType, namespace: str, body: Any) -> JsonDict:
    event = require_object(body, "Event")
    check_namespace(event, namespace)
    event.setdefault("metadata", {})["namespace"] = namespace
    event.setdefault("apiVersion", resource.api_version)
    event.setdefault("kind", "Event")
    problems = metadata_problems(event)
    problems += _core_problems(event, namespace) if resource == CORE_EVENTS else _events_v1_problems(event, namespace)
    if problems:
        name = event["metadata"].get("name") or event["metadata"].get("generateName", "")
        raise invalid("Event", name, problems, plural=resource.plural, group=resource.group)
    return store.create(resource, event)


def _core_problems(event: JsonDict, namespace: str) -> list[str]:
    involved = event.get("involvedObject") or {}
    problems = []
    if not involved.get("namespace"):
        allowed = ("default", "kube-system") if event.get("eventTime") else ("default",)
        if namespace not in allowed:
            problems.append(
                f"involvedObject.namespace: Invalid value: '': does not match event.namespace {namespace!r}"
            )
    elif involved["namespace"] != namespace:
        problems.append(
            f"involvedObject.namespace: Invalid value: {involved['namespace']!r}: does not match event.namespace"
        )
    if event.get("eventTime"):
        problems += _reporting_problems(event, controller_field="reportingComponent", note_field="message")
    return problems


def _events_v1_problems(event: JsonDict, namespace: str) -> list[str]:
    problems = []
    regarding = event.get("regarding") or {}
    if not regarding.get("namespace") and namespace not in ("default", "kube-system"):
        problems.append(f"regarding.namespace: Invalid value: '': does not match event.namespace {namespace!r}")
    if not event.get("eventTime"):
        problems.append("eventTime: Required value")
    if event.get("type") not in ("Normal", "Warning"):
        problems.append(f'type: Unsupported value: {event.get("type")!r}: supported values: "Normal", "Warning"')
    problems += [f"{field}: Invalid value: must not be set" for field in _DEPRECATED_V1_FIELDS if event.get(field)]
    problems += _reporting_problems(event, controller_field="reportingController", note_field="note")
    return problems


def _reporting_problems(event: JsonDict, *, controller_field: str, note_field: str) -> list[str]:
    problems = []
    controller = event.get(controller_field) or ""
    if not controller:
        problems.append(f"{controller_field}: Required value")
    elif not _QUALIFIED_NAME.fullmatch(controller):
        problems.append(
            f"{controller_field}: Invalid value: {controller!r}: must be a qualified name like example.com/agent"
        )
    for field in ("reportingInstance", "action", "reason"):
        value = event.get(field) or ""
        if not value:
            problems.append(f"{field}: Required value")
        elif len(value) > _MAX_SHORT:
            problems.append(f"{field}: Too long: must have at most {_MAX_SHORT} bytes")
    if len(event.get(note_field) or "") > _MAX_NOTE:
        problems.append(f"{note_field}: Too long: must have at most {_MAX_NOTE} bytes")
    return problems
