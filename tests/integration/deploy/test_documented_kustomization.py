"""The kustomization the READMEs tell an admin to write renders, with the image it names.

The block is read from deploy/README.md (GPU Operator path, step 5), README.md and docs/migrating.md,
`<path to>` and the layouts file filled in, and rendered with `kubectl kustomize` as the admin would apply it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.integration.deploy.manifests import DEPLOY, REPO, kubectl


def _blocks(readme: Path) -> list[str]:
    text = readme.read_text(encoding="utf-8")
    return [
        "\n".join(line.removeprefix("   ") for line in block.splitlines())
        for block in re.findall(r"```(?:yaml|sh)\n(.*?)```", text, flags=re.S)
        if "kind: Kustomization" in block and "images:" in block
    ]


@pytest.mark.parametrize("readme", ["deploy/README.md", "README.md", "docs/migrating.md"])
def test_the_documented_kustomization_sets_the_image_and_renders(readme: str, tmp_path: Path) -> None:
    blocks = _blocks(REPO / readme)
    assert blocks, f"{readme} shows no kustomization with an images: entry"
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    shutil.copy(DEPLOY / "base" / "mig-layouts.yaml", tmp_path / "my-layouts.yaml")
    for block in blocks:
        body = block.split("<<'EOF'\n", 1)[-1].split("\nEOF", 1)[0]
        (tmp_path / "kustomization.yaml").write_text(body.replace("<path to>", "."), encoding="utf-8")
        result = subprocess.run(
            [kubectl(), "kustomize", str(tmp_path)], capture_output=True, text=True, check=False, timeout=120
        )
        assert result.returncode == 0, result.stderr
        daemonset = next(d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "DaemonSet")
        assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == "REGISTRY/migagent:0.1.0"


def test_the_readme_labels_a_gpu_operator_node_with_a_layout_the_single_strategy_takes() -> None:
    """The overlay runs the operator's default strategy, single (or `auto`, reading it from the
    ClusterPolicy, which is single unless changed): the documented layout puts one profile on a node,
    which every strategy takes."""
    overlay = (DEPLOY / "overlays" / "gpu-operator" / "kustomization.yaml").read_text(encoding="utf-8")
    assert "--mig-strategy=mixed" not in overlay
    layouts = yaml.safe_load((DEPLOY / "base" / "mig-layouts.yaml").read_text(encoding="utf-8"))["mig-configs"]
    for readme in ("README.md", "deploy/README.md"):
        text = (REPO / readme).read_text(encoding="utf-8")
        labelled = r"nvidia\.com/mig\.config=([\w.-]+) --overwrite`?\s*(?:#\s*gpu-operator|\. Nodes)"
        names = re.findall(labelled, text)
        assert names, f"{readme} labels no GPU Operator node"
        for name in names:
            profiles = {p for entry in layouts[name] for p in (entry.get("mig-devices") or {})}
            assert len(profiles) <= 1, f"{readme}: {name} mixes {profiles}, which --mig-strategy=single refuses"
