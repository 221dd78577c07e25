"""Reads of every node for `migagent status`: one list, then a watch. Nodes `list` and `watch` are
the only permissions this needs (no get, no writes, no pods)."""

from __future__ import annotations

from collections.abc import Iterator

from kubernetes.client import ApiClient

from migagent.kube.classify import classified
from migagent.kube.convert import node_view
from migagent.kube.core_v1 import CoreV1Calls
from migagent.kube.nodes import watch_nodes
from migagent.node.port import NodeEvent, NodeView

_TIMEOUT_S = (5.0, 30.0)  # connect, read


class FleetReader:
    def __init__(self, api_client: ApiClient) -> None:
        self._core = CoreV1Calls(api_client)

    def list_nodes(self, label_selector: str | None) -> tuple[list[NodeView], str]:
        """Every node the selector matches, and the list's resource version to watch from.

        One attempt: a person is waiting, and an unreachable server is better said at once."""
        call = "list nodes" + (f" -l {label_selector}" if label_selector else "")
        with classified(call):
            listing = self._core.list_node(label_selector=label_selector or None, _request_timeout=_TIMEOUT_S)
        version = (listing.metadata.resource_version if listing.metadata else None) or ""
        return [node_view(item) for item in listing.items or ()], version

    def watch_nodes(self, label_selector: str | None, resource_version: str, timeout_s: float) -> Iterator[NodeEvent]:
        """Changes to the selected nodes after `resource_version`, until the server ends the stream."""
        return watch_nodes(self._core, "watch nodes", resource_version, timeout_s, label_selector=label_selector)
