"""API errors as the real apiserver reports them: an HTTP code plus a `Status` body (docs/kubernetes.md §3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

JsonDict = dict[str, Any]

_REASON_BY_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def reason_for(code: int) -> str:
    """The `Status.reason` the apiserver pairs with an HTTP code ("Unknown" for codes it has no name for)."""
    return _REASON_BY_CODE.get(code, "Unknown")


def success_status(code: int) -> JsonDict:
    """The body of a successful eviction (201) and similar subresource answers."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


class ApiError(Exception):
    """A failed request; `status_body()` is what goes on the wire."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        name: str | None = None,
        kind: str | None = None,
        group: str | None = None,
        causes: Sequence[JsonDict] = (),
        retry_after_s: int = 0,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason_for(code) if reason is None else reason
        self.name = name
        self.kind = kind
        self.group = group
        self.causes = tuple(causes)
        self.retry_after_s = retry_after_s

    def status_body(self) -> JsonDict:
        body: JsonDict = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:  # the eviction's "more than one PDB" Status carries no reason
            body["reason"] = self.reason
        details = self._details()
        if details:
            body["details"] = details
        return body

    def headers(self) -> dict[str, str]:
        # The apiserver copies a positive details.retryAfterSeconds into a Retry-After header, and only then.
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s > 0 else {}

    def _details(self) -> JsonDict:
        details: JsonDict = {}
        if self.name is not None:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind is not None:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [dict(cause) for cause in self.causes]
        if self.retry_after_s > 0:
            details["retryAfterSeconds"] = self.retry_after_s
        return details


def qualified(plural: str, group: str) -> str:
    """`nodes`, `daemonsets.apps`: how the apiserver names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, name: str, *, group: str = "") -> ApiError:
    return ApiError(404, f'{qualified(plural, group)} "{name}" not found', name=name, kind=plural, group=group)


def conflict(plural: str, name: str, *, group: str = "") -> ApiError:
    message = (
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    return ApiError(409, message, name=name, kind=plural, group=group)


def already_exists(plural: str, name: str, *, group: str = "") -> ApiError:
    message = f'{qualified(plural, group)} "{name}" already exists'
    return ApiError(409, message, reason="AlreadyExists", name=name, kind=plural, group=group)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def invalid(kind: str, name: str, problems: Sequence[str], *, plural: str, group: str = "") -> ApiError:
    """422 Invalid, worded like the apiserver: `Node "n1" is invalid: metadata.labels: Invalid value: ...`."""
    message = f'{kind} "{name}" is invalid: ' + ", ".join(problems)
    causes = [{"reason": "FieldValueInvalid", "message": problem} for problem in problems]
    return ApiError(422, message, name=name, kind=plural, group=group, causes=causes)
