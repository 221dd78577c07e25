"""The kubelet's PodResources API (v1): which pod holds which device, read over a unix socket.

`PodResourcesClient` is what the agent uses to learn which pods hold which MIG devices;
`serve_pod_resources` is the server side, used by the simulator's fake kubelet and by tests.
"""

from __future__ import annotations

from migagent.podresources.client import DEFAULT_SOCKET_PATH, PodResourcesClient
from migagent.podresources.model import PodDevices
from migagent.podresources.server import serve_pod_resources

__all__ = ["DEFAULT_SOCKET_PATH", "PodDevices", "PodResourcesClient", "serve_pod_resources"]
