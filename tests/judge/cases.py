"""The judge's matrix: every (config, GPU model) pair a config file means, and the per-model node
that judges them all at once.

A config means a model when one of its entries selects it (no device filter, or a filter naming
one of the model's PCI ids) and every profile that entry names exists on the model (NVIDIA's
config-default.yaml has unfiltered configs such as all-1g.5gb that only A100-40GB can hold; on
other models both tools refuse them, which tests/judge/test_refusals.py checks on one pair per
model). Pairs are judged per model on one simulated node with one GPU per pair: GPU i gets pair
i's entry (`devices: [i]`, filter kept) in a generated config `judge`; `gpu-i` holds that entry
alone, to name the pair when a whole-node run fails. Each GPU starts fresh and is configured only
by its own entry, so this is the per-pair judgement at one node per model instead of per pair.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from migagent.catalog import GpuModel, all_models
from migagent.layout.profile import ci_profile_name

REPO = Path(__file__).resolve().parents[2]
MIG_LAYOUTS = REPO / "configs" / "mig-layouts" / "mig-layouts.yaml"
JUDGE_CONFIG = "judge"


@dataclass(frozen=True)
class Pair:
    config: str
    model: GpuModel
    entry: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.config} on {self.model.key}"


def profile_names(model: GpuModel) -> set[str]:
    """Every mig-devices key the model can hold, in mig-parted's naming."""
    table = model.profiles
    return {str(ci_profile_name(gi, ci, table)) for gi in table.gi_profiles for ci in gi.ci_profiles}


def _selects(entry: dict[str, Any], model: GpuModel) -> bool:
    raw = entry.get("device-filter")
    if raw is None:
        return True
    wanted = {str(f).upper() for f in ([raw] if isinstance(raw, str) else raw)}
    return any(f"0X{pci_id:08X}" in wanted for pci_id in model.pci_device_ids)


def pairs(config_file: Path, model: GpuModel) -> list[Pair]:
    """The configs of `config_file` that mean `model`, with the entry that selects it."""
    configs: dict[str, list[dict[str, Any]]] = yaml.safe_load(config_file.read_text(encoding="utf-8"))["mig-configs"]
    names = profile_names(model)
    found = []
    for config, entries in configs.items():
        selecting = [e for e in entries if _selects(e, model)]
        if not selecting:
            continue
        if len(selecting) != 1 or selecting[0].get("devices") != "all":
            raise ValueError(f"{config_file.name}: {config} selects {model.key} other than by one 'devices: all' entry")
        entry = selecting[0]
        if set(entry.get("mig-devices") or {}) <= names:
            found.append(Pair(config, model, entry))
    return found


def judge_config(batch: Iterable[Pair], *, skip: set[int] | None = None) -> str:
    """The generated config file: `judge` (GPU i gets pair i's entry) and `gpu-i` (that entry alone).
    A pair in `skip` is not judged: its GPU keeps MIG disabled, as it starts (mig-parted's assert
    fails unless every GPU of the node is selected)."""
    judged = {
        index: {**pair.entry, "devices": [index]} for index, pair in enumerate(batch) if index not in (skip or set())
    }
    resting = [{"devices": [index], "mig-enabled": False} for index in sorted(skip or set())]
    configs: dict[str, Any] = {JUDGE_CONFIG: [*judged.values(), *resting]}
    configs |= {f"gpu-{index}": [entry] for index, entry in judged.items()}
    return yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=False)


def exported_by_gpu(text: str, gpus: int) -> dict[int, tuple[bool, dict[str, int]]]:
    """An export (`mig-configs: current: [...]`) as GPU index -> (MIG enabled, mig-devices)."""
    current: list[dict[str, Any]] = yaml.safe_load(text)["mig-configs"]["current"]
    found: dict[int, tuple[bool, dict[str, int]]] = {}
    for entry in current:
        devices = range(gpus) if entry["devices"] == "all" else entry["devices"]
        for index in devices:
            found[index] = (bool(entry["mig-enabled"]), dict(entry.get("mig-devices") or {}))
    return found


def judged_models() -> tuple[GpuModel, ...]:
    return all_models()
