"""Turn `kubernetes` models into migagent's typed views (port.py), and format API timestamps."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kubernetes.utils.quantity import parse_quantity

from migagent.node.names import MIRROR_POD_ANNOTATION, is_gpu_resource
from migagent.node.port import NodeCondition, NodeView, PodRef, PodView

if TYPE_CHECKING:  # the models load with the first response of their kind (kube/core_v1.py says why)
    from kubernetes.client import V1Container, V1Node, V1NodeCondition, V1Pod


def rfc3339(wall_seconds: float) -> str:
    """A Kubernetes `Time` (second precision, UTC, `Z`), from the clock's wall time."""
    moment = datetime.datetime.fromtimestamp(wall_seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _time_text(value: datetime.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def whole_quantities(quantities: Mapping[str, str] | None) -> dict[str, int]:
    """Quantities as whole numbers (floored); values that are not quantities are left out."""
    result: dict[str, int] = {}
    for name, text in (quantities or {}).items():
        try:
            result[name] = int(parse_quantity(text))  # type: ignore[no-untyped-call]
        except (ValueError, ArithmeticError):
            continue
    return result


def _condition(model: V1NodeCondition) -> NodeCondition:
    return NodeCondition(
        type=model.type,
        status=model.status,
        reason=model.reason or "",
        message=model.message or "",
        last_transition_time=_time_text(model.last_transition_time),
    )


def node_view(model: V1Node) -> NodeView:
    meta = model.metadata
    spec = model.spec
    status = model.status
    return NodeView(
        name=(meta.name if meta else None) or "",
        uid=(meta.uid if meta else None) or "",
        resource_version=(meta.resource_version if meta else None) or "",
        labels=dict((meta.labels if meta else None) or {}),
        annotations=dict((meta.annotations if meta else None) or {}),
        unschedulable=bool(spec.unschedulable) if spec else False,
        allocatable=whole_quantities(status.allocatable if status else None),
        capacity=whole_quantities(status.capacity if status else None),
        conditions=tuple(_condition(c) for c in ((status.conditions if status else None) or ())),
    )


def _gpu_resources(containers: Iterable[V1Container]) -> frozenset[str]:
    names: set[str] = set()
    for container in containers:
        resources = container.resources
        if resources is None:
            continue
        for quantities in (resources.requests, resources.limits):
            names.update(name for name, value in (quantities or {}).items() if is_gpu_resource(name) and value != "0")
    return frozenset(names)


def pod_view(model: V1Pod) -> PodView:
    meta = model.metadata
    spec = model.spec
    annotations = (meta.annotations if meta else None) or {}
    containers = list(spec.containers) + list(spec.init_containers or ()) if spec else []
    return PodView(
        ref=PodRef(
            namespace=(meta.namespace if meta else None) or "",
            name=(meta.name if meta else None) or "",
            uid=(meta.uid if meta else None) or "",
        ),
        labels=dict((meta.labels if meta else None) or {}),
        owner_kinds=tuple(owner.kind for owner in ((meta.owner_references if meta else None) or ())),
        owner_names=tuple(owner.name for owner in ((meta.owner_references if meta else None) or ())),
        is_mirror=MIRROR_POD_ANNOTATION in annotations,
        node_name=(spec.node_name if spec else None) or "",
        phase=(model.status.phase if model.status else None) or "",
        deleting=meta is not None and meta.deletion_timestamp is not None,
        gpu_resources=_gpu_resources(containers),
        ready=_ready(model),
        empty_dir_volumes=tuple(v.name for v in ((spec.volumes if spec else None) or ()) if v.empty_dir is not None),
        deletion_deadline=_wall(meta.deletion_timestamp if meta else None),
    )


def _ready(model: V1Pod) -> bool:
    status = model.status
    conditions = (status.conditions if status else None) or ()
    ready = next((c for c in conditions if c.type == "Ready"), None)
    if ready is None:
        return bool(status and status.phase == "Running")
    return ready.status == "True"


def _wall(value: datetime.datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return value.timestamp()
