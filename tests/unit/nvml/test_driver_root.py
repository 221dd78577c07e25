"""Finding NVML and nvidia-smi under a driver root (GPU Operator /run/nvidia/driver, or a host root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent.nvml.driver_root import NVML_SONAME, find_driver_files, load_nvml_from


def _driver_root(root: Path, library_dir: str = "usr/lib/x86_64-linux-gnu") -> Path:
    (root / library_dir).mkdir(parents=True)
    (root / library_dir / NVML_SONAME).write_bytes(b"")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-smi").write_bytes(b"")
    return root


def test_the_operator_driver_root_has_nvml_in_the_multiarch_dir_and_nvidia_smi_in_usr_bin(tmp_path: Path) -> None:
    files = find_driver_files(_driver_root(tmp_path))
    assert files.nvml == tmp_path / "usr/lib/x86_64-linux-gnu" / NVML_SONAME
    assert files.nvidia_smi == tmp_path / "usr/bin/nvidia-smi"


def test_a_rhel_style_driver_root_has_nvml_in_usr_lib64(tmp_path: Path) -> None:
    assert find_driver_files(_driver_root(tmp_path, "usr/lib64")).nvml == tmp_path / "usr/lib64" / NVML_SONAME


def test_nvidia_smi_off_the_path_runs_chrooted_into_the_driver_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    files = find_driver_files(_driver_root(tmp_path))
    assert files.nvidia_smi_argv() == ("chroot", str(tmp_path), "/usr/bin/nvidia-smi")


def test_nvml_is_loaded_by_path_from_the_driver_root_when_the_default_search_fails(tmp_path: Path) -> None:
    loaded: list[str] = []

    def loader(name: str) -> object:
        if name == NVML_SONAME:
            raise OSError(f"{name}: cannot open shared object file")
        loaded.append(name)
        return object()

    load_nvml_from(_driver_root(tmp_path), load=loader)
    assert loaded == [str(tmp_path / "usr/lib/x86_64-linux-gnu" / NVML_SONAME)]


def test_nvml_on_the_default_path_is_used_as_it_is(tmp_path: Path) -> None:
    loaded: list[str] = []
    load_nvml_from(_driver_root(tmp_path), load=loaded.append)
    assert loaded == [NVML_SONAME]


def test_a_driver_root_without_nvml_leaves_the_error_to_nvml_init(tmp_path: Path) -> None:
    def loader(name: str) -> object:
        raise OSError(name)

    assert load_nvml_from(tmp_path, load=loader).nvml is None
