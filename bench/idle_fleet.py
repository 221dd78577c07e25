"""Idle API cost counted by the real kube-apiserver: `python -m bench.idle_fleet [--fleet 100] [--window 600]`.

etcd and kube-apiserver v1.37.2 (scripts/control_plane.sh, as tests/realkube starts them) with an
audit log of every request; agents built by the production wiring (`wiring.build_agent`) at the
agent's default settings (resync 300 s, Lease 30 s, watch streams of 300 s), each on a node of its
own (one simulated H100 in `all-1g.10gb`, Node allocatable as the device plugin would advertise it).
Two groups run in this one process at the same time, each with its own client identity so the
server's audit log tells them apart: one agent alone, and a fleet of `--fleet` agents. Once every
node reports `success`, the audit log is read for `--window` seconds (two resync periods and two
watch streams by default): requests per agent per minute, beyond the watch each agent keeps open,
and projected to 5000 nodes. Needs the control plane built; prints what it counted.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.tables import Cell, render_table
from migagent.attempt.ports import AgentSettings
from migagent.clock import FakeClock, SystemClock
from migagent.kube.adapter import KubeApi
from migagent.layout.parse import load_layout_file
from migagent.layout.resolve import identity_of, resolve_config
from migagent.node.names import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from migagent.nvml.driver import GpuDriver
from migagent.plumbing.logging import configure_logging
from migagent.reconcile.journal import FileJournal, MemoryJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent.wiring import AgentOptions, build_agent
from migagent_sim.cluster import DEMO_LAYOUTS, GPU_OPERATOR_LABELS, RunningAgent
from migagent_sim.deadline import Deadline
from migagent_sim.fakelib.backend import nvml_for
from migagent_sim.podresources_server import serve_pod_resources
from tests.realkube.control_plane import ControlPlane, Identity, binaries_built, binaries_dir

LAYOUT = "all-1g.10gb"
SPEC = "1xH100-80GB-SXM"
ADVERTISED = {"nvidia.com/mig-1g.10gb": "7"}
FLEET_SIZE_PROJECTED = 5000


@dataclass(frozen=True)
class Group:
    name: str
    agents: int

    @property
    def user(self) -> str:
        return f"migagent-idle-{self.name}"


def _gpus(layout_file: Path) -> GpuDriver:
    """One simulated GPU already in LAYOUT, as a node the agent finds settled."""
    fake = FakeNvml.from_spec(SPEC)
    driver = GpuDriver(nvml_for(fake), reset_runner=SimResetRunner(fake)).__enter__()
    observation = driver.observe()
    desired = resolve_config(load_layout_file(layout_file), LAYOUT, [identity_of(gpu) for gpu in observation.gpus])
    engine = ApplyEngine(driver, MemoryJournal(), clock=FakeClock())
    if not engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=LAYOUT).converged:
        raise RuntimeError(f"could not put the simulated GPU in {LAYOUT}")
    return driver


def _add_node(plane: ControlPlane, name: str) -> None:
    admin = plane.rest(plane.admin)
    node = plane.ensure_node(name, labels={**GPU_OPERATOR_LABELS, MIG_CONFIG_LABEL: LAYOUT})
    node["status"] = {"capacity": dict(ADVERTISED), "allocatable": dict(ADVERTISED),
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    admin.replace(f"/api/v1/nodes/{name}/status", node)


def _start_agent(plane: ControlPlane, identity: Identity, node: str, workdir: Path, socket: str) -> RunningAgent:
    layout_file = workdir / "layouts.yaml"
    options = AgentOptions(
        node_name=node, settings=AgentSettings(config_file=layout_file), podresources_socket=socket,
        holder_identity=f"{node}-agent",
    )
    clock = SystemClock()
    api = KubeApi(plane.api_client(identity), node_name=node, clock=clock, timeout=options.request_timeout)
    journal = FileJournal(workdir / node / "journal")
    agent, source = build_agent(options, api=api, driver=_gpus(layout_file), journal=journal, clock=clock)
    return RunningAgent(agent, source).start()


def _all_report_success(plane: ControlPlane, nodes: Sequence[str], timeout_s: float) -> None:
    admin = plane.rest(plane.admin)
    deadline = Deadline(timeout_s)
    waiting = list(nodes)
    while waiting:
        labels = admin.get(f"/api/v1/nodes/{waiting[0]}")["metadata"].get("labels", {})
        if labels.get(MIG_CONFIG_STATE_LABEL) == "success":
            waiting.pop(0)
            continue
        if deadline.passed():
            raise RuntimeError(f"{len(waiting)} nodes did not report success within {deadline.describe()}")
        time.sleep(0.5)


def _requests(audit_log: Path, offset: int, users: set[str]) -> dict[str, Counter[str]]:
    """Requests in the audit log past `offset`, by user then `verb resource` (a watch counts once)."""
    seen: set[str] = set()
    counts: dict[str, Counter[str]] = {user: Counter() for user in users}
    with audit_log.open("rb") as log:
        log.seek(offset)
        for line in log:
            event = json.loads(line)
            user = event.get("user", {}).get("username")
            if user not in users or event["auditID"] in seen:
                continue
            seen.add(event["auditID"])
            ref = event.get("objectRef", {})
            what = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            counts[user][f"{event['verb']} {what}"] += 1
    return counts


def measure(groups: Sequence[Group], window_s: float, workdir: Path) -> str:
    audit = workdir / "audit.log"
    plane = ControlPlane(binaries_dir(), workdir / "plane", audit_log=audit)
    plane.start()
    running: list[RunningAgent] = []
    socket_path = str(Path(tempfile.mkdtemp(prefix="idle-pr-", dir="/tmp")) / "kubelet.sock")
    server = serve_pod_resources(socket_path, list)  # the kubelet's PodResources: no pods on any node
    try:
        plane.rest(plane.admin).create("/api/v1/namespaces", {"metadata": {"name": "migagent"}})
        (workdir / "layouts.yaml").write_text(DEMO_LAYOUTS, encoding="utf-8")
        nodes: list[str] = []
        for group in groups:
            identity = Identity(group.user, plane.pki.issue(group.name, group.user, organizations=("system:masters",)))
            for i in range(group.agents):
                node = f"idle-{group.name}-{i}"
                _add_node(plane, node)
                running.append(_start_agent(plane, identity, node, workdir, socket_path))
                nodes.append(node)
        _all_report_success(plane, nodes, timeout_s=600)
        time.sleep(10.0)  # the first reports' own Events and Lease releases land before the window
        offset = audit.stat().st_size
        users = {group.user for group in groups}
        startup = _requests(audit, 0, users)  # also shows the log tells the groups apart
        time.sleep(window_s)
        counts = _requests(audit, offset, users)
    finally:
        stop = [threading.Thread(target=r.stop, kwargs={"timeout_s": 10.0}) for r in running]
        for thread in stop:
            thread.start()
        for thread in stop:
            thread.join()
        server.stop(0)
        plane.stop()
    return _table(groups, counts, window_s, startup)


def _table(
    groups: Sequence[Group], counts: dict[str, Counter[str]], window_s: float, startup: dict[str, Counter[str]]
) -> str:
    rows: list[list[Cell]] = []
    for group in groups:
        seen = counts[group.user]
        beyond_watch = sum(n for what, n in seen.items() if not what.startswith("watch "))
        per_agent_minute = sum(seen.values()) * 60.0 / window_s / group.agents
        rows.append([
            f"{group.agents} agent(s)", sum(startup[group.user].values()), sum(seen.values()),
            f"{per_agent_minute:.2f}",
            f"{beyond_watch * 60.0 / window_s / group.agents:.2f}",
            f"{per_agent_minute * FLEET_SIZE_PROJECTED / 60.0:.1f}",
            ", ".join(f"{n} {what}" for what, n in sorted(seen.items())) or "none",
        ])
    headers = [
        "idle agents (defaults)", "start-up", "requests", "per agent-min", "beyond watch", "5000 nodes req/s", "seen"
    ]
    note = (
        f"counted in kube-apiserver's audit log over {window_s:g} s after every node reported success ('start-up':"
        f" from the agents' start to then); a watch request counts once, when opened; '5000 nodes req/s' ="
        f" per agent-min x 5000 / 60"
    )
    return render_table(headers, rows) + "\n" + note


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_fleet", description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", type=int, default=100, help="agents in the fleet group (default 100)")
    parser.add_argument("--window", type=float, default=600.0, help="seconds counted (default 600)")
    args = parser.parse_args(argv)
    return on_control_plane("idle-fleet-", lambda tmp: measure((Group("one", 1), Group("fleet", args.fleet)),
                                                                args.window, tmp))


def on_control_plane(prefix: str, bench: Callable[[Path], str]) -> int:
    """Print what `bench` measures in a fresh temporary folder, quietly; 1 when the control plane is not built."""
    if not binaries_built(binaries_dir()):
        print(f"the control plane is not built in {binaries_dir()}: run scripts/control_plane.sh", file=sys.stderr)
        return 1
    configure_logging(json_logs=False, level=logging.ERROR)
    logging.getLogger("urllib3").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        print(bench(Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
