"""Cluster I/O of `migagent advise` and the autopilot: the rollout's (RolloutApi), plus every GPU pod
with what the scheduler filters it by, the nodes' taints, the autopilot's object and its Events.

Least privilege (deploy/components/autopilot): the rollout controller's grants, plus `list` on pods in
all namespaces (the pending ones are nowhere in particular), `create` on events (in `default` for
Nodes, in its own namespace for its object), and create/get/list/update on ConfigMaps of its own
namespace (its object and the rollouts it starts).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from kubernetes.client import (
    ApiClient,
    CoreV1Event,
    V1ConfigMap,
    V1Container,
    V1EventSource,
    V1NodeSelectorTerm,
    V1ObjectMeta,
    V1ObjectReference,
    V1Pod,
)
from kubernetes.client.exceptions import ApiException
from kubernetes.informer import ADDED, DELETED, ERROR, MODIFIED, SharedInformer

from migagent.clock import Clock
from migagent.errors import TransientError
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.convert import node_view, whole_quantities
from migagent.kube.pdbs import pdb_view
from migagent.kube.rollout_api import RolloutApi, StoredState
from migagent.node.budgets import PdbView
from migagent.node.names import (
    AUTOPILOT_NAMESPACE,
    EVENT_COMPONENT,
    EVENT_NAMESPACE,
    MIRROR_POD_ANNOTATION,
)
from migagent.node.port import PodRef
from migagent.node.scheduling import (
    DemandNode,
    DemandPod,
    NodeSelectorTerm,
    Requirement,
    Taint,
    Toleration,
    gpu_requests,
)

AUTOPILOT_OBJECT = "migagent-autopilot"
_TIMEOUT_S = (5.0, 30.0)
_WATCH_S = 300
"""How long each watch request stays open (the agent's too): then the next one resumes where it ended."""
T = TypeVar("T")
_INFORMER: Callable[..., Any] = SharedInformer  # the client's own informer (untyped)
_HTTP_NOT_FOUND = 404
_MAX_MESSAGE = 1024


def _container_requests(container: V1Container) -> dict[str, int]:
    """Requests, with limits standing for requests where only limits are set (the API's defaulting)."""
    resources = container.resources
    if resources is None:
        return {}
    return {**whole_quantities(resources.limits), **whole_quantities(resources.requests)}


def _terms(terms: Sequence[V1NodeSelectorTerm]) -> tuple[NodeSelectorTerm, ...]:
    return tuple(
        NodeSelectorTerm(
            expressions=tuple(Requirement(r.key, r.operator, tuple(r.values or ())) for r in t.match_expressions or ()),
            fields=tuple(Requirement(r.key, r.operator, tuple(r.values or ())) for r in t.match_fields or ()),
        )
        for t in terms
    )


def _wall(value: datetime.datetime | None) -> float:
    if value is None:
        return 0.0
    return (value if value.tzinfo else value.replace(tzinfo=datetime.UTC)).timestamp()


def demand_pod(model: V1Pod) -> DemandPod:
    meta, spec, status = model.metadata, model.spec, model.status
    containers = [_container_requests(c) for c in (spec.containers if spec else None) or ()]
    inits = [_container_requests(c) for c in (spec.init_containers if spec else None) or ()]
    owners = (meta.owner_references if meta else None) or ()
    affinity = spec.affinity.node_affinity if spec and spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    return DemandPod(
        ref=PodRef((meta.namespace if meta else None) or "", (meta.name if meta else None) or "",
                   (meta.uid if meta else None) or ""),
        requests=gpu_requests(containers, inits),
        priority=(spec.priority if spec else None) or 0,
        node_name=(spec.node_name if spec else None) or "",
        phase=(status.phase if status else None) or "Pending",
        created=_wall(meta.creation_timestamp if meta else None),
        labels=dict((meta.labels if meta else None) or {}),
        node_selector=dict((spec.node_selector if spec else None) or {}),
        affinity=_terms(required.node_selector_terms or ()) if required else (),
        tolerations=tuple(
            Toleration(t.key or "", t.operator or "Equal", t.value or "", t.effect or "")
            for t in (spec.tolerations if spec else None) or ()
        ),
        owner_kinds=tuple(o.kind for o in owners),
        owner=next((o.uid for o in owners if o.controller), owners[0].uid if owners else ""),
        is_mirror=MIRROR_POD_ANNOTATION in ((meta.annotations if meta else None) or {}),
        deleting=meta is not None and meta.deletion_timestamp is not None,
    )


def _demand_node(item: Any) -> DemandNode:
    taints = tuple(Taint(t.key, t.effect, t.value or "") for t in (item.spec.taints if item.spec else None) or ())
    return DemandNode(node_view(item), taints)


def _gpu_pod(item: Any) -> DemandPod | None:
    pod = demand_pod(item)
    return pod if pod.requests else None


class _Stopping(logging.Filter):
    """Drops what the informer's thread logs once its watch was stopped: the connection it reads was shut
    to stop it, not broken."""

    threads: ClassVar[set[int]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread not in self.threads


logging.getLogger("kubernetes.informer.informer").addFilter(_Stopping())


class _Kept(Generic[T]):
    """One kind listed once, then kept by its watch (kubernetes.informer.SharedInformer, on its thread), each
    object converted as its event comes (None: not kept)."""

    def __init__(self, call: Callable[..., Any], kind: str, convert: Callable[[Any], T | None], **query: str) -> None:
        self.kind, self._convert, self._error, self._thread = kind, convert, "", 0
        self._objects: dict[str, T] = {}
        self._lock, self._synced, self._stopping = threading.Lock(), threading.Event(), threading.Event()
        self._watching: Any = None  # the open watch's HTTP response (urllib3), to shut when stopped

        def listed(**args: Any) -> Any:
            self._thread = threading.get_ident()
            timeout = (_TIMEOUT_S[0], _WATCH_S + _TIMEOUT_S[1])
            if not args.get("watch"):
                return call(_request_timeout=timeout, **args)
            self._synced.set()  # the informer lists, fires the list's events, then watches
            args["timeout_seconds"] = 1 if self._stopping.is_set() else _WATCH_S
            response = call(_request_timeout=timeout, **args)
            with self._lock:
                self._watching, stopping = response, self._stopping.is_set()
            if stopping:  # stopped while the watch was being opened: stop() saw no response to shut
                _shut(response)
            return response

        listed.__doc__ = f":rtype: {kind}List"  # how the client's Watch finds the type of each event
        self._informer = _INFORMER(listed, **query)
        for event, handler in ((ADDED, self._put), (MODIFIED, self._put), (DELETED, self._drop), (ERROR, self._failed)):
            self._informer.add_event_handler(event, handler)
        self._informer.start()

    def _put(self, item: Any, *, drop: bool = False) -> None:
        converted = None if drop else self._convert(item)
        with self._lock:
            key = f"{item.metadata.namespace or ''}/{item.metadata.name}"
            if converted is None:
                self._objects.pop(key, None)
            else:
                self._objects[key] = converted

    def _drop(self, item: Any) -> None:
        self._put(item, drop=True)

    def _failed(self, error: object) -> None:
        self._error = f": {error}"

    def items(self) -> list[T]:
        """What the watch has seen; TransientError until the first list is in (the next look tries again)."""
        if not self._synced.wait(_TIMEOUT_S[1]):
            raise TransientError(f"list {self.kind.lower()}s: no answer yet{self._error}")
        with self._lock:
            return list(self._objects.values())

    def stop(self) -> None:
        with self._lock:
            self._stopping.set()
            watching = self._watching
        _Stopping.threads.add(self._thread)
        if watching is not None:  # opened, but perhaps not yet handed to the Watch, whose stop would miss it
            _shut(watching)
        self._informer.stop()  # its Watch shuts the connection it reads, then the thread is joined
        _Stopping.threads.discard(self._thread)


def _shut(response: Any) -> None:
    """End a watch's read now. The client's Watch.stop shuts the connection it reads, but not one still being
    opened: the informer's thread then read that watch for its 300 s, and `stop` joined it (`autopilot run`
    took five minutes to end under load, where opening is slow)."""
    with contextlib.suppress(ValueError, RuntimeError, OSError):  # already ended, released, or closed
        response.shutdown()


class DemandApi(RolloutApi):
    """RolloutApi (the pool, its state objects) and what the advice and the autopilot read besides."""

    _instance = uuid.uuid4().hex[:8]
    _serial = itertools.count(1)

    def __init__(
        self,
        api_client: ApiClient,
        *,
        clock: Clock,
        namespace: str = AUTOPILOT_NAMESPACE,
        layouts_namespace: str = AUTOPILOT_NAMESPACE,
        layouts_text: str | None = None,
    ) -> None:
        super().__init__(api_client, clock=clock, namespace=namespace, layouts_namespace=layouts_namespace,
                         layouts_text=layouts_text)
        self._client = api_client
        self._watched: tuple[_Kept[DemandNode], _Kept[DemandPod], _Kept[PdbView]] | None = None
        self._selector = ""

    def close(self) -> None:
        """Stop the watches and close the client's connections (a command that is done with the cluster)."""
        for kept in self._watched or ():
            kept.stop()
        self._client.close()  # type: ignore[no-untyped-call]

    def watch(self, selector: str) -> None:
        """From now on, the nodes `selector` selects, every GPU pod and every budget come from watches: one
        list each, then their events (the autopilot's view between its looks)."""
        self._selector = selector
        self._watched = (
            _Kept(self._core.list_node, "V1Node", _demand_node, **({"label_selector": selector} if selector else {})),
            _Kept(self._core.list_pod_for_all_namespaces, "V1Pod", _gpu_pod),
            _Kept(self._policy.list_pod_disruption_budget_for_all_namespaces, "V1PodDisruptionBudget", pdb_view),
        )

    def list_pdbs(self) -> list[PdbView]:
        return self._watched[2].items() if self._watched else super().list_pdbs()

    def list_demand_nodes(self, selector: str) -> list[DemandNode]:
        if self._watched and selector == self._selector:
            return sorted(self._watched[0].items(), key=lambda n: n.name)
        call = f"list nodes -l {selector}"

        def read() -> list[DemandNode]:
            with classified(call):
                listing = self._core.list_node(label_selector=selector or None, _request_timeout=_TIMEOUT_S)
            return sorted((_demand_node(item) for item in listing.items or ()), key=lambda n: n.name)

        return call_with_retries(call, read, clock=self._clock)

    def list_gpu_pods(self) -> list[DemandPod]:
        if self._watched:
            return self._watched[1].items()
        call = "list pods in all namespaces"

        def read() -> list[DemandPod]:
            with classified(call):
                listing = self._core.list_pod_for_all_namespaces(_request_timeout=_TIMEOUT_S)
            return [pod for item in listing.items or () if (pod := _gpu_pod(item)) is not None]

        return call_with_retries(call, read, clock=self._clock)

    # --- the autopilot's object and Events ----------------------------------------------------------

    def read_autopilot(self) -> StoredState | None:
        call = f"get configmap {self.namespace}/{AUTOPILOT_OBJECT}"

        def read() -> StoredState | None:
            with classified(call):
                try:
                    item = self._core.read_namespaced_config_map(
                        AUTOPILOT_OBJECT, self.namespace, _request_timeout=_TIMEOUT_S
                    )
                except ApiException as error:
                    if error.status == _HTTP_NOT_FOUND:
                        return None
                    raise
            version = str(item.metadata.resource_version or "") if item.metadata else ""
            return StoredState(self.namespace, AUTOPILOT_OBJECT, item.data or {}, version)

        return call_with_retries(call, read, clock=self._clock)

    def write_autopilot(self, data: Mapping[str, str], resource_version: str) -> str:
        body = V1ConfigMap(
            metadata=V1ObjectMeta(name=AUTOPILOT_OBJECT, namespace=self.namespace,
                                  resource_version=resource_version or None),
            data=dict(data),
        )
        if not resource_version:
            return self._conditional(
                f"create configmap {self.namespace}/{AUTOPILOT_OBJECT}",
                lambda: self._core.create_namespaced_config_map(self.namespace, body, _request_timeout=_TIMEOUT_S),
            )
        return self._conditional(
            f"replace configmap {self.namespace}/{AUTOPILOT_OBJECT}",
            lambda: self._core.replace_namespaced_config_map(
                AUTOPILOT_OBJECT, self.namespace, body, _request_timeout=_TIMEOUT_S
            ),
        )

    def record_event(self, *, node: str | None, reason: str, message: str, warning: bool) -> None:
        now = datetime.datetime.fromtimestamp(int(self._clock.wall()), tz=datetime.UTC)
        if node is not None:
            namespace, involved = EVENT_NAMESPACE, V1ObjectReference(api_version="v1", kind="Node", name=node)
        else:
            namespace = self.namespace
            involved = V1ObjectReference(api_version="v1", kind="ConfigMap", name=AUTOPILOT_OBJECT,
                                         namespace=self.namespace)
        event = CoreV1Event(
            api_version="v1", kind="Event",
            metadata=V1ObjectMeta(name=f"{node or AUTOPILOT_OBJECT}.{self._instance}{next(self._serial):06x}",
                                  namespace=namespace),
            involved_object=involved, reason=reason, message=message[:_MAX_MESSAGE],
            type="Warning" if warning else "Normal",
            source=V1EventSource(component=f"{EVENT_COMPONENT}-autopilot"),
            reporting_component=f"{EVENT_COMPONENT}-autopilot", reporting_instance=self._instance,
            first_timestamp=now, last_timestamp=now, count=1,
        )
        call = f"record event {reason} on {involved.kind} {involved.name}"
        with classified(call):
            self._core.create_namespaced_event(namespace, event, _request_timeout=_TIMEOUT_S)
