"""Every file of the repository the README and docs/ name (`migagent/...py`, `scripts/...sh`) exists:
a reader sent to a moved file finds nothing (docs/testing.md named a fidelity.py that had moved)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = "migagent|simulator|tests|bench|deploy|scripts|configs|docs|systemd|native"
CITED = re.compile(rf"`((?:{TOP})/[\w./*-]*\w)(?:::\w+|:\d+)?`")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("*/README.md"))]


def test_every_path_the_docs_name_exists() -> None:
    cited = [(doc.name, path) for doc in DOCS for path in CITED.findall(doc.read_text(encoding="utf-8"))]
    assert len(cited) > 100  # the pattern finds what the docs cite
    missing = [(doc, path) for doc, path in cited if not (ROOT / path).exists() and not any(ROOT.glob(path))]
    assert missing == []
