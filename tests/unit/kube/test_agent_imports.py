"""What an agent keeps resident before its first change: not the generated CoreV1Api module, nor the
pod models (kube/core_v1.py says why); both load when first needed and still work then."""

from __future__ import annotations

import json
import subprocess
import sys

_HEAVY = ("kubernetes.client.api.core_v1_api", "kubernetes.client.models.v1_pod")

_PROBE = """
import json, sys
from migagent.clock import FakeClock
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
import migagent.cli, migagent.wiring.agent
client = make_api_client(kubeconfig=None, api_server="http://127.0.0.1:9")
KubeApi(client, node_name="n1", clock=FakeClock())
loaded_before = [name for name in %r if name in sys.modules]
from kubernetes.client import V1Pod
loaded_after = [name for name in %r if name in sys.modules]
print(json.dumps([loaded_before, loaded_after]))
"""


def test_an_agent_that_has_listed_no_pod_has_not_loaded_core_v1_api_or_the_pod_models() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE % (_HEAVY, _HEAVY)], capture_output=True, text=True, check=True, timeout=120
    )
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == []
    assert "kubernetes.client.models.v1_pod" in after  # the probe can see a module load
