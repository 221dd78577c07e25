"""The kubelet's PodResources API (v1): which pod holds which device, read over a unix socket.

`PodResourcesClient` is what the agent uses to learn which pods hold which MIG devices;
The server side (the fake kubelet's) lives in the simulator distribution, `migagent_sim`.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # not gRPC's INFO lines (a kubelet's GOAWAY) amid the JSON logs
from migagent.podresources.client import DEFAULT_SOCKET_PATH, PodResourcesClient
from migagent.podresources.model import PodDevices

__all__ = ["DEFAULT_SOCKET_PATH", "PodDevices", "PodResourcesClient"]
