"""The simulated node finds the checkout's build scripts wherever the simulator is installed from
(a wheel, as .ci/run installs it, says nothing about the checkout through its own file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent_sim.gpu_node.checkout import SOURCE_TREE_ENV, checkout_file, source_tree


def _checkout(root: Path) -> Path:
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "nvidia_tools.sh").write_text("mig_parted_version=${MIG_PARTED_VERSION:-v9.9.9}\n")
    return root


def test_the_variable_names_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _checkout(tmp_path / "elsewhere")
    monkeypatch.setenv(SOURCE_TREE_ENV, str(root))
    assert source_tree() == root.resolve()
    assert checkout_file("scripts/nvidia_tools.sh") == root.resolve() / "scripts" / "nvidia_tools.sh"


def test_a_run_from_inside_the_checkout_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _checkout(tmp_path / "repo")
    (root / "tests" / "deep").mkdir(parents=True)
    monkeypatch.delenv(SOURCE_TREE_ENV, raising=False)
    monkeypatch.chdir(root / "tests" / "deep")
    assert source_tree() == root.resolve()


def test_a_missing_file_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SOURCE_TREE_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=f"has no native/x.c: .*{SOURCE_TREE_ENV}"):
        checkout_file("native/x.c")
