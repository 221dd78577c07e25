"""Module hops from the agent's loop to `nvmlDeviceCreateGpuInstanceWithPlacement`.

One attempt applies a layout on the in-memory node of the unit tests (FakeNvml behind the real
GpuDriver and engine) until its first GPU-instance create. Two counts:
- the stack: the migagent modules on the call stack at the create, outermost first (a hop is a call
  from one module into another);
- the walk: every call into a migagent function on the agent's thread from the start of the attempt
  to the create, in order, as the module it lands in (repeats in a row collapsed): how many times
  the flow moves from module to module, and how often it crosses between the attempt's packages
  (attempt/loops/plumbing; `runtime` before the split) and the Kubernetes side (node/kube).
The label watch hands the agent its wake-up on another thread: one hop more than either count.

    python -m bench.hops
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

HARNESS = "migagent_sim.doubles.memory_node"
"""Where MemoryNode lives (`--harness tests.unit.runtime.node` in a tree from before the package split)."""

COUNTED = {
    ("migagent.layout.parse", "parse_layout"): "layout parsed",
    ("migagent.layout.resolve", "resolve_config"): "layout resolved",
    ("migagent.nvml.driver", "observe"): "NVML observed (whole node)",
    ("migagent.planning.planner", "plan"): "plan computed",
    ("migagent.reconcile.journal", "desired_node_hash"): "layout hash computed",
    ("memory_kube", "list_pods_on_node"): "pods listed",
    ("memory_kube", "get_node"): "Node read",
}
"""The work counted from the attempt's start to the first GPU-instance create (module, function)."""

AGENT_SIDE = ("migagent.attempt", "migagent.loops", "migagent.plumbing", "migagent.runtime")
KUBE_SIDE = ("migagent.node", "migagent.kube")


def _module(filename: str) -> str | None:
    path = Path(filename)
    parts = path.with_suffix("").parts
    for root in ("migagent", "migagent_sim"):
        if root in parts:
            index = len(parts) - 1 - parts[::-1].index(root)
            return ".".join(parts[index:])
    return None


def trace_to_create(harness: str = HARNESS) -> tuple[list[str], list[str], Counter[str]]:
    """(the stack at the first GPU-instance create, the walk up to it, the COUNTED work done by then)."""
    walk: list[str] = []
    stack: list[str] = []
    work: Counter[str] = Counter()
    done = [False]

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and not done[0] and (module := _module(frame.f_code.co_filename)) is not None:
            walk.append(module)
            name = frame.f_code.co_name
            counted = COUNTED.get((module, name)) or COUNTED.get((module.rsplit(".", 1)[-1], name))
            if counted is not None:
                work[counted] += 1

    memory_node = importlib.import_module(harness).MemoryNode
    with tempfile.TemporaryDirectory() as tmp:
        node = memory_node(Path(tmp))
        real = node.fake.nvmlDeviceCreateGpuInstanceWithPlacement

        def recording(*args: Any) -> Any:
            if not done[0]:
                done[0] = True
                stack.extend(m for f in traceback.extract_stack()[:-1] if (m := _module(f.filename)) is not None)
            return real(*args)

        setattr(node.fake, "nvmlDeviceCreateGpuInstanceWithPlacement", recording)  # noqa: B010 - a seam on an instance
        node.set_label("all-balanced")
        agent = node.agent()
        sys.setprofile(profile)
        try:
            agent.reconcile_once()
        finally:
            sys.setprofile(None)
    return _from_agent(stack), _from_agent(walk), work


def _from_agent(modules: list[str]) -> list[str]:
    start = next(i for i, m in enumerate(modules) if m.endswith((".agent",)) and ".sim" not in m)
    return _collapsed([m for m in modules[start:] if not m.startswith("migagent.sim.")])  # FakeNvml: the GPU


def _collapsed(path: list[str]) -> list[str]:
    return [m for i, m in enumerate(path) if i == 0 or m != path[i - 1]]


def _side(module: str) -> str | None:
    if module.startswith(AGENT_SIDE):
        return "agent"
    return "kube" if module.startswith(KUBE_SIDE) else None


def crossings(path: list[str]) -> Counter[str]:
    """Moves between the agent's packages and the Kubernetes side, each way."""
    sides = [s for m in path if (s := _side(m)) is not None]
    return Counter(f"{a} -> {b}" for a, b in itertools.pairwise(sides) if a != b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", default=HARNESS, help=f"the module holding MemoryNode (default {HARNESS})")
    stack, walk, work = trace_to_create(parser.parse_args().harness)
    for module in stack:
        print(f"  {module}")
    print(f"stack: {len(stack) - 1} module hops from the agent loop to nvmlDeviceCreateGpuInstanceWithPlacement")
    crossed = crossings(walk)
    packages = _collapsed([".".join(m.split(".")[:2]) for m in walk])
    print(
        f"walk: {len(walk) - 1} module hops through {len(set(walk))} modules, {len(packages) - 1} package hops;"
        f" agent <-> kube side crossed {crossed['agent -> kube']} times one way and {crossed['kube -> agent']} back"
    )
    print("until then: " + ", ".join(f"{what} x{work[what]}" for what in COUNTED.values()))


if __name__ == "__main__":
    main()
