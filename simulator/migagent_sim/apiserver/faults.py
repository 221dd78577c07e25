"""Request recording (with the RBAC verb each request needs) and injected failures."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from migagent_sim.apiserver.errors import ApiError, qualified, reason_for
from migagent_sim.apiserver.routing import Route


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: Mapping[str, str]
    verb: str  # RBAC verb: get, list, watch, create, update, patch, delete, deletecollection
    resource: str  # plural, e.g. "nodes"; "" for paths this server does not serve
    subresource: str | None  # "status", "eviction", or None
    namespace: str | None
    name: str | None
    status: int
    api_group: str = ""  # "" for the core group, "events.k8s.io", "apps", "policy"


@dataclass
class _Fault:
    method: str
    path_pattern: re.Pattern[str]
    status: int
    remaining: int
    reason: str | None


class FaultInjector:
    """Failures answered instead of the real handling, matched by method and a regex searched in the path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []

    def add(self, method: str, path_regex: str, status: int, *, times: int, reason: str | None) -> None:
        if not 400 <= status <= 599:
            raise ValueError(f"inject_fault status must be an HTTP error code 400..599, got {status}")
        if times < 1:
            raise ValueError(f"inject_fault times must be at least 1, got {times}")
        fault = _Fault(method.upper(), re.compile(path_regex), status, times, reason)
        with self._lock:
            self._faults.append(fault)

    def take(self, method: str, path: str, route: Route) -> ApiError | None:
        """The error to answer with for this request, consuming one use of the first matching fault."""
        with self._lock:
            for fault in self._faults:
                if fault.method in (method.upper(), "*") and fault.path_pattern.search(path):
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                    return _fault_error(fault.status, fault.reason, route)
        return None


def _fault_error(status: int, reason: str | None, route: Route) -> ApiError:
    resource = qualified(route.plural, route.group) if route.plural else "the resource"
    name = route.name or ""
    messages = {
        409: f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        410: "too old resource version (injected)",
        429: "Too many requests, please try again later. (injected)",
        500: f"Internal error occurred: injected fault on {resource} {name}".rstrip(),
        503: "The server is currently unable to handle the request (injected)",
    }
    message = messages.get(status, f"injected {status} {reason_for(status)} on {resource} {name}".rstrip())
    return ApiError(
        status,
        message,
        reason=reason,
        name=route.name,
        kind=route.plural or None,
        group=route.group or None,
    )


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[RecordedRequest] = []

    def record(self, entry: RecordedRequest) -> None:
        with self._lock:
            self._entries.append(entry)

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
