"""`migagent demo rollout`: a 6-node pool rolled to a new layout in waves, one node made to fail, the
halt, and the resume once the fault is cleared: `migagent rollout` end to end, in seconds.

Six simulated nodes (2x H100-80GB each, layout all-1g.10gb, each its own FakeNvml, fake kubelet
and agent) behind one fake API server. Workload pods run on some GPU instances; two inference
replicas on different nodes share a PodDisruptionBudget that allows one disruption at a time. The
demo runs the real commands in this process: `rollout plan`, then `rollout start` with a canary,
--max-unavailable 4 GPUs and --failure-budget 1 while node 4's GPUs refuse to create GPU
instances (an NVML fault: the GPU fell off the bus), which halts the rollout with that node's reason; then the fault is
cleared, `rollout resume` drives it to the end, and `rollout status` shows the state object.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import pynvml

from migagent.cli import build_parser
from migagent.clock import SystemClock
from migagent.errors import MigAgentError
from migagent.plumbing.logging import configure_logging
from migagent_sim.pool import PoolMonitor, ReplicaScheduler, SimPool, SimPoolConfig

_CLOCK = SystemClock()
TARGET = "all-balanced"
FAILING_NODE = "gpu-h100-4"
ROLLOUT = "demo"
# (node, pod, GPU, slot of its 1g.10gb GI, labels); all-balanced keeps the GIs at slots 0 and 1.
WORKLOADS: tuple[tuple[str, str, int, int, dict[str, str]], ...] = (
    ("gpu-h100-1", "train-0", 0, 0, {"app": "train"}),
    ("gpu-h100-2", "inference-0", 0, 4, {"app": "inference"}),
    ("gpu-h100-3", "inference-1", 1, 5, {"app": "inference"}),
    ("gpu-h100-3", "train-1", 1, 1, {"app": "train"}),
    ("gpu-h100-5", "batch-0", 0, 6, {"app": "batch"}),
    ("gpu-h100-6", "notebook-0", 1, 0, {"app": "notebook"}),
)


def _wait_reported(pool: SimPool, timeout_s: float) -> bool:
    """Until every agent reports success and its pods per GPU instance (what the rollout plans from)."""
    deadline = _CLOCK.monotonic() + timeout_s
    wanted = {(node, f"ml/{pod}") for node, pod, *_ in WORKLOADS}
    while _CLOCK.monotonic() < deadline:
        seen = {
            (name, pod)
            for name in pool.nodes
            for pod in _reported_pods(pool, name)
        }
        states = {pool.labels(name).get("nvidia.com/mig.config.state") for name in pool.nodes}
        if wanted <= seen and states == {"success"}:
            return True
        _CLOCK.sleep(0.1)
    return False


def _reported_pods(pool: SimPool, name: str) -> list[str]:
    import json  # noqa: PLC0415

    text = pool.node(name)["metadata"].get("annotations", {}).get("migagent.io/observed", "[]")
    return [pod for gpu in json.loads(text) for gi in gpu["gpu_instances"] for pod in gi.get("pods", [])]


def migagent_main(argv: list[str]) -> int:
    """Run a `migagent` command line here, as `migagent` would (one line for an error), keeping the
    demo's quiet logging (the agents' own warnings would drown the rollout's story)."""
    args = build_parser(argv).parse_args(argv)
    try:
        code: int = args.handler(args)
    except MigAgentError as error:
        print(f"migagent {' '.join(argv[:2])}: {error}")
        return 1
    return code


def _scheduler(pool: SimPool) -> ReplicaScheduler:
    """Replacements for the evicted inference replicas, so inference-pdb allows a disruption again."""
    replicas = [(node, pod, labels) for node, pod, _, _, labels in WORKLOADS if labels["app"] == "inference"]
    return ReplicaScheduler(
        pool, replicas, say=lambda text: print(f"(demo) {text}: inference-pdb allows 1 again", flush=True)
    )


def _say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def run_rollout_demo(args: argparse.Namespace) -> int:
    configure_logging(level=logging.CRITICAL)
    for name in ("urllib3.connectionpool", "kubernetes.client.rest", "migagent.sim"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="migagent-demo-rollout-") as workdir:
        pool = SimPool(Path(workdir), SimPoolConfig(nodes=6))
        with pool:
            _say(f"a pool of {len(pool.nodes)} nodes ({pool.config.spec} each, layout {pool.config.start_layout},"
                 f" label {pool.selector}) behind a fake API server at {pool.api.url}")
            pool.run_workloads(WORKLOADS)
            pool.api.add_managed_pdb("ml", "inference-pdb", match_labels={"app": "inference"}, min_available=1)
            for node, pod, gpu, slot, _ in WORKLOADS:
                print(f"  pod ml/{pod} on {node} GPU {gpu} (1g.10gb at slot {slot})")
            print("  PodDisruptionBudget ml/inference-pdb: minAvailable 1 of the 2 inference pods")
            if not _wait_reported(pool, args.timeout):
                print("the agents did not report their nodes in time")
                return 1
            monitor = PoolMonitor(pool)
            server = ["--api-server", pool.api.url]
            _say(f"migagent rollout plan -l {pool.selector} -c {TARGET} --max-unavailable 4")
            migagent_main(["rollout", "plan", "-l", pool.selector, "-c", TARGET, "--max-unavailable", "4", *server])

            _say(f"(demo) {FAILING_NODE}: creating a GPU instance fails (NVML_ERROR_GPU_IS_LOST) until cleared")
            pool.nodes[FAILING_NODE].fake.sim_inject_fault(
                "nvmlDeviceCreateGpuInstanceWithPlacement", pynvml.NVML_ERROR_GPU_IS_LOST, times=None
            )
            flags = ["--max-unavailable", "4", "--canary", "1", "--soak", "1", "--failure-budget", "1",
                     "--poll", "0.1", "-o", "table", *server]
            _say(f"migagent rollout start {ROLLOUT} -l {pool.selector} -c {TARGET} --max-unavailable 4 --canary 1"
                 " --soak 1 --failure-budget 1")
            with _scheduler(pool):
                halted = migagent_main(["rollout", "start", ROLLOUT, "-l", pool.selector, "-c", TARGET, *flags])
            print(f"(exit status {halted})")

            _say(f"(demo) the fault on {FAILING_NODE} is cleared")
            pool.nodes[FAILING_NODE].fake.sim_clear_faults()
            _say(f"migagent rollout resume {ROLLOUT}")
            with _scheduler(pool):
                finished = migagent_main(["rollout", "resume", ROLLOUT, "--poll", "0.1", "-o", "table", *server])
            _say(f"migagent rollout status {ROLLOUT}")
            migagent_main(["rollout", "status", ROLLOUT, *server])
            print(f"\n  each node's layout label changed {sorted(set(monitor.relabels.values()))} time(s);"
                  f" at most {monitor.max_unavailable_gpus} GPUs were out of service at once (budget 4)")
            ok = halted == 1 and finished == 0
            print("\nrollout demo " + ("succeeded" if ok else "FAILED"))
            return 0 if ok else 1


__all__ = ["run_rollout_demo"]
