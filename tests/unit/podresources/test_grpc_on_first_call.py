"""gRPC loads with the first PodResources call, not with the agent: an idle agent never calls, and
gRPC with protobuf is about a sixth of its resident memory (bench/README.md, the agent process)."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
import migagent.cli.agent, migagent.wiring
from migagent.podresources.client import PodResourcesClient
client = PodResourcesClient("/nonexistent/kubelet.sock")
print("before", "grpc" in sys.modules, "google.protobuf" in sys.modules)
try:
    client.list()
except Exception as exc:
    print("error", type(exc).__name__)
print("after", "grpc" in sys.modules)
"""


def test_the_agent_imports_grpc_only_when_it_first_asks_the_kubelet() -> None:
    result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.split("\n")[:3] == ["before False False", "error TransientError", "after True"]
