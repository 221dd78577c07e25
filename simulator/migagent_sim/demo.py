"""`migagent demo`: watch the agent reconfigure a simulated 8-GPU node, end to end, in seconds.

Everything runs in this process on loopback: a fake kube-apiserver, a fake kubelet (PodResources
on a unix socket, a device plugin that re-advertises), FakeNvml with 8x H100-80GB-SXM in layout
all-1g.10gb, and the real agent. Workload pods run on several GPUs; one is guarded by a
PodDisruptionBudget that allows no disruption at first. The node is labelled `all-balanced`, and
the demo prints what the agent does as it happens, then each GPU's layout before and after (which
GPUs changed), the advertised resources before and after, and the commands that reproduce both
layouts with the shipped layout file. With --mig-strategy single, the plugin cannot advertise a
layout that mixes profiles, so the agent first refuses `all-balanced` with nothing touched, and the
node is then labelled `all-3g.40gb`. With --time-slicing N the plugin replicates every MIG resource N
times (its sharing config in a ConfigMap the agent reads), so the node advertises instances x N
(`nvidia.com/mig-1g.10gb: 112` for 56 instances x 2; `.shared` with --rename-shared).
Exit 0 on success within --timeout, 1 otherwise; Ctrl-C (130) and SIGTERM (143) stop it with its servers
stopped and its temporary directories removed.

`migagent demo rollout` is the pool-level show instead (demo_rollout.py): six such nodes rolled to a
new layout by `migagent rollout` in waves, one made to fail, the halt, and the resume.
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import signal
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from migagent.attempt.report.fleet_rows import gpu_holdings
from migagent.cli.agent import add_metrics_arguments, observability_from_args
from migagent.cli.commands import summary
from migagent.cli.conflicts import ConflictingFlagsError, given
from migagent.cli.values import COUNT, POSITIVE_SECONDS, SECONDS
from migagent.clock import SystemClock
from migagent.layout.strategy import MIG_STRATEGIES, MigStrategy
from migagent.node.names import (
    CONDITION_TYPE,
    DESIRED_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    OBSERVED_ANNOTATION,
    deploy_label,
)
from migagent.plumbing.health import HealthState
from migagent_sim.cluster import (
    PDB_BLOCKING_FOR_NOW,
    RunningAgent,
    SimCluster,
    SimClusterConfig,
    time_slicing_config,
)

# The demo is a real-time show: one wall clock, through the seam like everything else.
_CLOCK = SystemClock()

JsonDict = dict[str, Any]
# Both are configs of the shipped configs/mig-layouts/mig-layouts.yaml (the demo's own file holds the same
# entries for H100, tests/integration/agent/test_cli.py checks it), so `plan` reproduces the change.
START_LAYOUT = "all-1g.10gb"
SHIPPED_LAYOUTS = "configs/mig-layouts/mig-layouts.yaml"
# The single strategy advertises only uniform nodes: it first shows `all-balanced` refused with
# nothing touched, then moves every GPU to one profile.
TARGET_LAYOUT: dict[MigStrategy, str] = {
    MigStrategy.MIXED: "all-balanced",
    MigStrategy.SINGLE: "all-3g.40gb",
    MigStrategy.NONE: "all-balanced",
}
REFUSED_LAYOUT: dict[MigStrategy, str] = {MigStrategy.SINGLE: "all-balanced"}
PDB_RELEASE_AFTER_S = 1.5
_POLL_S = 0.05
# (namespace, name, GPU, slot of its 1g.10gb GI, labels)
WORKLOADS: tuple[tuple[str, str, int, int, dict[str, str]], ...] = (
    ("ml", "train-0", 0, 0, {"app": "train"}),
    ("ml", "train-1", 0, 4, {"app": "train"}),
    ("ml", "inference-0", 1, 5, {"app": "inference"}),
    ("ml", "notebook-0", 2, 1, {"app": "notebook"}),
    ("ml", "train-2", 5, 2, {"app": "train"}),
    ("ml", "train-3", 5, 6, {"app": "train"}),
    ("ml", "batch-0", 7, 3, {"app": "batch"}),
)


@dataclass
class _Watcher:
    """One printed line per change: node changes and pod deletions as the fake API server commits
    them (its listeners), Events and refused evictions as the main loop polls for them."""

    cluster: SimCluster
    started: float = field(default_factory=_CLOCK.monotonic)
    seen: dict[str, object] = field(default_factory=dict)
    events_seen: int = 0
    requests_seen: int = 0
    blocked_seen: set[str] = field(default_factory=set)
    first_block_at: float | None = None
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    lock: threading.Lock = field(default_factory=threading.Lock)
    quiet: bool = True
    agent: DaemonSetAgent | None = None

    def say(self, text: str) -> None:
        if not self.quiet:
            self.lines.put(f"[{_CLOCK.monotonic() - self.started:5.1f}s] {text}")

    def listen(self) -> None:
        """Take in the starting state without printing it, then follow every change."""
        self.node_changed(self.cluster.node())
        self.events_seen = len(self.cluster.api.events())
        self.quiet = False
        self.cluster.api.on_node_changed(self.node_changed)
        self.cluster.api.on_pod_deleted(self.pod_deleted)

    def node_changed(self, node: JsonDict) -> None:
        labels = node["metadata"].get("labels", {})
        conditions = node.get("status", {}).get("conditions", [])
        condition = next((c for c in conditions if c["type"] == CONDITION_TYPE), None)
        with self.lock:
            self._changed("state", labels.get(MIG_CONFIG_STATE_LABEL), lambda v: f"label {MIG_CONFIG_STATE_LABEL}={v}")
            if condition is not None:
                summary = f"{condition['status']}/{condition['reason']}: {condition.get('message', '')}"
                self._changed("condition", summary, lambda v: f"condition {CONDITION_TYPE} {v}")
            cordoned = bool(node["spec"].get("unschedulable"))
            self._changed("cordon", cordoned, lambda v: "node cordoned" if v else "node uncordoned")
            plugin = labels.get(deploy_label("device-plugin"))
            self._changed("plugin", plugin, lambda v: f"label {deploy_label('device-plugin')}={v}")

    def pod_deleted(self, pod: JsonDict) -> None:
        self.say(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']} is gone")

    def poll(self) -> JsonDict:
        if self.agent is not None:
            self.agent.keep_running(self.say)
        self._print_events()
        self._print_blocked_evictions()
        while not self.lines.empty():
            print(self.lines.get(), flush=True)
        return self.cluster.node()

    def _changed(self, key: str, value: object, describe: Callable[[Any], str]) -> None:
        if self.seen.get(key, object()) != value:
            self.seen[key] = value
            self.say(describe(value))

    def _print_events(self) -> None:
        events = self.cluster.api.events()
        for event in events[self.events_seen :]:
            kind = "Warning" if event.get("type") == "Warning" else "Normal"
            self.say(f"event {kind} {event.get('reason')}: {event.get('message') or event.get('note')}")
        self.events_seen = len(events)

    def _print_blocked_evictions(self) -> None:
        requests = self.cluster.api.requests
        fresh, self.requests_seen = requests[self.requests_seen :], len(requests)
        for request in fresh:
            if request.subresource == "eviction" and request.status == 429 and request.name not in self.blocked_seen:
                self.blocked_seen.add(str(request.name))
                self.first_block_at = self.first_block_at or _CLOCK.monotonic()
                self.say(f"eviction of {request.namespace}/{request.name} refused (429): its PodDisruptionBudget"
                         " allows no disruption; the agent keeps retrying")


@dataclass
class DaemonSetAgent:
    """The demo's agent as its DaemonSet keeps it: an agent that stops on its own (it could not renew the
    node's Lease for a whole duration, as on a heavily loaded machine, so someone else may own the node)
    exits, and the kubelet starts it again; the successor finishes the change from the node's journal."""

    start: Callable[[], RunningAgent]
    running: RunningAgent | None = None
    restarts: int = 0

    def __post_init__(self) -> None:
        self.running = self.start()

    def keep_running(self, say: Callable[[str], None]) -> None:
        if self.running is not None and not self.running.alive:
            self.running.stop()  # its label source still watches: a restarted pod starts a fresh one
            self.restarts += 1
            say(f"the agent stopped on its own; restarted as its DaemonSet's pod would be (restart {self.restarts})")
            self.running = self.start()


def _setup(cluster: SimCluster) -> dict[str, str]:
    """Start the workloads and the PDB; returns pod name -> where it runs."""
    where: dict[str, str] = {}
    for namespace, name, gpu, slot, labels in WORKLOADS:
        uuid = cluster.mig_uuid(gpu, slot)
        cluster.kubelet.run_workload(namespace, name, mig_uuid=uuid, labels=labels)
        where[f"{namespace}/{name}"] = f"GPU {gpu}, 1g.10gb at slot {slot} ({uuid})"
    cluster.api.add_pdb("ml", "inference-pdb", match_labels={"app": "inference"}, disruptions_allowed=0)
    cluster.api.set_pdb_status("ml", "inference-pdb", PDB_BLOCKING_FOR_NOW)
    return where


def _start_workloads(cluster: SimCluster, strategy: MigStrategy) -> dict[str, str]:
    """_setup, said. With strategy none the plugin hands out whole GPUs, and a process on a GPU in MIG mode
    runs on one of its MIG devices, which the simulated kubelet cannot give a whole-GPU pod: no pods then."""
    if strategy is MigStrategy.NONE:
        print("  no workload pods: the device plugin advertises whole GPUs (nvidia.com/gpu), not MIG devices")
        return {}
    where = _setup(cluster)
    for pod, place in where.items():
        print(f"  workload {pod} on {place}")
    print("  PodDisruptionBudget ml/inference-pdb guards ml/inference-0 and allows 0 disruptions for now")
    return where


def _wait_for_state(cluster: SimCluster, watcher: _Watcher, layout: str, deadline: float) -> bool:
    released = False
    while _CLOCK.monotonic() < deadline:
        node = watcher.poll()
        labels, annotations = node["metadata"].get("labels", {}), node["metadata"].get("annotations", {})
        applied = str(watcher.seen.get("condition", "")).startswith("True/Applied")
        wanted = layout in annotations.get(DESIRED_ANNOTATION, "")
        if applied and wanted and labels.get(MIG_CONFIG_STATE_LABEL) == "success":
            return True
        blocked_for = _CLOCK.monotonic() - watcher.first_block_at if watcher.first_block_at else 0.0
        if not released and blocked_for > PDB_RELEASE_AFTER_S:
            cluster.api.set_pdb_disruptions_allowed("ml", "inference-pdb", 1)
            watcher.say("(demo) the other inference replica is ready: inference-pdb now allows 1 disruption")
            released = True
        _CLOCK.sleep(_POLL_S)
    return False


def _wait_for_refusal(watcher: _Watcher, deadline: float) -> bool:
    """Until the agent reports `failed` for the label just set (it refuses before touching anything)."""
    while _CLOCK.monotonic() < deadline:
        node = watcher.poll()
        if node["metadata"].get("labels", {}).get(MIG_CONFIG_STATE_LABEL) == "failed":
            return True
        _CLOCK.sleep(_POLL_S)
    return False


def _show_refusal(cluster: SimCluster, watcher: _Watcher, layout: str, deadline: float) -> bool:
    before, running = cluster.kubelet.plugin_resources(), len(cluster.kubelet.workloads())
    watcher.say(f"admin: kubectl label node {cluster.config.node_name} {MIG_CONFIG_LABEL}={layout} --overwrite")
    cluster.label(layout)
    if not _wait_for_refusal(watcher, deadline):
        print(f"the agent did not refuse {layout} in time", file=sys.stderr)
        return False
    untouched = cluster.kubelet.plugin_resources() == before and len(cluster.kubelet.workloads()) == running
    cordoned = bool(cluster.node()["spec"].get("unschedulable"))
    print(f"  {layout} refused: {'nothing on the node changed' if untouched and not cordoned else 'NODE CHANGED'}"
          f" ({running} workload pods still running, node {'cordoned' if cordoned else 'not cordoned'})")
    return untouched and not cordoned


def _print_table(before: dict[str, int], after: dict[str, int]) -> None:
    names = sorted(set(before) | set(after))
    width = max(len(n) for n in names) if names else 10
    print(f"\n  {'advertised resource':<{width}}  before  after")
    for name in names:
        print(f"  {name:<{width}}  {before.get(name, 0):>6}  {after.get(name, 0):>5}")


def _observed(cluster: SimCluster) -> str:
    return str(cluster.node()["metadata"].get("annotations", {}).get(OBSERVED_ANNOTATION, "[]"))


def _print_gpus(before: str, after: str) -> None:
    """Each GPU's MIG devices before and after, from the agent's migagent.io/observed annotation; a
    GPU changed when any of its GPU instances (profile, placement, compute instances) did."""
    raw_before = {gpu["index"]: gpu for gpu in json.loads(before)}
    raw_after = {gpu["index"]: gpu for gpu in json.loads(after)}
    held_before = {gpu.index: gpu.describe() for gpu in gpu_holdings(before) or ()}
    held_after = {gpu.index: gpu.describe() for gpu in gpu_holdings(after) or ()}
    width = max((len(text) for text in held_before.values()), default=6)
    print(f"\n  {'GPU':<3}  {'before':<{width}}  after")
    changed = []
    for index in sorted(held_after):
        old, new = raw_before.get(index, {}), raw_after.get(index, {})
        differs = old != new
        changed += [index] if differs else []
        kept = sum(1 for gi in new.get("gpu_instances", []) if gi in old.get("gpu_instances", []))
        mark = f"  (kept {kept} GPU instance(s) in place)" if differs else "  (unchanged)"
        print(f"  {index:<3}  {held_before.get(index, '-'):<{width}}  {held_after[index]}{mark}")
    print(f"  GPUs changed: {', '.join(map(str, changed)) or 'none'}")


def _print_reproduction(cluster: SimCluster, target: str) -> None:
    spec, shipped = cluster.config.spec, SHIPPED_LAYOUTS
    print(f"\n  the same layouts from the shipped file, on a simulated node of your own:"
          f"\n    .venv/bin/migagent apply --simulate {spec} --state node.json -f {shipped} -c {START_LAYOUT}"
          f"\n    .venv/bin/migagent plan  --state node.json -f {shipped} -c {target}")


def _print_pods(cluster: SimCluster, where: dict[str, str]) -> None:
    running = {f"{w.namespace}/{w.name}" for w in cluster.kubelet.workloads()}
    if where:
        print("\n  workload pods:")
    for pod, place in where.items():
        fate = "still running" if pod in running else "evicted (its GPU instance was destroyed)"
        print(f"    {pod:<16} {fate:<42} was on {place}")


def _print_requests(cluster: SimCluster, since: int) -> None:
    counts = Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}" for r in cluster.api.requests[since:]
    )
    listing = ", ".join(f"{n} {what}" for what, n in counts.most_common())
    print(f"\n  API requests during the change: {sum(counts.values())} ({listing})")


NODE_DEMO_FLAGS = ("--mig-strategy", "--time-slicing", "--rename-shared", "--metrics-port", "--metrics-address",
                   "--linger")


def _pool_demo(args: argparse.Namespace) -> int:
    """The pool-level scenarios, each in its own module (only the one asked for is imported)."""
    ignored = [flag for flag in NODE_DEMO_FLAGS if given(args, flag)]
    if ignored:  # refused, not silently ignored: the pool demos run their own nodes
        them = "it" if len(ignored) == 1 else "them"
        raise ConflictingFlagsError(f"{', '.join(ignored)}: only the node demo (`migagent demo`) takes {them};"
                                    f" `migagent demo {args.scenario}` takes --timeout")
    if args.scenario == "rollout":
        from migagent_sim.demo_rollout import run_rollout_demo  # noqa: PLC0415 - only this scenario needs it

        return run_rollout_demo(args)
    from migagent_sim.demo_autopilot import run_autopilot_demo  # noqa: PLC0415 - only this scenario needs it

    return run_autopilot_demo(args)


class DemoTerminated(BaseException):
    """SIGTERM arrived: raised in the main thread, like KeyboardInterrupt, so every `with` unwinds. A
    BaseException, so that no `except Exception` on the way swallows it."""


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM (`kill`, `timeout`, a container's stop) ends the demo as Ctrl-C does: its servers stop and
    its temporary directory is removed, which the signal's default action would leave behind."""
    if threading.current_thread() is not threading.main_thread():  # Python allows handlers only there
        yield
        return

    def terminated(_signum: int, _frame: FrameType | None) -> None:
        raise DemoTerminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _demo_command(args: argparse.Namespace) -> int:
    try:
        with _sigterm_unwinds():
            return _run_demo(args)
    except DemoTerminated:
        print("migagent demo: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM


def _run_demo(args: argparse.Namespace) -> int:
    if args.scenario != "node":
        return _pool_demo(args)
    for name in ("urllib3.connectionpool", "kubernetes.client.rest", "migagent.sim"):
        logging.getLogger(name).setLevel(logging.ERROR)
    strategy = MigStrategy(args.mig_strategy)
    target = TARGET_LAYOUT[strategy]
    config = SimClusterConfig(mig_strategy=strategy)
    if args.time_slicing is not None:
        shared = SHARED_RESOURCES[strategy]
        plugin_config = time_slicing_config(args.time_slicing, resources=shared, rename_by_default=args.rename_shared)
        config = replace(config, plugin_configs={"any": plugin_config}, plugin_default_config="any")
    with tempfile.TemporaryDirectory(prefix="migagent-demo-") as workdir, SimCluster(Path(workdir), config) as cluster:
        print(f"migagent demo: node {cluster.config.node_name} with {cluster.config.spec}, fake API server at"
              f" {cluster.api.url}, device plugin MIG strategy {strategy}{_sharing_note(args)}\n"
              f"  GPUs start in layout {START_LAYOUT}:"
              f" advertised {', '.join(f'{k}: {v}' for k, v in cluster.kubelet.plugin_resources().items())}")
        where = _start_workloads(cluster, strategy)
        watcher = _Watcher(cluster)
        watcher.listen()
        health = HealthState(_CLOCK)
        listener, stop_observability, metrics_url = observability_from_args(args, health)
        if metrics_url is not None:
            print(f"  metrics, health and readiness at {metrics_url}/metrics, /healthz, /readyz")
        watcher.say("agent started")
        watcher.agent = DaemonSetAgent(lambda: cluster.start_agent(listener=listener, health=health))
        deadline = _CLOCK.monotonic() + args.timeout
        if not _wait_for_state(cluster, watcher, START_LAYOUT, deadline):
            print("the agent did not report the starting layout in time", file=sys.stderr)
            return 1
        before = cluster.kubelet.plugin_resources()
        refused = REFUSED_LAYOUT.get(strategy)
        if refused is not None and not _show_refusal(cluster, watcher, refused, deadline):
            return 1
        observed_before = _observed(cluster)
        since = len(cluster.api.requests)
        node_name = cluster.config.node_name
        watcher.say(f"admin: kubectl label node {node_name} {MIG_CONFIG_LABEL}={target} --overwrite")
        cluster.label(target)
        ok = _wait_for_state(cluster, watcher, target, deadline)
        watcher.poll()
        _print_gpus(observed_before, _observed(cluster))
        _print_table(before, cluster.kubelet.plugin_resources())
        _print_pods(cluster, where)
        _print_requests(cluster, since)
        _print_reproduction(cluster, target)
        if not ok:
            print(f"\nthe node did not reach {target} within {args.timeout:g}s", file=sys.stderr)
            return 1
        print(f"\n{target} applied in {_CLOCK.monotonic() - watcher.started:.1f}s of demo time")
        if args.linger > 0:
            print(f"metrics stay up for {args.linger:g}s more")
            _CLOCK.sleep(args.linger)
        stop_observability()
        return 0


# What --time-slicing replicates: every profile the demo's layouts use (single: the one resource).
SHARED_RESOURCES: dict[MigStrategy, tuple[str, ...]] = {
    MigStrategy.MIXED: ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"),
    MigStrategy.SINGLE: ("nvidia.com/gpu",),
    MigStrategy.NONE: ("nvidia.com/gpu",),
}


def _sharing_note(args: argparse.Namespace) -> str:
    if args.time_slicing is None:
        return ""
    renamed = ", renamed <name>.shared" if args.rename_shared else ""
    return f", time-slicing x{args.time_slicing}{renamed} (ConfigMap read by the agent)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help=summary("demo"))
    parser.add_argument(
        "scenario", nargs="?", choices=("node", "rollout", "autopilot"), default="node",
        help="node (default): one node reconfigured; rollout: a 6-node pool rolled in waves, a halt and a resume;"
        " autopilot: demand shifts across a pool and the layouts follow it",
    )
    parser.add_argument("--timeout", type=POSITIVE_SECONDS, default=45.0, metavar="SECONDS",
                        help="give up after this long")
    parser.add_argument(
        "--mig-strategy", choices=MIG_STRATEGIES, default=MigStrategy.MIXED.value,
        help="the simulated device plugin's MIG strategy, and the agent's (single: nvidia.com/gpu per MIG device)",
    )
    parser.add_argument(
        "--time-slicing", type=COUNT, metavar="REPLICAS",
        help="the simulated device plugin replicates each MIG resource this many times (its sharing config in a"
        " ConfigMap the agent reads): 7 1g.10gb instances x 2 advertise nvidia.com/mig-1g.10gb: 14",
    )
    parser.add_argument(
        "--rename-shared", action="store_true",
        help="with --time-slicing: renameByDefault, so replicated resources are advertised as <name>.shared",
    )
    add_metrics_arguments(parser)
    parser.add_argument(
        "--linger", type=SECONDS, default=0.0, metavar="SECONDS",
        help="keep the simulated node and /metrics up this long after success (to scrape it)",
    )
    parser.set_defaults(handler=_demo_command)
