"""Every document the code cites is in the repository: a comment, docstring or doc that names a `*.md`
file names one that exists, a section it cites (`docs/nvml.md §4`) is a heading of that file, and
nothing cites the research notes kept outside the repository (`reference` then a slash, a section
sign or a capture number), which a maintainer who clones it cannot read. A section sign in a doc with
no file before it is that doc's own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("migagent", "simulator", "tests", "bench", "scripts", "configs", "deploy", "native", "systemd", "docs")
SUFFIXES = {".py", ".pyi", ".sh", ".yaml", ".yml", ".toml", ".c", ".h", ".md", ".cfg"}
SKIPPED = {"__pycache__", ".venv", "generated"}

OUTSIDE = re.compile(r"\breference(?:/|\s+(?:§|C\d|[\w.-]+\.md))")
DOCUMENT = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)*[\w-][\w.-]*\.md)\b")
SECTION = re.compile(r"§(\d+)")


def _sources() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "Containerfile"]
    for folder in FOLDERS:
        found += [
            path for path in (ROOT / folder).rglob("*")
            if path.suffix in SUFFIXES and path.is_file() and not SKIPPED & set(path.relative_to(ROOT).parts)
        ]
    return found


def _resolve(cited: str, source: Path) -> Path | None:
    return next((path for path in (ROOT / cited, source.parent / cited, ROOT / "docs" / cited) if path.is_file()), None)


def _headings(document: Path) -> set[str]:
    return set(re.findall(r"^## (\d+)\.", document.read_text(encoding="utf-8"), re.M))


def _problems(source: Path) -> list[str]:
    where = source.relative_to(ROOT)
    problems: list[str] = []
    for number, line in enumerate(source.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if OUTSIDE.search(line):
            problems.append(f"{where}:{number}: cites a document outside the repository: {line.strip()}")
        last: Path | None = None
        for match in DOCUMENT.finditer(line):
            last = _resolve(match[1], source)
            if last is None:
                problems.append(f"{where}:{number}: cites {match[1]}, which is not in the repository")
        for section in SECTION.finditer(line):
            cited_before = list(DOCUMENT.finditer(line[: section.start()]))
            own = source if source.suffix == ".md" else None
            document = _resolve(cited_before[-1][1], source) if cited_before else own
            if document is None:
                problems.append(f"{where}:{number}: §{section[1]} of no document in the repository")
            elif section[1] not in _headings(document):
                problems.append(f"{where}:{number}: {document.relative_to(ROOT)} has no section {section[1]}")
    return problems


def test_every_cited_document_and_section_is_in_the_repository() -> None:
    problems = [problem for source in _sources() for problem in _problems(source)]
    assert not problems, "\n".join(problems)
