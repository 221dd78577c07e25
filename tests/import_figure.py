"""docs/architecture.md's figure, drawn from the import graph: an arrow from package A to package B
where A imports B directly and no longer path of imports already leads from A to B (the graph's
transitive reduction), so every arrow is a real import and every import is drawn or implied.
`tests/unit/test_architecture_doc.py` holds the doc's figure to this one.

    python -m tests.import_figure --write    # rewrite the figure in docs/architecture.md
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- figure: generated from the import graph by `python -m tests.import_figure --write` -->"
END = "<!-- end of figure -->"


def package_imports() -> set[tuple[str, str]]:
    """(A, B) for every package A of migagent that imports package B directly."""
    graph = grimp.build_graph("migagent")
    packages = {init.parent.name for init in (ROOT / "migagent").glob("*/__init__.py")}
    edges: set[tuple[str, str]] = set()
    for module in graph.modules:
        source = module.split(".")[1] if "." in module else ""
        if source not in packages:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")[1] if imported.startswith("migagent.") else ""
            if target in packages and target != source:
                edges.add((source, target))
    return edges


def reduced(edges: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The edges no longer path replaces, sorted."""
    edges = set(edges)

    def reaches(start: str, goal: str, without: tuple[str, str]) -> bool:
        todo, seen = [b for a, b in edges if a == start and (a, b) != without], set()
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo += [b for a, b in edges if a == node]
        return False

    return sorted(edge for edge in edges if not reaches(*edge, without=edge))


def figure() -> str:
    lines = ["```mermaid", "graph TD"] + [f"  {a} --> {b}" for a, b in reduced(package_imports())] + ["```"]
    return "\n".join(lines)


def _span(doc: str) -> tuple[int, int]:
    start = doc.index(BEGIN) + len(BEGIN)
    return start, doc.index(END, start)


def block(doc: str) -> str:
    """The figure as the doc has it."""
    start, end = _span(doc)
    return doc[start:end].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the figure in docs/architecture.md")
    drawn = figure()
    if parser.parse_args().write:
        doc = DOC.read_text(encoding="utf-8")
        start, end = _span(doc)
        DOC.write_text(f"{doc[:start]}\n{drawn}\n{doc[end:]}", encoding="utf-8")
    print(drawn)


if __name__ == "__main__":
    main()
