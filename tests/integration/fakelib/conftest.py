from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.fakelib.backend import bind
from tests.integration.fakelib.support import build


@pytest.fixture(scope="session")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DIR from `scripts/build_fake_nvml.sh DIR`, built once with the system C compiler."""
    return build(tmp_path_factory.mktemp("fake-nvml"))


@pytest.fixture(scope="session")
def nvml_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clients/nvml_client.c built with the system C compiler: an NVML client without Python."""
    binary = tmp_path_factory.mktemp("nvml-client") / "nvml_client"
    source = Path(__file__).with_name("clients") / "nvml_client.c"
    subprocess.run(["cc", "-std=c11", "-O1", "-o", str(binary), str(source), "-ldl", "-lpthread"], check=True)
    return binary


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
