"""The object store: one global resourceVersion counter, a bounded change history, compaction, watchers.

Every committed write bumps the resourceVersion and becomes a `StoredEvent` that is (under the lock) appended
to the history and queued to every open subscription of that resource, so a watch started from a
resourceVersion misses nothing. Listeners run after the lock is released, in the writing thread.
"""

from __future__ import annotations

import copy
import logging
import queue
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from migagent.clock import Clock
from migagent_sim.apiserver.errors import ApiError, already_exists, invalid, not_found
from migagent_sim.apiserver.objects import new_uid, timestamp
from migagent_sim.apiserver.routing import ResourceType

JsonDict = dict[str, Any]
Listener = Callable[["StoredEvent"], None]
_LOG = logging.getLogger(__name__)
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet


@dataclass(frozen=True)
class StoredEvent:
    resource_version: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: ResourceType
    obj: JsonDict
    previous: JsonDict | None


class Subscription:
    """A watcher's queue; `None` in the queue means the connection must be dropped."""

    def __init__(self, resource: ResourceType, start_rv: int) -> None:
        self.resource = resource
        self.start_rv = start_rv
        self.events: queue.Queue[StoredEvent | None] = queue.Queue()


def _without_version(obj: JsonDict) -> JsonDict:
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": metadata}


class Store:
    def __init__(self, *, clock: Clock, history_limit: int = 10_000) -> None:
        self._clock = clock
        self._history_limit = history_limit
        self._lock = threading.Lock()
        self._objects: dict[ResourceType, dict[tuple[str, str], JsonDict]] = {}
        self._rv = 0
        self._compacted_rv = 0
        self._history: list[StoredEvent] = []
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Listener] = []
        self._listener_errors: list[BaseException] = []

    # --- reads

    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, resource: ResourceType, namespace: str, name: str) -> JsonDict | None:
        with self._lock:
            found = self._objects.get(resource, {}).get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def list_objects(self, resource: ResourceType, namespace: str | None = None) -> tuple[list[JsonDict], int]:
        """All objects (of one namespace when given) in creation order, and the resourceVersion they are at."""
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (ns, _), obj in self._objects.get(resource, {}).items()
                if namespace is None or ns == namespace
            ]
            return items, self._rv

    # --- writes

    def create(self, resource: ResourceType, obj: JsonDict) -> JsonDict:
        obj = copy.deepcopy(obj)
        metadata = obj.setdefault("metadata", {})
        with self._lock:
            name = metadata.get("name") or self._generate_name(resource, metadata)
            namespace = metadata.get("namespace", "") if resource.namespaced else ""
            bucket = self._objects.setdefault(resource, {})
            if (namespace, name) in bucket:
                raise already_exists(resource.plural, name, group=resource.group)
            metadata["name"] = name
            metadata.setdefault("uid", new_uid())
            metadata.setdefault("creationTimestamp", timestamp(self._clock.wall()))
            event = self._commit(resource, "ADDED", obj, previous=None)
            bucket[(namespace, name)] = obj
        self._notify(event)
        return copy.deepcopy(obj)

    def update(
        self, resource: ResourceType, namespace: str, name: str, mutate: Callable[[JsonDict], JsonDict]
    ) -> JsonDict:
        """Replace the object with `mutate(copy)`; `mutate` may raise ApiError to refuse (nothing changes then).

        A write that changes nothing (a no-op patch) is not stored: the resourceVersion stays and no
        watch event goes out, as the apiserver's GuaranteedUpdate skips an unchanged object."""
        with self._lock:
            bucket = self._objects.get(resource, {})
            current = bucket.get((namespace, name))
            if current is None:
                raise not_found(resource.plural, name, group=resource.group)
            updated = mutate(copy.deepcopy(current))
            self._keep_identity(resource, current, updated)
            if _without_version(updated) == _without_version(current):
                return copy.deepcopy(current)
            event = self._commit(resource, "MODIFIED", updated, previous=current)
            bucket[(namespace, name)] = updated
        self._notify(event)
        return copy.deepcopy(updated)

    def delete(
        self, resource: ResourceType, namespace: str, name: str, *, finalize: Callable[[JsonDict], object] | None = None
    ) -> JsonDict:
        """Remove the object; `finalize` may stamp it (deletionTimestamp) or raise ApiError to refuse."""
        with self._lock:
            bucket = self._objects.get(resource, {})
            current = bucket.get((namespace, name))
            if current is None:
                raise not_found(resource.plural, name, group=resource.group)
            final = copy.deepcopy(current)
            if finalize is not None:
                finalize(final)
            event = self._commit(resource, "DELETED", final, previous=current)
            del bucket[(namespace, name)]
        self._notify(event)
        return copy.deepcopy(final)

    def compact(self) -> int:
        """Expire every resourceVersion older than the current one; returns the compaction point."""
        with self._lock:
            self._compacted_rv = self._rv
            self._history.clear()
            return self._rv

    # --- watch

    def subscribe(self, resource: ResourceType, since: int | None) -> tuple[list[StoredEvent], Subscription]:
        """Open a watch: the events to replay first, and the queue of later ones.

        `since` None means "from now, starting with a synthetic ADDED per existing object"; a resourceVersion
        older than the compaction point raises ApiError 410 Expired.
        """
        with self._lock:
            if since is None:
                replay = [
                    StoredEvent(int(obj["metadata"]["resourceVersion"]), "ADDED", resource, copy.deepcopy(obj), None)
                    for obj in self._objects.get(resource, {}).values()
                ]
            elif since < self._compacted_rv:
                raise ApiError(410, f"too old resource version: {since} ({self._compacted_rv})")
            else:
                replay = [e for e in self._history if e.resource == resource and e.resource_version > since]
            subscription = Subscription(resource, self._rv if since is None else max(since, 0))
            self._subscriptions.add(subscription)
            return replay, subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions.discard(subscription)

    def drop_subscriptions(self) -> int:
        """Tell every open watch to close its connection abruptly; returns how many were open."""
        with self._lock:
            for subscription in self._subscriptions:
                subscription.events.put(None)
            return len(self._subscriptions)

    def listener_errors(self) -> list[BaseException]:
        with self._lock:
            return list(self._listener_errors)

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    # --- internals

    def _generate_name(self, resource: ResourceType, metadata: JsonDict) -> str:
        prefix = metadata.get("generateName")
        if not prefix:
            raise invalid(
                resource.kind,
                "",
                ["metadata.name: Required value: name or generateName is required"],
                plural=resource.plural,
                group=resource.group,
            )
        return str(prefix) + "".join(random.choices(_NAME_SUFFIX_ALPHABET, k=5))

    @staticmethod
    def _keep_identity(resource: ResourceType, current: JsonDict, updated: JsonDict) -> None:
        """Writes cannot rename an object or change its uid/creationTimestamp: restore those from storage."""
        metadata = updated.setdefault("metadata", {})
        old = current["metadata"]
        if metadata.get("name", old["name"]) != old["name"]:
            raise invalid(
                resource.kind,
                old["name"],
                [f"metadata.name: Invalid value: {metadata['name']!r}: field is immutable"],
                plural=resource.plural,
                group=resource.group,
            )
        for field in ("name", "namespace", "uid", "creationTimestamp"):
            if field in old:
                metadata[field] = old[field]

    def _commit(self, resource: ResourceType, kind: str, obj: JsonDict, *, previous: JsonDict | None) -> StoredEvent:
        """Bump the resourceVersion into `obj`, record the event and queue it to watchers (lock held)."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        event = StoredEvent(self._rv, kind, resource, copy.deepcopy(obj), copy.deepcopy(previous))
        self._history.append(event)
        if len(self._history) > self._history_limit:
            dropped = self._history.pop(0)
            self._compacted_rv = max(self._compacted_rv, dropped.resource_version)
        for subscription in self._subscriptions:
            if subscription.resource == resource:
                subscription.events.put(event)
        return event

    def _notify(self, event: StoredEvent) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            self.call_listener(listener, event, f"{event.type} {event.resource.plural}")

    def call_listener(self, listener: Callable[[Any], None], argument: Any, what: str) -> None:
        """`listener(argument)`; an exception is logged and kept in listener_errors, never raised."""
        try:
            listener(argument)
        except Exception as error:
            # A broken test listener must not turn a committed write into an HTTP 500.
            _LOG.exception("fake apiserver listener failed on %s", what)
            with self._lock:
                self._listener_errors.append(error)
