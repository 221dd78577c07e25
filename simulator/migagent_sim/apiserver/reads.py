"""GET: single objects, lists, and the setup of watches (selectors, resourceVersion, expiry)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from migagent.clock import Clock
from migagent_sim.apiserver.errors import ApiError, bad_request, not_found
from migagent_sim.apiserver.routing import ResourceType, Route
from migagent_sim.apiserver.selectors import SelectorError, parse_field_selector, parse_label_selector
from migagent_sim.apiserver.store import Store
from migagent_sim.apiserver.watch import WatchEnd, WatchOptions, WatchPump

JsonDict = dict[str, Any]
Matcher = Callable[[JsonDict], bool]


def get_object(store: Store, resource: ResourceType, route: Route) -> JsonDict:
    name = route.name or ""
    found = store.get(resource, route.namespace or "", name)
    if found is None:
        raise not_found(resource.plural, name, group=resource.group)
    return found


def build_matcher(resource: ResourceType, route: Route, query: Mapping[str, str]) -> Matcher:
    """Namespace of the URL + fieldSelector + labelSelector; selector syntax errors are 400 BadRequest."""
    try:
        fields = parse_field_selector(query.get("fieldSelector", ""), resource.plural)
        labels = parse_label_selector(query.get("labelSelector", ""))
    except SelectorError as error:
        raise bad_request(str(error)) from error
    namespace = route.namespace

    def matches(obj: JsonDict) -> bool:
        metadata = obj.get("metadata") or {}
        if namespace is not None and metadata.get("namespace") != namespace:
            return False
        return fields.matches(obj) and labels.matches(metadata.get("labels"))

    return matches


def list_objects(store: Store, resource: ResourceType, route: Route, query: Mapping[str, str]) -> JsonDict:
    matches = build_matcher(resource, route, query)
    items, resource_version = store.list_objects(resource, route.namespace)
    return {
        "kind": resource.list_kind,
        "apiVersion": resource.api_version,
        "metadata": {"resourceVersion": str(resource_version)},
        "items": [item for item in items if matches(item)],
    }


class ExpiredWatch:
    """What the apiserver does for a too-old resourceVersion: HTTP 200, one ERROR event, end of stream."""

    def __init__(self, error: ApiError) -> None:
        self._error = error

    def run(self, write: Callable[[JsonDict], None]) -> WatchEnd:
        write({"type": "ERROR", "object": self._error.status_body()})
        return WatchEnd.TIMEOUT

    def close(self) -> None:
        """Nothing was subscribed."""


class StoreWatch:
    def __init__(self, pump: WatchPump, close: Callable[[], None]) -> None:
        self._pump = pump
        self._close = close

    def run(self, write: Callable[[JsonDict], None]) -> WatchEnd:
        return self._pump.run(write)

    def close(self) -> None:
        self._close()


def _since(query: Mapping[str, str]) -> int | None:
    raw = query.get("resourceVersion", "")
    if raw in ("", "0"):
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f"resourceVersion {raw!r} is not one this server issued (they are integers)") from None


def _timeout_s(query: Mapping[str, str], default_s: float) -> float:
    raw = query.get("timeoutSeconds")
    if raw is None:
        return default_s
    try:
        seconds = int(raw)
    except ValueError:
        raise bad_request(f"timeoutSeconds must be an integer, got {raw!r}") from None
    return float(seconds) if seconds > 0 else default_s  # 0 means "no client timeout": the server's own


def open_watch(
    store: Store,
    resource: ResourceType,
    route: Route,
    query: Mapping[str, str],
    *,
    default_timeout_s: float,
    bookmark_interval_s: float,
    clock: Clock,
) -> ExpiredWatch | StoreWatch:
    matches = build_matcher(resource, route, query)
    options = WatchOptions(
        timeout_s=_timeout_s(query, default_timeout_s),
        allow_bookmarks=query.get("allowWatchBookmarks", "").lower() in ("true", "1"),
        bookmark_interval_s=bookmark_interval_s,
    )
    try:
        replay, subscription = store.subscribe(resource, _since(query))
    except ApiError as error:
        if error.code == 410:
            return ExpiredWatch(error)
        raise
    pump = WatchPump(subscription=subscription, replay=replay, matches=matches, options=options, clock=clock)
    return StoreWatch(pump, lambda: store.unsubscribe(subscription))
