"""The documented ways of keeping the standalone device plugin off paused nodes keep its placement.

The plugin chart's default affinity has three node-selector terms (ORed). A strategic-merge patch of
`nodeSelectorTerms` (a list without a merge key) replaces them all, and a pause condition added to
one term only leaves the other two matching a paused node. These tests run the documented JSON patch
with `kubectl patch --local` against the DaemonSet the chart renders with its defaults
(data/nvdp-daemonset.yaml) and check that every term keeps its expressions plus the pause one, that
the Helm values file gives the same terms, and that the documented revert restores the chart's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.integration.deploy.manifests import DEPLOY, kubectl

DATA = Path(__file__).parent / "data"
CHART_DAEMONSET = DATA / "nvdp-daemonset.yaml"
STANDALONE = DEPLOY / "overlays" / "standalone"
PAUSE = {
    "key": "nvidia.com/gpu.deploy.device-plugin",
    "operator": "NotIn",
    "values": ["false", "paused-for-mig-change"],
}


def _terms(daemonset: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = daemonset["spec"]["template"]["spec"]["affinity"]
    terms: list[dict[str, Any]] = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return terms


def _patch(manifest: Path, patch: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl(), "patch", "--local", "-f", str(manifest), "--type=json", f"--patch-file={patch}", "-o", "yaml"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _patched(manifest: Path, patch: Path) -> dict[str, Any]:
    result = _patch(manifest, patch)
    assert result.returncode == 0, result.stderr
    loaded: dict[str, Any] = yaml.safe_load(result.stdout)
    return loaded


def test_the_json_patch_adds_the_pause_condition_to_every_term_of_the_charts_default_affinity() -> None:
    chart_terms = _terms(yaml.safe_load(CHART_DAEMONSET.read_text(encoding="utf-8")))
    assert len(chart_terms) == 3
    patched = _terms(_patched(CHART_DAEMONSET, STANDALONE / "device-plugin-affinity.json"))
    assert patched == [{"matchExpressions": [*term["matchExpressions"], PAUSE]} for term in chart_terms]


def test_the_helm_values_carry_the_same_terms_as_the_patched_chart_default() -> None:
    values = yaml.safe_load((STANDALONE / "device-plugin-values.yaml").read_text(encoding="utf-8"))
    patched = _terms(_patched(CHART_DAEMONSET, STANDALONE / "device-plugin-affinity.json"))
    assert (
        values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        == patched
    )
    assert values["migStrategy"] == "mixed"


def test_the_revert_patch_restores_the_charts_default_affinity(tmp_path: Path) -> None:
    patched = tmp_path / "patched.yaml"
    patched.write_text(_patch(CHART_DAEMONSET, STANDALONE / "device-plugin-affinity.json").stdout, encoding="utf-8")
    reverted = _terms(_patched(patched, STANDALONE / "device-plugin-affinity-revert.json"))
    assert reverted == _terms(yaml.safe_load(CHART_DAEMONSET.read_text(encoding="utf-8")))


def test_the_json_patch_refuses_a_daemonset_whose_affinity_is_not_the_charts_default(tmp_path: Path) -> None:
    """Applied twice, or to a release with its own affinity, it fails instead of patching half the terms."""
    once = tmp_path / "once.yaml"
    once.write_text(_patch(CHART_DAEMONSET, STANDALONE / "device-plugin-affinity.json").stdout, encoding="utf-8")
    twice = _patch(once, STANDALONE / "device-plugin-affinity.json")
    assert twice.returncode != 0
    assert "test" in twice.stderr.lower()
