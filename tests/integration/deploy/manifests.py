"""Render the kustomizations under deploy/ and pick objects out of the result.

`kubectl kustomize` is the renderer users run, so the tests use it rather than a Python
re-implementation; a machine without kubectl fails these tests (it does not skip them).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
BASE = DEPLOY / "base"
OVERLAYS = ("gpu-operator", "standalone")
KUSTOMIZATIONS = ("base", *(f"overlays/{name}" for name in OVERLAYS))

Obj = dict[str, Any]


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail(
            "kubectl is not on PATH: the deploy checks render deploy/ with `kubectl kustomize`. "
            "Install kubectl (any version with kustomize v5, e.g. kubectl >= 1.27) and run again."
        )
    return path


@functools.cache
def _render_text(kustomization: str) -> str:
    result = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / kustomization)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        pytest.fail(f"`kubectl kustomize deploy/{kustomization}` failed:\n{result.stderr}")
    return result.stdout


@functools.cache
def _render_site_text(resource: str, components: tuple[str, ...]) -> str:
    with tempfile.TemporaryDirectory(prefix="migagent-site-") as workdir:
        root = Path(workdir)
        shutil.copytree(DEPLOY, root / "deploy")
        (root / "site").mkdir()
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [f"../deploy/{resource}"],
            "components": [f"../deploy/{component}" for component in components],
        }
        (root / "site" / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
        result = subprocess.run(
            [kubectl(), "kustomize", str(root / "site")], capture_output=True, text=True, check=False, timeout=120
        )
    if result.returncode != 0:
        pytest.fail(f"kustomize of deploy/{resource} with {', '.join(components)} failed:\n{result.stderr}")
    return result.stdout


def render_with_components(resource: str, *components: str) -> list[Obj]:
    """What an admin's own kustomization renders: deploy/<resource> with deploy/<component>s added."""
    return [doc for doc in yaml.safe_load_all(_render_site_text(resource, components)) if doc]


def render(kustomization: str) -> list[Obj]:
    """The objects `kubectl kustomize deploy/<kustomization>` produces (fresh copies each call)."""
    return [doc for doc in yaml.safe_load_all(_render_text(kustomization)) if doc]


def of_kind(objects: list[Obj], kind: str) -> Iterator[Obj]:
    return (obj for obj in objects if obj["kind"] == kind)


def only(objects: list[Obj], kind: str) -> Obj:
    found = list(of_kind(objects, kind))
    assert len(found) == 1, f"expected exactly one {kind}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def agent_container(objects: list[Obj]) -> Obj:
    daemonset = only(objects, "DaemonSet")
    containers: list[Obj] = daemonset["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "migagent")


def flag_values(args: list[str]) -> dict[str, str]:
    """`--name=value` flags of a container's args, by name (the manifests always use the = form)."""
    flags = {}
    for arg in args:
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
            flags[name] = value
    return flags
