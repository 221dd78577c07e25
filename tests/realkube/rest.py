"""Plain JSON over HTTPS to the real API server, as one identity: what the test harness itself sends.

The harness (the admin setting a node up, the simulated kubelet, the least-privilege cases) speaks to
the server with dicts, not the kubernetes client's models: the requests are exactly the JSON written
in the test, and an answer is the server's JSON. The agent under test keeps its real client.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

JsonDict = dict[str, Any]
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


class HttpError(Exception):
    """A non-2xx answer: its status and the server's Status object (message, reason)."""

    def __init__(self, status: int, body: JsonDict) -> None:
        super().__init__(f"{status}: {body.get('message', body)}")
        self.status = status
        self.body = body

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))


class Rest:
    def __init__(
        self, url: str, context: ssl.SSLContext, *, token: str | None = None,
        impersonate: tuple[str, tuple[str, ...]] | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        self._host = parsed.hostname or "127.0.0.1"
        self._port = parsed.port
        self._context = context
        self._token = token
        self._impersonate = impersonate

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        if self._impersonate is not None:
            user, groups = self._impersonate
            headers["Impersonate-User"] = user
            # http.client sends one header per name: groups as one comma list is not the protocol,
            # so only the first group is named (enough for the cases here).
            if groups:
                headers["Impersonate-Group"] = groups[0]
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str | None = None,
        timeout_s: float = 30,
    ) -> JsonDict:
        if query:
            path = f"{path}?{urllib.parse.urlencode(query)}"
        headers = self._headers()
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        connection = http.client.HTTPSConnection(self._host, self._port, context=self._context, timeout=timeout_s)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        answer: JsonDict = json.loads(raw) if raw else {}
        if response.status >= 300:
            raise HttpError(response.status, answer)
        return answer

    def get(self, path: str, **query: str) -> JsonDict:
        return self.request("GET", path, query=query or None)

    def find(self, path: str) -> JsonDict | None:
        """The object at `path`, or None where there is none (404)."""
        try:
            return self.get(path)
        except HttpError as error:
            if error.status == 404:
                return None
            raise

    def create(self, path: str, body: JsonDict) -> JsonDict:
        return self.request("POST", path, body)

    def replace(self, path: str, body: JsonDict) -> JsonDict:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any, *, content_type: str = SMP) -> JsonDict:
        return self.request("PATCH", path, body, content_type=content_type)

    def delete(self, path: str, body: JsonDict | None = None) -> JsonDict:
        return self.request("DELETE", path, body)

    def watch(self, path: str, *, resource_version: str, timeout_s: int, **query: str) -> Iterator[JsonDict]:
        """Events of a watch from `resource_version` until the server ends it (after `timeout_s`)."""
        params = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": str(timeout_s), **query}
        headers = self._headers()
        connection = http.client.HTTPSConnection(self._host, self._port, context=self._context, timeout=timeout_s + 10)
        try:
            connection.request("GET", f"{path}?{urllib.parse.urlencode(params)}", headers=headers)
            response = connection.getresponse()
            if response.status >= 300:
                raise HttpError(response.status, json.loads(response.read() or b"{}"))
            for line in response:
                if line.strip():
                    yield json.loads(line)
        finally:
            connection.close()
