from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import pytest

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.fakelib_backend import bind
from tests.integration.fakelib.support import build


@pytest.fixture(scope="session")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DIR from `scripts/build_fake_nvml.sh DIR`, built once with the system C compiler."""
    return build(tmp_path_factory.mktemp("fake-nvml"))


@pytest.fixture
def nvml(fake_nvml_dir: Path) -> ctypes.CDLL:
    """The library loaded into this process, as ctypes (and so pynvml) loads it."""
    return ctypes.CDLL(str(fake_nvml_dir / "libnvidia-ml.so.1"))


@pytest.fixture
def node() -> Iterator[FakeNvml]:
    """A 2xA100-80GB node in MIG mode answering the library's calls from this process."""
    fake = FakeNvml.from_spec("2xA100-80GB", mig_enabled=True)
    bind(fake)
    yield fake
    bind(None)
