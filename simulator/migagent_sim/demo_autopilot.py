"""`migagent demo autopilot`: demand shifts across a pool and the layouts follow it, within guardrails.

Four simulated nodes (2x H100-80GB each, layout all-1g.10gb), each with its FakeNvml, fake kubelet and
agent, behind one fake API server; the first three labelled `migagent.io/autopilot=enabled`, the
fourth not. A scheduler stand-in binds pending pods (simulator/migagent_sim/scheduler.py). The story:
inference pods (1g.10gb) fill two nodes; training pods asking 3g.40gb then wait, `migagent advise`
shows what would serve them, and the autopilot (here with --persist 2 and a 120 s --cooldown) turns
that into a rollout: an idle node changes, the scheduler places the training pods there. Then two
high-priority pods ask for a whole-GPU 7g.80gb: the autopilot reclaims a node whose low-priority
pods it may evict, never the node that is not opted in, and its history tells each decision.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from migagent.autopilot.controller import Autopilot, load
from migagent.autopilot.decide import OPT_IN_LABEL, Guardrails
from migagent.autopilot.state import Decision
from migagent.cli.autopilot import describe
from migagent.clock import SystemClock
from migagent.node.names import MIG_CONFIG_LABEL
from migagent.plumbing.logging import configure_logging
from migagent_sim.cluster import GPU_OPERATOR_LABELS
from migagent_sim.demand_pool import demand_api, running_on, scheduler, submit
from migagent_sim.demo_rollout import migagent_main
from migagent_sim.pool import PoolMonitor, SimPool, SimPoolConfig

_CLOCK = SystemClock()
NOT_OPTED = "gpu-h100-4"
GUARDRAILS = Guardrails(persist_s=2.0, cooldown_s=120.0, max_changes_per_hour=4)


class _Listener:
    def event(self, event: str, **fields: object) -> None:
        if event == "wave_started":
            print(f"  (rollout) wave {fields['wave']}: relabel {', '.join(map(str, fields['nodes']))}", flush=True)  # type: ignore[call-overload]

    def progress(self, *_: object) -> None:
        return None


def _say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def _wait(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = _CLOCK.monotonic() + timeout_s
    while _CLOCK.monotonic() < deadline:
        if check():
            return True
        _CLOCK.sleep(0.1)
    return False


class _Pilot:
    """The autopilot stepping in a thread; prints each decision as it is recorded."""

    def __init__(self, pool: SimPool) -> None:
        self._api = demand_api(pool)
        self._autopilot = Autopilot(self._api, GUARDRAILS, clock=_CLOCK, listener=_Listener())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._shown = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            state = self._autopilot.step()
            self._show(state.history)
            _CLOCK.wait(self._stop, 0.2)

    def _show(self, history: tuple[Decision, ...]) -> None:
        for decision in history[self._shown:]:
            for line in describe(decision):
                print(f"  (autopilot) {line}", flush=True)
        self._shown = len(history)

    def __enter__(self) -> _Pilot:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10.0)


def _story(pool: SimPool, timeout_s: float) -> bool:
    server = ["--api-server", pool.api.url]
    _say("inference: 21 pods of nvidia.com/mig-1g.10gb (priority 0) arrive; the scheduler places them")
    inference = [submit(pool, f"infer-{i}", "nvidia.com/mig-1g.10gb") for i in range(21)]
    if not _wait(lambda: len(running_on(pool, inference)) == len(inference), timeout_s):
        return False
    training = [submit(pool, f"train-{i}", "nvidia.com/mig-3g.40gb", priority=100) for i in range(4)]
    _say("training: 4 pods of nvidia.com/mig-3g.40gb (priority 100) wait: no node offers one")
    _CLOCK.sleep(0.5)
    _say(f"migagent advise -l {pool.selector}")
    migagent_main(["advise", "-l", pool.selector, *server])
    _say(f"the autopilot (migagent autopilot run --persist {GUARDRAILS.persist_s:g}"
         f" --cooldown {GUARDRAILS.cooldown_s:g} --max-changes-per-hour {GUARDRAILS.max_changes_per_hour})"
         f" on the nodes labelled {OPT_IN_LABEL}=enabled")
    with _Pilot(pool):
        if not _wait(lambda: len(running_on(pool, training)) == len(training), timeout_s):
            return False
        print(f"  the training pods run on {', '.join(sorted(set(running_on(pool, training).values())))}", flush=True)
        big = [submit(pool, f"big-{i}", "nvidia.com/mig-7g.80gb", priority=1000) for i in range(2)]
        _say("2 pods of nvidia.com/mig-7g.80gb (priority 1000) wait: a whole GPU each")
        if not _wait(lambda: len(running_on(pool, big)) == len(big), timeout_s):
            return False
        print(f"  they run on {', '.join(sorted(set(running_on(pool, big).values())))}", flush=True)
        _wait(lambda: load(demand_api(pool)).rollout is None, timeout_s)
    _say("migagent autopilot history")
    migagent_main(["autopilot", "history", *server])
    return True


def run_autopilot_demo(args: argparse.Namespace) -> int:
    configure_logging(level=logging.CRITICAL)
    for name in ("urllib3.connectionpool", "kubernetes.client.rest", "migagent.sim"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="migagent-demo-autopilot-") as workdir:
        config = SimPoolConfig(nodes=4, labels={**GPU_OPERATOR_LABELS, OPT_IN_LABEL: "enabled"})
        with SimPool(Path(workdir), config) as pool:
            pool.api.update_node(NOT_OPTED, lambda node: node["metadata"]["labels"].pop(OPT_IN_LABEL))
            _say(f"a pool of {len(pool.nodes)} nodes ({config.spec} each, {config.start_layout}); {NOT_OPTED} is"
                 " not opted in")
            monitor = PoolMonitor(pool)
            with scheduler(pool):
                ok = _story(pool, args.timeout)
            layouts = {name: pool.labels(name).get(MIG_CONFIG_LABEL) for name in pool.nodes}
            print(f"\n  layouts now: {', '.join(f'{n}={layout}' for n, layout in layouts.items())}")
            changes = ", ".join(f"{node}: {count}" for node, count in sorted(monitor.relabels.items()))
            print(f"  layout changes per node: {changes or 'none'};"
                  f" {NOT_OPTED} (not opted in) changed {monitor.relabels.get(NOT_OPTED, 0)} time(s)")
            ok = ok and monitor.relabels.get(NOT_OPTED, 0) == 0
            print("\nautopilot demo " + ("succeeded" if ok else "FAILED"))
            return 0 if ok else 1


__all__ = ["run_autopilot_demo"]
