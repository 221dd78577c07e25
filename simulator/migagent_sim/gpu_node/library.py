"""Where the fake libnvidia-ml.so.1 and nvidia-smi come from: a directory the caller names
(`--lib`, or MIGAGENT_FAKE_NVML_DIR), else a build of this checkout's native/fake_nvml/ with this
interpreter, cached under ~/.cache/migagent/fake-nvml/<digest of the sources and interpreter>."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from migagent_sim.gpu_node.checkout import source_tree

LIBRARY_DIR_ENV = "MIGAGENT_FAKE_NVML_DIR"
LIBRARY = "libnvidia-ml.so.1"
BUILD_SCRIPT = Path("scripts") / "build_fake_nvml.sh"  # relative to the checkout (source_tree())
SOURCES = Path("native") / "fake_nvml"


class LibraryError(RuntimeError):
    """No library to use and none can be built; the message says what to do."""


def library_dir(explicit: Path | None = None) -> Path:
    chosen = explicit or (Path(os.environ[LIBRARY_DIR_ENV]) if os.environ.get(LIBRARY_DIR_ENV) else None)
    if chosen is not None:
        if not (chosen / LIBRARY).is_file():
            raise LibraryError(f"{chosen} has no {LIBRARY}; build it with scripts/build_fake_nvml.sh {chosen}")
        return chosen.resolve()
    root = source_tree()
    if root is None or not (root / BUILD_SCRIPT).is_file() or not (root / SOURCES).is_dir():
        raise LibraryError(
            f"no fake NVML library: pass --lib DIR or set {LIBRARY_DIR_ENV} to a directory built by"
            " scripts/build_fake_nvml.sh (this installation has no sources to build one from)"
        )
    return _cached_build(root)


def _digest(root: Path) -> str:
    digest = hashlib.sha256(sys.executable.encode())
    for source in sorted((*(root / SOURCES).iterdir(), root / BUILD_SCRIPT)):
        digest.update(source.name.encode() + source.read_bytes())
    return digest.hexdigest()[:16]


def _cached_build(root: Path) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "migagent" / "fake-nvml"
    built = cache / _digest(root)
    if (built / LIBRARY).is_file():
        return built
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # one build at a time; the others wait and reuse it
        if not (built / LIBRARY).is_file():
            scratch = Path(tempfile.mkdtemp(dir=cache))
            result = subprocess.run(
                [str(root / BUILD_SCRIPT), str(scratch)],
                env={**os.environ, "PYTHON": sys.executable},
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise LibraryError(f"scripts/build_fake_nvml.sh failed: {result.stderr.strip()}")
            scratch.rename(built)
    return built
