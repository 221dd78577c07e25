"""Where Kubernetes errors enter migagent: ApiException and connection failures become our error types.

409 (conflict), 429 (throttled), 5xx and connection failures are worth retrying (TransientError,
with the server's Retry-After as the delay when it sent one); 403/404 and every other client error
are not (PermanentError). Messages name the call, so a log line says what failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import structlog
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.errors import MigAgentError, PermanentError, TransientError
from migagent.jsontext import decode_json
from migagent.retrying import transient_retrying

log = structlog.get_logger(__name__)

T = TypeVar("T")

_HTTP_CONFLICT = 409
_HTTP_TOO_MANY_REQUESTS = 429
_HTTP_SERVER_ERRORS = range(500, 600)
DEFAULT_TRANSIENT_DELAY_S = 1.0


def status_message(error: ApiException) -> str:
    """The `message` of the Status body the server sent, else the HTTP reason."""
    body = error.body
    if body:
        try:
            decoded = decode_json(body)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
            return str(decoded["message"])
    return str(error.reason or "no reason given")


def retry_after_s(error: ApiException) -> float | None:
    headers = error.headers or {}
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def is_transient_status(status: int | None) -> bool:
    # status 0: the client could not build or send the request (TLS failure, for example).
    return status in (0, _HTTP_CONFLICT, _HTTP_TOO_MANY_REQUESTS) or (
        status is not None and status in _HTTP_SERVER_ERRORS
    )


def classify(error: ApiException, call: str) -> MigAgentError:
    status = error.status
    text = f"{call}: HTTP {status}: {status_message(error)}"
    if is_transient_status(status):
        delay = retry_after_s(error)
        return TransientError(text, delay=DEFAULT_TRANSIENT_DELAY_S if delay is None else delay)
    return PermanentError(text)


@contextmanager
def classified(call: str) -> Iterator[None]:
    """Raise migagent errors (from the cause) for API and connection failures inside the block."""
    try:
        yield
    except ApiException as error:
        raise classify(error, call) from error
    except urllib3.exceptions.HTTPError as error:
        raise TransientError(f"{call}: {_unreachable(error)}: {error}") from error


def _unreachable(error: urllib3.exceptions.HTTPError) -> str:
    # urllib3 derives NewConnectionError (refused, no route) from ConnectTimeoutError: not a timeout.
    timed_out = isinstance(error, urllib3.exceptions.TimeoutError) and not isinstance(
        error, urllib3.exceptions.NewConnectionError
    )
    return "the API server did not answer in time (request timed out)" if timed_out else "cannot reach the API server"


def call_with_retries(
    call: str,
    fn: Callable[[], T],
    *,
    clock: Clock,
    attempts: int = 5,
    max_delay_s: float = 10.0,
    budget_s: float | None = None,
) -> T:
    """Run `fn` (already classified), retrying TransientError with back-off on `clock` (migagent.retrying).

    `budget_s` bounds the whole call, tries and waits together: no new try starts once it is spent
    (callers pass two request timeouts, so one call never blocks much longer than that)."""

    def delay(attempt: int, suggested: float) -> float:
        return min(max_delay_s, max(suggested, 0.5 * 2.0 ** max(0, attempt - 1)))

    retrying = transient_retrying(
        clock=clock, what=call, attempts=attempts, delay=delay, budget_s=budget_s, event="kube_call_retrying"
    )
    return retrying(fn)
