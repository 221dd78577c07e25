"""bench.compare_probe measures each tree with that tree's own modules: where a module moved between
commits it takes the first candidate whose file is in the measured tree, never one found elsewhere
(an editable install of another tree), and names the candidates when the tree has none."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.compare_probe import _tree_module

PACKAGE = "probe_moved_pkg"


def _package(root: Path, *modules: str) -> Path:
    folder = root / PACKAGE
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for name in modules:
        (folder / f"{name}.py").write_text(f"WHERE = {name!r}\n")
    return root


@pytest.fixture(autouse=True)
def _forget_the_package() -> Iterator[None]:
    yield
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_an_older_tree_is_measured_with_the_module_at_its_old_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _package(tmp_path / "old-tree", "old_place")
    monkeypatch.syspath_prepend(str(tree))
    monkeypatch.chdir(tree)

    module = _tree_module((f"{PACKAGE}.new_place", f"{PACKAGE}.old_place"), "moved")

    assert module.WHERE == "old_place"


def test_a_module_found_outside_the_measured_tree_is_refused_with_the_candidates_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = _package(tmp_path / "installed", "new_place")
    measured = tmp_path / "measured"
    measured.mkdir()
    monkeypatch.syspath_prepend(str(elsewhere))
    monkeypatch.chdir(measured)

    with pytest.raises(SystemExit) as refused:
        _tree_module((f"{PACKAGE}.new_place", f"{PACKAGE}.old_place"), "moved")

    assert f"{PACKAGE}.new_place, {PACKAGE}.old_place" in str(refused.value)
    assert str(measured.resolve()) in str(refused.value)
