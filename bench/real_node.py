"""Real node bench: `python -m bench.real_node [--runs N]`.

Label to outcome for each scenario of tests/realnode, on the real node (the agent's image as it ships,
on the real kubelet and containerd, NVIDIA's device plugin as a DaemonSet pod: tests/realnode/cluster.py)
and, beside it, the same scenario on the simulated kubelet (migagent_sim.cluster.SimCluster: the same
GPUs, layouts and standalone plugin restart, the agent in-process with its fast test options). The
difference is what the simulation does not model: pod and container start, the DaemonSet controller
and scheduler recreating the plugin, the plugin's registration, the kubelet's status updates, the
agent's image starting. Needs what tests/realnode needs (root, the binaries, MIGAGENT_IMAGE_ARCHIVE).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.tables import Cell, render_table
from migagent.node.names import DESIRED_ANNOTATION, MIG_CONFIG_STATE_LABEL
from migagent.plumbing.logging import configure_logging
from migagent_sim.cluster import SimCluster, SimClusterConfig
from tests.realnode import cluster as real

Outcome = tuple[str, float]  # ("success" | "failed", seconds from the label's write)
SIM_CONFIG = SimClusterConfig(
    spec=real.SPEC, layouts_yaml=real.LAYOUTS, start_layout="start", plugin_mode="node-label", labels={},
    plugin_namespace=real.PLUGIN_NS, plugin_labels=dict(real.PLUGIN_LABELS), plugin_daemonset=real.PLUGIN_DS,
)  # fmt: skip


def _outcome(state: Callable[[], str | None], written: float, timeout_s: float = 300) -> Outcome:
    while time.monotonic() - written < timeout_s:
        current = state()
        if current in ("success", "failed"):
            return current, time.monotonic() - written
        time.sleep(0.02)
    raise RuntimeError(f"no outcome within {timeout_s:g}s")


# -- the real node ------------------------------------------------------------------------------


def _reported(node: dict[str, Any]) -> str | None:
    """The agent's outcome for `target`: `failed` (each run starts at `success`), or `success` once its
    desired annotation names `target` (until the agent has seen the new label, `success` is the old one's)."""
    metadata = node["metadata"]
    state = (metadata.get("labels") or {}).get(MIG_CONFIG_STATE_LABEL)
    if state == "failed" or (state == "success" and "target" in metadata["annotations"].get(DESIRED_ANNOTATION, "")):
        return str(state)
    return None


def _real_state(cluster: real.Cluster) -> Callable[[], str | None]:
    def state() -> str | None:
        current = _reported(cluster.node.node())
        if current == "success" and cluster.node.allocatable() != real.TARGET_RESOURCES:
            return None  # the kubelet does not advertise it yet
        return current

    return state


def _real_change(cluster: real.Cluster, during: Callable[[float], None] | None = None) -> Outcome:
    devices = real.mig_devices(cluster.driver.state)
    cluster.label({real.MIG_CONFIG: "target"})
    written = time.monotonic()
    if during is not None:
        real.when_gpus_change(cluster, devices)
        during(written)
    return _outcome(_real_state(cluster), written)


def real_no_pods(cluster: real.Cluster) -> Outcome:
    return _real_change(cluster)


def real_pods(cluster: real.Cluster) -> Outcome:
    real.gpu_pods(cluster)
    return _real_change(cluster)


def real_pdb_for_ever(cluster: real.Cluster) -> Outcome:
    real.guarded_pod(cluster, replicas=1)
    real.budget(cluster, max_unavailable=0)
    return _real_change(cluster)


def real_killed(cluster: real.Cluster) -> Outcome:
    return _real_change(cluster, lambda _: real.kill_agent(cluster))


def real_reboot(cluster: real.Cluster) -> Outcome:
    return _real_change(cluster, lambda _: cluster.node.reboot())


# -- the simulated kubelet ------------------------------------------------------------------------


def _sim_run(workdir: Path, prepare: Callable[[SimCluster], None]) -> Outcome:
    with SimCluster(workdir, SIM_CONFIG) as cluster:
        prepare(cluster)
        options = replace(
            cluster.options(drain_timeout_s=30), restart="node-label", operator_namespace=real.PLUGIN_NS,
            plugin_selector="app.kubernetes.io/name=nvidia-device-plugin", plugin_daemonset=real.PLUGIN_DS,
        )  # fmt: skip
        running = cluster.start_agent(options)
        try:
            _outcome(lambda: cluster.node()["metadata"]["labels"].get(MIG_CONFIG_STATE_LABEL), time.monotonic())
            cluster.label("target")
            written = time.monotonic()
            return _outcome(lambda: _reported(cluster.node()), written)
        finally:
            running.stop()


def sim_pods(cluster: SimCluster) -> None:
    for name, gpu, slot in (("kept", 0, 0), ("changed", 0, 4), ("untouched", 1, 0)):
        cluster.kubelet.run_workload("ml", name, mig_uuid=cluster.mig_uuid(gpu, slot), labels=real.APP)


def sim_pdb_for_ever(cluster: SimCluster) -> None:
    cluster.kubelet.run_workload("ml", "inference-0", mig_uuid=cluster.mig_uuid(0, 4), labels=real.APP)
    cluster.api.add_pdb("ml", "inference", match_labels=real.APP, disruptions_allowed=0)


SCENARIOS: tuple[tuple[str, str, Callable[[real.Cluster], Outcome], Callable[[SimCluster], None] | None], ...] = (
    ("no-pods", "start -> target, no GPU pods", real_no_pods, lambda _: None),
    ("pods", "pods on the kept, the changed and the untouched GPU instance", real_pods, sim_pods),
    ("pdb-for-ever", "a pod on the changed instance under a budget that never allows", real_pdb_for_ever,
     sim_pdb_for_ever),
    ("killed-mid-change", "the agent's container SIGKILLed at the first GPU change", real_killed, None),
    ("reboot-mid-change", "every node process killed at the first GPU change, then restarted", real_reboot, None),
)  # fmt: skip


def _cell(outcomes: Sequence[Outcome]) -> str:
    kinds = {kind for kind, _ in outcomes}
    seconds = sorted(s for _, s in outcomes)
    p95 = seconds[min(len(seconds) - 1, round(0.95 * (len(seconds) - 1)))]
    return f"{'/'.join(sorted(kinds))} {statistics.median(seconds):.1f} / {p95:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_node", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario and side (default 3)")
    args = parser.parse_args(argv)
    image = os.environ.get(real.IMAGE_ENV)
    if not image:
        parser.error(f"set {real.IMAGE_ENV} to the archive scripts/build_image.sh wrote")
    configure_logging(json_logs=False, level=logging.WARNING)
    on_node: dict[str, list[Outcome]] = {}
    started = time.monotonic()
    with real.started_cluster(Path(image)) as cluster:
        up_s = time.monotonic() - started
        for name, _, run_real, _ in SCENARIOS:
            for _ in range(args.runs):
                cluster.reset()
                on_node.setdefault(name, []).append(run_real(cluster))
        cluster.reset()
    sim: dict[str, list[Outcome]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-real-node-") as scratch:
        for name, _, _, prepare in SCENARIOS:
            if prepare is not None:
                sim[name] = [_sim_run(Path(scratch) / f"{name}-{i}", prepare) for i in range(args.runs)]
    rows: list[list[Cell]] = [
        [name, what, _cell(on_node[name]), _cell(sim[name]) if name in sim else "-"] for name, what, _, _ in SCENARIOS
    ]
    headers = ["scenario (2x H100)", "what", "real node: outcome p50 / p95 s", "simulated kubelet: p50 / p95 s"]
    print(render_table(headers, rows))
    print(f"\n{args.runs} runs per scenario and side; the real node (control plane, containerd, kubelet, images,"
          f" agent and plugin) came up in {up_s:.0f} s; all of it took {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
