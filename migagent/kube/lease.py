"""One MIG manager per node: a `coordination.k8s.io/v1` Lease per node, taken, renewed and released.

The election follows client-go's leaderelection (tryAcquireOrRenew): a Lease held by someone else is
taken only once its record has not changed for `leaseDurationSeconds` *as this process observed it*
(its own monotonic clock, never the holder's `renewTime`, so clock skew between nodes cannot make an
agent steal early); a released Lease (no holder) is taken at once. Every write is conditional: a
create of an existing Lease answers 409 AlreadyExists and an update carrying a stale resourceVersion
answers 409 Conflict, so when two agents race exactly one wins. Releasing clears the holder (as
client-go's ReleaseOnCancel does), so a successor need not wait for expiry.

One request where one will do (as the kubelet renews its node Lease): the record this process wrote
last, with its resourceVersion, is updated directly to renew it, to release it, or to take it again
after releasing it; only a conflict (someone else wrote since) costs a read and a second try.

RBAC: get, create and update on leases in the agent's own namespace (deploy/base/rbac.yaml).
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass, replace

import structlog
from kubernetes.client import CoordinationV1Api, V1Lease, V1LeaseSpec, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.errors import MigAgentError
from migagent.kube.classify import classified
from migagent.kube.timeouts import RequestTimeout

log = structlog.get_logger(__name__)

_HTTP_NOT_FOUND = 404
_HTTP_CONFLICT = 409
_MAX_NAME = 253
LEASE_PREFIX = "migagent-node-"


def lease_name(node_name: str) -> str:
    """`migagent-node-<node>`; a node name too long for that gets a digest in its place."""
    name = f"{LEASE_PREFIX}{node_name}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(node_name.encode("utf-8")).hexdigest()[:16]
    return f"{LEASE_PREFIX}{node_name[: _MAX_NAME - len(LEASE_PREFIX) - 17]}-{digest}"


@dataclass(frozen=True)
class LeaseRecord:
    holder: str | None
    duration_s: int
    acquired_at: datetime.datetime | None = None
    renewed_at: datetime.datetime | None = None
    transitions: int = 0
    resource_version: str = ""


class LeaseOps:
    """The three Lease calls, each answering False (not raising) when another writer won the race."""

    def __init__(self, api: CoordinationV1Api, *, namespace: str, name: str, timeout: RequestTimeout) -> None:
        self.namespace = namespace
        self.name = name
        self._api = api
        self._timeout = timeout

    def read(self) -> LeaseRecord | None:
        with classified(f"read lease {self.namespace}/{self.name}"):
            try:
                lease = self._api.read_namespaced_lease(
                    self.name, self.namespace, _request_timeout=self._timeout.request
                )
            except ApiException as error:
                if error.status == _HTTP_NOT_FOUND:
                    return None
                raise
        spec = lease.spec or V1LeaseSpec()
        return LeaseRecord(
            holder=spec.holder_identity or None,
            duration_s=int(spec.lease_duration_seconds or 0),
            acquired_at=spec.acquire_time,
            renewed_at=spec.renew_time,
            transitions=int(spec.lease_transitions or 0),
            resource_version=_version_of(lease),
        )

    def create(self, record: LeaseRecord) -> LeaseRecord | None:
        """The record as stored (with its resourceVersion), or None when it exists already."""
        with classified(f"create lease {self.namespace}/{self.name}"):
            try:
                stored = self._api.create_namespaced_lease(
                    self.namespace, self._body(record, resource_version=None), _request_timeout=self._timeout.request
                )
            except ApiException as error:
                if error.status == _HTTP_CONFLICT:
                    return None  # AlreadyExists: another agent created it first
                raise
        return replace(record, resource_version=_version_of(stored))

    def update(self, record: LeaseRecord, *, resource_version: str) -> LeaseRecord | None:
        """The record as stored, or None when the Lease changed since `resource_version`."""
        with classified(f"update lease {self.namespace}/{self.name}"):
            try:
                stored = self._api.replace_namespaced_lease(
                    self.name,
                    self.namespace,
                    self._body(record, resource_version=resource_version),
                    _request_timeout=self._timeout.request,
                )
            except ApiException as error:
                if error.status == _HTTP_CONFLICT:
                    return None  # written by someone else since we read it
                raise
        return replace(record, resource_version=_version_of(stored))

    def _body(self, record: LeaseRecord, *, resource_version: str | None) -> V1Lease:
        return V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=V1ObjectMeta(name=self.name, namespace=self.namespace, resource_version=resource_version),
            spec=V1LeaseSpec(
                holder_identity=record.holder,
                lease_duration_seconds=record.duration_s,
                acquire_time=record.acquired_at,
                renew_time=record.renewed_at,
                lease_transitions=record.transitions,
            ),
        )


def _version_of(lease: V1Lease) -> str:
    return (lease.metadata.resource_version if lease.metadata else None) or ""


class NodeLease:
    """This process's claim on the node's Lease (not thread-safe: one thread at a time drives it)."""

    def __init__(self, ops: LeaseOps, *, identity: str, duration_s: int, clock: Clock) -> None:
        if duration_s < 1:
            raise ValueError(f"a lease lasts at least one second, got {duration_s}")
        self.identity = identity
        self.duration_s = duration_s
        self._ops = ops
        self._clock = clock
        self._observed: tuple[str | None, str] | None = None
        self._observed_at = 0.0
        self._written: LeaseRecord | None = None
        """The record as this process last wrote it (None: never, or someone else wrote since)."""
        self.taken_over = True
        """Whether the last acquisition took the Lease from a record this process had not written
        (another holder's, or one of unknown history): someone else may have written since."""
        self.holder: str | None = None
        """Who held the Lease at the last look (this process, another one, or nobody)."""

    @property
    def where(self) -> str:
        return f"{self._ops.namespace}/{self._ops.name}"

    def try_acquire_or_renew(self) -> bool:
        """One round: True when this process holds the Lease afterwards. API errors count as False."""
        try:
            if self._rewrite_own():
                self.taken_over = False
                return True
            return self._round()
        except MigAgentError as error:
            log.warning("lease_round_failed", lease=self.where, error=str(error))
            return False

    def _rewrite_own(self) -> bool:
        """Renew the record we hold, or take back the one we released, in one conditional update."""
        prior = self._written
        if prior is None:
            return False
        now = self._now()
        held = prior.holder == self.identity
        mine = LeaseRecord(
            self.identity,
            self.duration_s,
            acquired_at=prior.acquired_at if held else now,
            renewed_at=now,
            transitions=prior.transitions if held else prior.transitions + 1,
        )
        self._written = self._ops.update(mine, resource_version=prior.resource_version)
        if self._written is None:
            return False  # someone wrote since: read it (_round)
        self.holder = self.identity
        return True

    def _round(self) -> bool:
        now = self._now()
        mine = LeaseRecord(self.identity, self.duration_s, acquired_at=now, renewed_at=now)
        if self._observed is None:  # never looked: most likely there is no Lease yet, so create first
            self._written = self._ops.create(mine)
            if self._written is not None:
                self.holder, self.taken_over = self.identity, False
                return True
        current = self._ops.read()
        if current is None:
            self._written = self._ops.create(mine)
            self.holder = self.identity if self._written is not None else None
            self.taken_over = False
            return self._written is not None
        self._observe(current)
        self.holder = current.holder
        if current.holder not in (None, self.identity) and not self._expired(current):
            return False
        if current.holder == self.identity:
            mine = replace(mine, acquired_at=current.acquired_at or now, transitions=current.transitions)
        else:
            mine = replace(mine, transitions=current.transitions + 1)
            if current.holder is not None:
                log.info("lease_taking_over", lease=self.where, previous=current.holder)
        self._written = self._ops.update(mine, resource_version=current.resource_version)
        if self._written is not None:
            self.holder, self.taken_over = self.identity, True
        return self._written is not None

    def release(self) -> None:
        """Clear the holder if it is still us, so a successor takes over without waiting for expiry."""
        try:
            current = self._written if self._written is not None else self._ops.read()
            if current is None or current.holder != self.identity:
                return
            released = replace(current, holder=None, duration_s=1, renewed_at=self._now())
            self._written = self._ops.update(released, resource_version=current.resource_version)
            if self._written is None:  # our copy was stale: look once more
                current = self._ops.read()
                if current is None or current.holder != self.identity:
                    return
                released = replace(current, holder=None, duration_s=1, renewed_at=self._now())
                self._written = self._ops.update(released, resource_version=current.resource_version)
            if self._written is not None:
                self.holder = None
                log.info("lease_released", lease=self.where)
        except MigAgentError as error:
            log.warning("lease_release_failed", lease=self.where, error=str(error))

    def _observe(self, current: LeaseRecord) -> None:
        key = (current.holder, current.resource_version)
        if key != self._observed:
            self._observed = key
            self._observed_at = self._clock.monotonic()

    def _expired(self, current: LeaseRecord) -> bool:
        duration = current.duration_s or self.duration_s
        return self._clock.monotonic() - self._observed_at >= duration

    def _now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self._clock.wall(), tz=datetime.UTC)
