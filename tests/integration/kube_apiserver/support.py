"""Small typed bridges between strict mypy and the kubernetes client in these tests."""

import json
from collections.abc import Callable, Generator
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException


def parsed(model: object) -> Any:
    """The client's models declare every field Optional; these tests read fields the server always fills,
    after the client has already validated the response against its strict models."""
    return model


def status_body(error: ApiException) -> dict[str, Any]:
    """The `Status` object the server sent with an error response."""
    assert error.body is not None
    body: dict[str, Any] = json.loads(error.body)
    return body


def watch_stream(list_function: Callable[..., object], **kwargs: Any) -> Generator[dict[str, Any], None, None]:
    """`kubernetes.watch.Watch().stream(...)` (untyped in the client)."""
    stream: Generator[dict[str, Any], None, None] = watch.Watch().stream(list_function, **kwargs)  # type: ignore[no-untyped-call]
    return stream


def watch_events(list_function: Callable[..., object], **kwargs: Any) -> list[dict[str, Any]]:
    """Every event of a watch that ends by itself (pass timeout_seconds)."""
    return list(watch_stream(list_function, **kwargs))


def new_watch() -> Any:
    """A `kubernetes.watch.Watch` (untyped in the client), for tests that read its resource_version."""
    return watch.Watch()  # type: ignore[no-untyped-call]
