"""One real node per session for every test under tests/realnode/: the real control plane of
tests/realkube bound to this machine's address (with the DaemonSet and node-lifecycle controllers and
the scheduler), containerd and the kubelet (node.py), the agent's image as it ships deployed with
`kubectl apply -k` of deploy/overlays/standalone plus a test kustomization, and NVIDIA's device plugin
as a DaemonSet pod (cluster.py); or of deploy/overlays/gpu-operator with the GPU Operator's pieces
(operator.py): one deployment at a time, the other removed when a test needs it (`fresh`, `operator_node`).

Needs root, the binaries of scripts/control_plane.sh, scripts/real_node.sh, scripts/nvidia_tools.sh and
scripts/nvidia_ctk.sh, and the agent's image archive from scripts/build_image.sh named by
MIGAGENT_IMAGE_ARCHIVE. Without them every test here is skipped at collection with one line naming the
script; with MIGAGENT_REQUIRE_REAL_NODE=1 (what .ci/run sets) that is an error instead.

One real node on the machine at a time, whatever runs them: two would share the kubelet's iptables
chains, which the first to stop removes from under the other. Within one run the tests are one xdist
group; two runs at once (the suite beside itself, a developer's run beside CI) take turns through a
lock file, the second waiting (under its first test's timeout) until the first's node has stopped.
The pod subnet is not shared: each node takes a /24 nothing on the machine routes yet
(pod_network.py), past a bridge left by a run killed before its node stopped.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from migagent_sim.deadline import Deadline
from migagent_sim.gpu_node.nvidia_tools import missing_tools
from tests.binaries_gate import BinariesGate
from tests.realkube.control_plane import SCRIPT, binaries_built, binaries_dir
from tests.realnode.cluster import IMAGE_ENV, STANDALONE, Cluster, started_cluster
from tests.realnode.node import NODE_SCRIPT, node_binaries_missing
from tests.realnode.operator import GPU_OPERATOR, nvidia_ctk_missing


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "a real node needs root (mount namespace, cgroups, containerd)"
    if not binaries_built(binaries_dir()):
        return f"the real control plane is not built in {binaries_dir()}: run {SCRIPT}"
    missing = node_binaries_missing() or missing_tools() or nvidia_ctk_missing()
    if missing is not None:
        return missing
    archive = os.environ.get(IMAGE_ENV)
    if not archive or not Path(archive).is_file():
        return f"no agent image: run scripts/build_image.sh OUT.tar and set {IMAGE_ENV}=OUT.tar (after {NODE_SCRIPT})"
    return None


_GATE = BinariesGate(Path(__file__).resolve().parent, "MIGAGENT_REQUIRE_REAL_NODE", _missing, timeout_s=600)
"""600 s for pytest-timeout: the first test also starts the control plane and the node, imports the
images and deploys the agent and the device plugin (a minute or two on a loaded machine)."""
pytest_collection_modifyitems = _GATE.collection_modifyitems
pytest_terminal_summary = _GATE.terminal_summary


HOST_LOCK = Path("/run/lock/migagent-real-node.lock")
HOST_LOCK_WAIT_S = 3600.0
"""How long a run waits for another run's real node: that run holds the lock for its whole real-node
session (10 tests, minutes alone, tens of minutes on a loaded machine). Generous: it bounds a hang."""


@pytest.fixture(scope="package")
def host_lock() -> Iterator[None]:
    """This machine's real node and kubelet chains while tests/realnode runs: another run
    of the suite beside this one (a developer beside CI) waits here for its turn. Package-scoped, with the
    node: both go when this worker's last tests/realnode test is done (one xdist group, run as a block),
    not when the worker's whole session ends, which kept the other run waiting for every later test here.
    One open file, so the tests here that need it (the node, the firewall test) share the one lock.

    The wait is not the test's: pytest-timeout's timer (SIGALRM) is paused while it lasts and re-armed
    with what was left, or a test that waited for another run's node would time out in its setup."""
    HOST_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with HOST_LOCK.open("a") as lock:  # the lock goes when the file closes, or the process ends
        left, _ = signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            deadline = Deadline(HOST_LOCK_WAIT_S)
            while not _locked(lock):
                if deadline.passed():
                    pytest.fail(f"another run held {HOST_LOCK} for {deadline.describe()}: its real node never ended")
                time.sleep(1.0)
        finally:
            if left > 0:
                signal.setitimer(signal.ITIMER_REAL, left)
        yield


def _locked(lock: IO[str]) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@pytest.fixture(scope="package")
def cluster(host_lock: None) -> Iterator[Cluster]:
    with started_cluster(Path(os.environ[IMAGE_ENV])) as world:
        yield world


@pytest.fixture
def fresh(cluster: Cluster) -> Cluster:
    """The node back at the start layout, the agent (deploy/overlays/standalone) and the plugin running,
    no workload or budget."""
    cluster.use(STANDALONE)
    cluster.reset()
    return cluster


@pytest.fixture
def operator_node(cluster: Cluster) -> Cluster:
    """The same on a GPU Operator node: deploy/overlays/gpu-operator and the operator's pieces
    (operator.py), the standalone deployment removed first when it ran."""
    cluster.use(GPU_OPERATOR)
    cluster.reset()
    return cluster
