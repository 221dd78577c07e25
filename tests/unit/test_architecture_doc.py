"""docs/architecture.md stays true: its layers are the import contract, its packages the folders, its
figure the import graph, its state tables the enums and the transition table, and its recipe for a
Kubernetes write the places each write of the port goes."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

from migagent.attempt.first_write import FirstWriteGuard
from migagent.attempt.phases import AgentPhase
from migagent.kube.adapter import KubeApi
from migagent.node.port import KubePort
from migagent.reconcile.states import TRANSITIONS, Phase
from migagent_sim.doubles.memory_kube import MemoryKube
from tests import import_figure

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _section(marker: str) -> str:
    start = DOC.index(f"<!-- {marker}")
    return DOC[start : DOC.index("<!-- end of", start)]


def _rows(marker: str) -> list[list[str]]:
    """The table's rows under `marker`, each as its stripped cells (the header and the rule left out)."""
    lines = [line for line in _section(marker).splitlines() if line.startswith("|")]
    return [[cell.strip().strip("`") for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_the_documented_layers_are_the_import_contract() -> None:
    contract = next(c for c in PYPROJECT["tool"]["importlinter"]["contracts"] if c["name"] == "Layers only point down")
    block = _section("layers").split("```")[1]
    documented = [line.strip() for line in block.strip().splitlines()]
    assert documented == [layer.replace("migagent.", "") for layer in contract["layers"]]


def test_every_package_is_described_and_every_described_package_exists() -> None:
    packages = {p.parent.name for p in (ROOT / "migagent").glob("*/__init__.py")}
    assert {row[0] for row in _rows("packages")} == packages


def test_the_figure_is_the_import_graph() -> None:
    assert import_figure.block(DOC) == import_figure.figure(), "run: python -m tests.import_figure --write"


def test_only_the_cli_may_import_the_simulated_gpus() -> None:
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c.get("forbidden_modules") == ["migagent.sim"])
    packages = {p.parent.name for p in (ROOT / "migagent").glob("*/__init__.py")} - {"cli", "sim"}
    modules = {p.stem for p in (ROOT / "migagent").glob("*.py")} - {"__init__", "__main__"}
    assert {m.removeprefix("migagent.") for m in contract["source_modules"]} == packages | modules


def test_the_kubernetes_write_recipe_names_every_place_each_write_of_the_port_goes() -> None:
    files = {row[1] for row in _rows("recipe: a Kubernetes write")}
    assert all((ROOT / name).exists() for name in files), files
    writes = [
        name for name in vars(KubePort)
        if not name.startswith(("_", "get_", "list_", "read_", "watch_")) and name != "node_name"
    ]
    for implementation in (KubePort, KubeApi, FirstWriteGuard, MemoryKube):
        assert _source_file(implementation) in files, implementation
        assert not [w for w in writes if w not in vars(implementation)], implementation
    for write in writes:
        assert _first_statement(FirstWriteGuard, write) == "self._write()", write
        assert _first_statement(MemoryKube, write).startswith("self._enter("), write


def _source_file(cls: type) -> str:
    """The class's file in the repository, from its module's name: CI installs the distributions
    into a virtualenv (not editable), so `inspect.getfile` points into site-packages there."""
    path = cls.__module__.replace(".", "/") + ".py"
    in_simulator = f"simulator/{path}"
    return in_simulator if (ROOT / in_simulator).exists() else path


def _first_statement(cls: type, method: str) -> str:
    body = inspect.getsource(getattr(cls, method)).split(":\n", 1)[1]
    lines = [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith(('"', "#"))]
    return lines[0]


def test_the_agent_phase_table_lists_the_phases_in_their_order() -> None:
    assert [row[0] for row in _rows("agent phases")] == [phase.value for phase in AgentPhase]


def test_the_engine_phase_table_is_the_transition_table() -> None:
    documented = {row[0]: {p.strip() for p in row[1].split(",")} for row in _rows("engine phases")}
    assert documented == {phase.value: {p.value for p in TRANSITIONS[phase]} for phase in Phase}


def test_pytest_quiet_still_prints_its_summary_line() -> None:
    """`addopts = -q` made the README's `pytest -q` quieter still (-qq): no `N passed` line at all."""
    addopts = PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"]
    assert not re.search(r"(^|\s)-q+\b", addopts), addopts
