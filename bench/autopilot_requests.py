"""The autopilot's API requests, counted by the real kube-apiserver: `python -m bench.autopilot_requests`.

    python -m bench.autopilot_requests [--nodes 100] [--window 240]

etcd, kube-apiserver and kube-controller-manager v1.37.2 (scripts/control_plane.sh, as tests/realkube
starts them) with an audit log of every request. `--nodes` Nodes of 8 H100 in all-1g.10gb, opted in,
whose agents are models (simulator/migagent_sim/model_node.py: a relabelled node reports its change and,
5 s later, the new layout, as the agent writes Nodes; their writes are an admin's, not counted). The
production `Autopilot` looks every 15 s (its default) through `DemandApi`, as a client of its own, in
two ways: with its view of nodes, pods and budgets kept by watches (`autopilot run` since issue 35), and
re-listing them at every look (before). Three windows of `--window` seconds: both idle (no pod waits),
then each alone, from every node back in all-1g.10gb, under changing demand: every 60 s the pods waiting
are replaced by 8 asking the next of 3g.40gb, 7g.80gb, 1g.10gb, 2g.20gb (nothing binds them), with
--persist 30, --cooldown 120 and --max-changes-per-hour 10, so it changes, holds and drives rollouts.
Per minute: each way's requests, and which. Projected to 5,000 nodes: no request here is made once per
node (the Events of a decision are one per node it names, bounded by the changes the guardrails allow),
so the counts stay; what grows is what a list carries (50 times the nodes): the watched view lists the
nodes and pods once, but while it drives a rollout the rollout's driver lists the opted-in nodes at each
look, as `migagent rollout` does (the `list nodes` of the demand rows beyond the first).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.idle_fleet import _requests, on_control_plane
from bench.tables import Cell, render_table
from migagent.autopilot.controller import Autopilot, RolloutBudgets
from migagent.autopilot.decide import OPT_IN_SELECTOR, Guardrails
from migagent.clock import SystemClock
from migagent.kube.demand_api import DemandApi
from migagent.layout.parse import parse_layout
from migagent.node.names import LAYOUTS_CONFIGMAP_KEY, MIG_CONFIG_LABEL
from migagent.rollout.budget import MaxUnavailable
from migagent_sim.model_node import ModelNode
from tests.realkube.control_plane import ControlPlane, Identity, binaries_dir
from tests.waiting import eventually

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = (REPO / "configs/mig-layouts/mig-layouts.yaml").read_text(encoding="utf-8")
WAVES = ("nvidia.com/mig-3g.40gb", "nvidia.com/mig-7g.80gb", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb")
POLL_S = 15.0
NODES_PROJECTED = 5000
JsonDict = dict[str, Any]


class _Quiet:
    def event(self, event: str, **fields: object) -> None:
        return None

    def progress(self, *_: object) -> None:
        return None


class ModelAgents:
    """The nodes' agents as models: a relabelled node reports its change, then its new layout."""

    def __init__(self, plane: ControlPlane, nodes: int) -> None:
        self.admin = plane.rest(plane.admin)
        self.layout = parse_layout(LAYOUTS, source="mig-layouts.yaml")
        self.nodes = {f"gpu-{i:04d}": ModelNode.empty(f"gpu-{i:04d}", "H100-80GB-SXM", 8,
                                                       {"migagent.io/autopilot": "enabled"}) for i in range(nodes)}
        for node in self.nodes.values():
            node.start_change(self.layout, "all-1g.10gb", done_at=0.0)
            node.finish_change(0.0)
            plane.ensure_node(node.name)
            self._write(node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="model-agents", daemon=True)

    def _write(self, model: ModelNode) -> None:
        view = model.view()
        stored = self.admin.get(f"/api/v1/nodes/{model.name}")
        stored["metadata"]["labels"] = {**view.labels, "kubernetes.io/hostname": model.name}
        stored["metadata"]["annotations"] = dict(view.annotations)
        stored["spec"]["unschedulable"] = view.unschedulable
        stored = self.admin.replace(f"/api/v1/nodes/{model.name}", stored)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        stored["status"] = {
            "allocatable": {k: str(v) for k, v in view.allocatable.items()},
            "capacity": {k: str(v) for k, v in view.allocatable.items()},
            "conditions": [{"type": c.type, "status": c.status, "reason": c.reason, "message": "",
                            "lastTransitionTime": now, "lastHeartbeatTime": now} for c in view.conditions],
        }
        self.admin.replace(f"/api/v1/nodes/{model.name}/status", stored)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            now = time.monotonic()
            for item in self.admin.get("/api/v1/nodes", labelSelector=OPT_IN_SELECTOR)["items"]:
                model = self.nodes[item["metadata"]["name"]]
                wanted = item["metadata"].get("labels", {}).get(MIG_CONFIG_LABEL)
                if wanted not in (model.layout, model.target):
                    model.start_change(self.layout, wanted, done_at=now + 5.0)
                    self._write(model)
                elif model.finish_change(now):
                    self._write(model)

    def reset(self) -> None:
        """Every node back to all-1g.10gb, reported so: each demand window starts where the first did (else
        the second autopilot finds the first one's changes serving its pods, and has nothing to decide)."""
        for name in self.nodes:
            self.admin.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {MIG_CONFIG_LABEL: "all-1g.10gb"}}})
        eventually(lambda: all(m.layout == "all-1g.10gb" and m.target is None for m in self.nodes.values()),
                   "every node back in all-1g.10gb")

    def __enter__(self) -> ModelAgents:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _demand(admin: Any, stop: threading.Event) -> None:
    """Every 60 s, the pods waiting replaced by 8 asking the next profile of WAVES."""
    for wave in range(10**6):
        for pod in admin.get("/api/v1/namespaces/ml/pods")["items"]:
            admin.delete(f"/api/v1/namespaces/ml/pods/{pod['metadata']['name']}")
        resource = WAVES[wave % len(WAVES)]
        for index in range(8):
            admin.create("/api/v1/namespaces/ml/pods", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"wave-{wave}-{index}"},
                "spec": {"containers": [{"name": "main", "image": "busybox",
                                         "resources": {"limits": {resource: "1"}, "requests": {resource: "1"}}}],
                         "tolerations": [{"operator": "Exists"}], "schedulerName": "none"},
            })
        if stop.wait(60.0):
            return


@contextmanager
def _looking(plane: ControlPlane, user: str, *, watched: bool, guardrails: Guardrails) -> Iterator[None]:
    """An autopilot as `user` in namespace `user`, looking every POLL_S until the block ends."""
    plane.rest(plane.admin).create("/api/v1/namespaces", {"metadata": {"name": user}})
    plane.rest(plane.admin).create(f"/api/v1/namespaces/{user}/configmaps", {
        "metadata": {"name": "migagent-layouts"}, "data": {LAYOUTS_CONFIGMAP_KEY: LAYOUTS}})
    identity = Identity(user, plane.pki.issue(user, user, organizations=("system:masters",)))
    clock = SystemClock()
    api = DemandApi(plane.api_client(identity), clock=clock, namespace=user, layouts_namespace=user)
    if watched:
        api.watch(OPT_IN_SELECTOR)
    autopilot = Autopilot(api, guardrails, clock=clock, listener=_Quiet(),
                          budgets=RolloutBudgets(max_unavailable=MaxUnavailable(16)))
    stop = threading.Event()
    thread = threading.Thread(target=_loop, args=(autopilot.step, stop), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        api.close()


def _loop(step: Callable[[], object], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            step()
        except Exception as error:
            logging.getLogger(__name__).error("look failed: %s", error)
        stop.wait(POLL_S)


def measure(nodes: int, window_s: float, workdir: Path) -> str:
    audit = workdir / "audit.log"
    plane = ControlPlane(binaries_dir(), workdir / "plane", audit_log=audit).start()
    counted: dict[str, Counter[str]] = {}
    demand = Guardrails(persist_s=30.0, cooldown_s=120.0, max_changes_per_hour=10)
    try:
        plane.rest(plane.admin).create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
        with ModelAgents(plane, nodes) as agents:
            offset = audit.stat().st_size
            with _looking(plane, "watched-idle", watched=True, guardrails=demand), \
                    _looking(plane, "relisted-idle", watched=False, guardrails=demand):
                time.sleep(window_s)
            counted |= _requests(audit, offset, {"watched-idle", "relisted-idle"})
            for user, watched in (("watched-demand", True), ("relisted-demand", False)):
                agents.reset()
                stop = threading.Event()
                driver = threading.Thread(target=_demand, args=(plane.rest(plane.admin), stop), daemon=True)
                offset = audit.stat().st_size
                with _looking(plane, user, watched=watched, guardrails=demand):
                    driver.start()
                    time.sleep(window_s)
                    stop.set()
                    driver.join()
                counted |= _requests(audit, offset, {user})
    finally:
        plane.stop()
    return _table(counted, nodes, window_s)


def _table(counted: dict[str, Counter[str]], nodes: int, window_s: float) -> str:
    rows: list[list[Cell]] = []
    for user, seen in counted.items():
        per_minute = sum(seen.values()) * 60.0 / window_s
        lists = sum(n for what, n in seen.items() if what.startswith("list "))
        rows.append([user, f"{per_minute:.1f}", f"{lists * 60.0 / window_s:.1f}",
                     ", ".join(f"{n} {what}" for what, n in sorted(seen.items())) or "none"])
    headers = ["autopilot", f"requests/min, {nodes} nodes", "of which lists", "seen"]
    return render_table(headers, rows) + (
        f"\ncounted in kube-apiserver's audit log over {window_s:g} s each (a watch counts once, when opened);"
        f" looks every {POLL_S:g} s. At {NODES_PROJECTED} nodes: the same counts (see the module's docstring);"
        f" each list of nodes or pods then carries {NODES_PROJECTED // nodes} times the nodes (a watched autopilot"
        f" lists nodes again only while it drives a rollout)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autopilot_requests", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100, help="simulated nodes (default 100)")
    parser.add_argument("--window", type=float, default=240.0, help="seconds counted per window (default 240)")
    args = parser.parse_args(argv)
    return on_control_plane("autopilot-requests-", lambda tmp: measure(args.nodes, args.window, tmp))


if __name__ == "__main__":
    sys.exit(main())
