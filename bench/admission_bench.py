"""What enforcing the admission policy costs the simulator: milliseconds per Node write decision.

The fake API server evaluates deploy/base/admission-policy.yaml with cel-python (a tree-walking
interpreter) on every Node write, under RBAC from deploy/base/rbac.yaml (read as plain YAML: no
kubectl needed). Figures only; no test looks at them.

    python -m bench.admission_bench [--repeat N]
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.tables import percentile, render_table
from migagent_sim.apiserver.access import ADMIN, AccessControl
from migagent_sim.apiserver.admission import AdmissionRequest
from migagent_sim.apiserver.errors import ApiError
from migagent_sim.apiserver.objects import node_object
from migagent_sim.apiserver.rbac import UserInfo

BASE = Path(__file__).resolve().parents[1] / "deploy" / "base"
NODE = "gpu-1"
JsonDict = dict[str, Any]


def base_objects() -> list[JsonDict]:
    objects: list[JsonDict] = []
    for name in ("rbac.yaml", "admission-policy.yaml"):
        objects += [doc for doc in yaml.safe_load_all((BASE / name).read_text(encoding="utf-8")) if doc]
    return objects


def _label(key: str, value: str) -> Callable[[JsonDict], None]:
    return lambda node: node["metadata"]["labels"].__setitem__(key, value)


CASES: list[tuple[str, UserInfo, Callable[[JsonDict], None]]] = [
    (
        "agent, allowed (state label)",
        UserInfo.service_account("migagent", "migagent", node_name=NODE),
        _label("nvidia.com/mig.config.state", "pending"),
    ),
    (
        "agent, denied (mig.config)",
        UserInfo.service_account("migagent", "migagent", node_name=NODE),
        _label("nvidia.com/mig.config", "x"),
    ),
    ("admin, not judged", ADMIN, _label("nvidia.com/mig.config", "x")),
]


def decide_ms(access: AccessControl, user: UserInfo, edit: Callable[[JsonDict], None]) -> tuple[float, bool]:
    old = node_object(NODE, labels={"nvidia.com/mig.config": "a"}, wall_s=0.0)
    new = copy.deepcopy(old)
    edit(new)
    request = AdmissionRequest("UPDATE", "", "v1", "nodes", "", "", NODE, user, new, old)
    start = time.perf_counter()
    try:
        access.admit(request)
        allowed = True
    except ApiError:
        allowed = False
    return 1000 * (time.perf_counter() - start), allowed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    access = AccessControl(base_objects())
    rows = []
    for what, user, edit in CASES:
        decide_ms(access, user, edit)  # parse the expressions once, as a long-lived server does
        samples = [decide_ms(access, user, edit) for _ in range(args.repeat)]
        times = [ms for ms, _ in samples]
        rows.append([what, "allowed" if samples[0][1] else "denied", percentile(times, 50), percentile(times, 95)])
    print(render_table(["Node write", "decision", "p50 ms", "p95 ms"], rows))


if __name__ == "__main__":
    main()
