"""The image's inputs are pinned and agree: one Debian point release for the Containerfile and
scripts/build_image.sh (image.env), one lock of the Python packages with their hashes (used by both
builds; its pins, without hashes, by CI and the host install), labels and user said outright, and
nothing shipped that nothing imports (aiohttp: only kubernetes.aio needs it)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = (ROOT / "Containerfile").read_text(encoding="utf-8")
BUILD_IMAGE = (ROOT / "scripts" / "build_image.sh").read_text(encoding="utf-8")
LOCK = (ROOT / "requirements.lock").read_text(encoding="utf-8")
AIO_ONLY = {"aiohttp", "aiohttp-retry", "aiohappyeyeballs", "aiosignal", "frozenlist", "multidict", "propcache", "yarl"}


def _image_env() -> dict[str, str]:
    lines = (ROOT / "image.env").read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _lock() -> dict[str, tuple[str, list[str]]]:
    pins: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z])", LOCK.split("\n\n")[-1] if "\n\n" in LOCK else LOCK):
        head = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if head:
            pins[canonicalize_name(head.group(1))] = (head.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return pins


def test_both_builds_use_the_debian_point_release_of_image_env() -> None:
    release = _image_env()["DEBIAN_POINT_RELEASE"]
    assert f"ARG BASE=docker.io/library/debian:{release}-slim" in CONTAINERFILE
    assert f"ARG DEBIAN_POINT_RELEASE={release}\n" in CONTAINERFILE
    assert f'org.opencontainers.image.base.name="debian:{release}-slim"' in CONTAINERFILE
    assert '. "$repo/image.env"' in BUILD_IMAGE
    assert '[ "$release" != "$DEBIAN_POINT_RELEASE" ]' in BUILD_IMAGE  # another release is refused


def test_both_builds_record_the_package_versions_in_the_image() -> None:
    for text in (CONTAINERFILE, BUILD_IMAGE):
        for record in ("debian-packages.txt", "python-packages.txt", "debian-version.txt"):
            assert f"/usr/share/doc/migagent/{record}" in text


def test_both_builds_label_source_revision_and_created_and_the_containerfile_says_user_root() -> None:
    for label in ("source", "revision", "created"):
        assert f"org.opencontainers.image.{label}=" in CONTAINERFILE
        assert f"--config.label \"org.opencontainers.image.{label}=" in BUILD_IMAGE
    assert "\nUSER root\n" in CONTAINERFILE
    assert "NVML" in CONTAINERFILE.split("\nUSER root\n")[0].rsplit("\n\n", 1)[-1]  # the comment says why
    assert "--config.user root" in BUILD_IMAGE


def test_both_builds_install_exactly_the_locked_wheels() -> None:
    assert "--require-hashes --no-deps -r /src/requirements.lock" in CONTAINERFILE
    assert '--require-hashes -r "$repo/requirements.lock"' in BUILD_IMAGE
    assert "--require-hashes --no-deps -r /tmp/requirements.lock" in BUILD_IMAGE


def test_the_lock_pins_every_runtime_dependency_within_pyproject_with_hashes_and_no_aiohttp() -> None:
    pins = _lock()
    assert pins
    assert all(hashes for _, hashes in pins.values())
    assert set(pins).isdisjoint(AIO_ONLY)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements.lock"
        assert requirement.specifier.contains(pins[name][0]), f"{name}=={pins[name][0]} is outside {requirement}"


def test_constraints_carry_the_locks_versions() -> None:
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = {canonicalize_name(n): v for n, v in (line.split("==") for line in lines if line and line[0] != "#")}
    assert pins == {name: version for name, (version, _) in _lock().items()}


def test_nothing_the_agent_or_the_cli_loads_imports_aiohttp() -> None:
    modules = {name.replace("-", "_") for name in AIO_ONLY}
    code = (
        "import sys, migagent.cli.agent, migagent.cli.status, migagent.kube.adapter, kubernetes, kubernetes.client,"
        f" kubernetes.config, kubernetes.watch; print(sorted({{m.split('.')[0] for m in sys.modules}} & {modules!r}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "[]"
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "migagent").rglob("*.py"))
    assert not re.search(r"^\s*(import|from)\s+(aiohttp|kubernetes\.aio)\b", sources, flags=re.M)
