"""One measurement against whichever migagent is first on sys.path: run by `bench.compare` as a script,
with PYTHONPATH set to a commit's tree, so two commits are measured by the same code.

Self-contained on purpose (no `bench` import, only APIs that both sides of a comparison have):
  change GPUS PODS TARGET  -> label -> success seconds and API requests for one change of a fresh
                              simulated node (zero fake latency), pods spread over its 1g GIs
  journal GPUS             -> seconds spent in journal saves while the engine applies that change
  version                  -> median wall seconds of `migagent --version` (11 fresh processes)
  idle WINDOW              -> RSS (MiB) of a `migagent agent` process at its default settings, idle
                              on a simulated 8x H100 node, and the API requests it made in WINDOW s
  demo                     -> CPU seconds (user + system) of one `migagent demo rollout` process,
                              its wall seconds, and whether it ended "rollout demo succeeded"
Prints one JSON object: value, unit, requests (and wall_s, failed for `demo`).

Three modules moved over the project's history: the simulated cluster (`migagent.cli.simcluster` up
to fd9ca0f, `migagent_sim.cluster`, the simulator/ distribution, since), logging
(`migagent.runtime.logging`, then `migagent.plumbing.logging`) and the Node's names
(`migagent.kube.names`, then `migagent.node.names`). Each is taken from the tree's own files only: an
installed simulator of another tree would drive this tree's agent with another's cluster, and an
editable install of this tree would hand the other tree's `migagent` this tree's modules. A commit
with none of the candidates cannot be driven, and the probe says so.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_SIMCLUSTER_MODULES = ("migagent_sim.cluster", "migagent.cli.simcluster")
_LOGGING_MODULES = ("migagent.plumbing.logging", "migagent.runtime.logging")
_NAMES_MODULES = ("migagent.node.names", "migagent.kube.names")
_MAIN = "import sys; from migagent.cli import main; sys.exit(main())"


def _tree_module(candidates: tuple[str, ...], what: str) -> Any:
    """The first of `candidates` whose file is in the tree measured (the current directory)."""
    tree = Path.cwd().resolve()
    for name in candidates:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if tree in Path(str(module.__file__)).resolve().parents:
            return module
    raise SystemExit(
        f"{tree} has none of the {what} modules this probe knows ({', '.join(candidates)}):"
        " bench.compare drives commits from the agent's first simulated cluster on"
    )


def _simcluster() -> Any:
    return _tree_module(_SIMCLUSTER_MODULES, "simulated cluster")


def _quiet() -> None:
    _tree_module(_LOGGING_MODULES, "logging").configure_logging(json_logs=False, level=logging.WARNING)
    for name in ("urllib3.connectionpool", "kubernetes.client.rest"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _applied(cluster: Any, layout: str, names: Any) -> bool:
    node = cluster.node()
    labels, notes = node["metadata"].get("labels", {}), node["metadata"].get("annotations", {})
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c["type"] == names.CONDITION_TYPE and c["status"] == "True" for c in conditions)
    return (
        ready
        and labels.get(names.MIG_CONFIG_STATE_LABEL) == "success"
        and layout in notes.get(names.DESIRED_ANNOTATION, "")
    )


def _wait(cluster: Any, layout: str) -> None:
    names = _tree_module(_NAMES_MODULES, "Node names")
    deadline = time.monotonic() + 300
    while not _applied(cluster, layout, names):
        if time.monotonic() > deadline:
            raise SystemExit(f"{layout} was not applied within 300 s")
        time.sleep(0.002)


def change(gpus: int, pods: int, target: str) -> dict[str, Any]:
    module = _simcluster()
    config = module.SimClusterConfig(spec=f"{gpus}xH100-80GB-SXM", start_layout="all-1g.10gb")
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp, module.SimCluster(Path(tmp), config) as cluster:
        for i in range(pods):
            gpu, slot = divmod(i % (gpus * 7), 7)
            cluster.kubelet.run_workload("bench", f"w{i}", mig_uuid=cluster.mig_uuid(gpu, slot))
        running = cluster.start_agent()
        _wait(cluster, "all-1g.10gb")
        since = len(cluster.api.requests)
        started = time.perf_counter()
        cluster.label(target)
        _wait(cluster, target)
        seconds = time.perf_counter() - started
        requests = len(cluster.api.requests) - since
        running.stop()
    return {"value": seconds, "unit": "s", "requests": requests}


def version() -> dict[str, Any]:
    samples = []
    for _ in range(11):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", _MAIN, "--version"], check=True, capture_output=True)
        samples.append(time.perf_counter() - started)
    return {"value": statistics.median(samples), "unit": "s", "requests": 0}


def idle(window_s: float) -> dict[str, Any]:
    """A `migagent agent` child process against a simulated cluster, at the agent's default settings."""
    module = _simcluster()
    config = module.SimClusterConfig(spec="8xH100-80GB-SXM", start_layout="all-1g.10gb")
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp, module.SimCluster(Path(tmp), config) as cluster:
        state = Path(tmp) / "gpus.json"
        cluster.fake.save(state)  # the child's own simulated GPUs, in the same layout
        argv = [
            sys.executable, "-c", _MAIN, "agent", "--node-name", cluster.config.node_name,
            "--config-file", str(cluster.layout_file), "--api-server", cluster.api.url,
            "--podresources-socket", cluster.socket_path, "--journal-dir", str(Path(tmp) / "journal"),
            "--state", str(state),
        ]
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)
        try:
            _wait(cluster, "all-1g.10gb")
            time.sleep(2.0)  # the first report's own requests land before the window
            since = len(cluster.api.requests)
            time.sleep(window_s)
            requests = len(cluster.api.requests) - since
            rss_pages = int(Path(f"/proc/{child.pid}/statm").read_text().split()[1])
        finally:
            child.terminate()
            child.wait(timeout=30)
    return {"value": rss_pages * os.sysconf("SC_PAGE_SIZE") / 2**20, "unit": "MiB", "requests": requests}


def demo() -> dict[str, Any]:
    """The rollout demo (six simulated nodes, their agents and the rollout, all in one process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MAIN, "demo", "rollout"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    failed = done.returncode != 0 or "rollout demo succeeded" not in done.stdout
    return {"value": cpu, "unit": "cpu-s", "requests": 0, "wall_s": wall, "failed": failed}


def journal(gpus: int) -> dict[str, Any]:
    from migagent.clock import FakeClock
    from migagent.layout.parse import parse_layout
    from migagent.layout.resolve import identity_of, resolve_config
    from migagent.nvml.driver import GpuDriver
    from migagent.reconcile.journal import FileJournal, desired_node_hash
    from migagent.reconcile.machine import ApplyEngine
    from migagent.sim.fake_nvml import FakeNvml
    from migagent.sim.reset import SimResetRunner

    layouts = parse_layout(
        'version: v1\nmig-configs:\n  a: [{devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}]\n'
        '  b: [{devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]\n',
        source="probe",
    )
    spent = [0.0]

    class Timed(FileJournal):
        def save(self, record: Any) -> None:
            started = time.perf_counter()
            super().save(record)
            spent[0] += time.perf_counter() - started

    fake = FakeNvml.from_spec(f"{gpus}xH100-80GB-SXM", mig_enabled=True)
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp, GpuDriver(fake, reset_runner=SimResetRunner(fake)) as d:
        for name in ("a", "b"):
            spent[0] = 0.0
            desired = resolve_config(layouts, name, [identity_of(g) for g in d.observe().gpus])
            engine = ApplyEngine(d, Timed(Path(tmp) / name), clock=FakeClock())
            result = engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=name)
            if not result.converged:
                raise SystemExit(f"{name}: {result.error}")
    return {"value": spent[0], "unit": "s", "requests": 0}


def main(argv: list[str]) -> int:
    import migagent

    _quiet()
    mode, *rest = argv
    if mode == "change":
        figures = change(int(rest[0]), int(rest[1]), rest[2])
    elif mode == "journal":
        figures = journal(int(rest[0]))
    elif mode == "version":
        figures = version()
    elif mode == "demo":
        figures = demo()
    else:
        figures = idle(float(rest[0]))
    print(json.dumps({**figures, "migagent": str(Path(migagent.__file__).parent)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
