"""How long one API request may take: every call the agent makes passes this as `_request_timeout`.

The `kubernetes` client waits forever by default (no socket timeout), so a server that accepts a
connection and never answers would hold the agent, and the node it cordoned, for good. A total
per request bounds the connect and every read; a call with its retries (classify.call_with_retries)
is bounded by `call_budget`, two request timeouts, so the longest a call can block is known.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RequestTimeout:
    """Seconds one request (connect + response) may take; `watch_read_s` bounds a watch stream's reads."""

    seconds: float = DEFAULT_REQUEST_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.seconds <= 0:
            raise ValueError(f"the request timeout must be a positive number of seconds, got {self.seconds}")

    @property
    def request(self) -> float:
        """What `_request_timeout` gets for a plain call (urllib3 Timeout(total=...))."""
        return self.seconds

    @property
    def call_budget(self) -> float:
        """How long one API call may take in all, its retries and their waits included: two requests'
        worth, so a status write of three calls is bounded too (no nested 5 x 5 retries)."""
        return 2.0 * self.seconds

    def watch(self, server_timeout_s: float) -> tuple[float, float]:
        """(connect, read) for a watch the server ends after `server_timeout_s`: a silent stream ends one
        request timeout after the server should have ended it."""
        return (self.seconds, server_timeout_s + self.seconds)
