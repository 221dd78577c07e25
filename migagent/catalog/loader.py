"""Load the shipped catalog (models.yaml beside this file) into `GpuModel` values."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from migagent.catalog.model import (
    Architecture,
    CiProfile,
    Confidence,
    Engines,
    GiProfile,
    GpuModel,
    Placement,
    ProfileTable,
)


def _placements(rows: list[list[int]]) -> tuple[Placement, ...]:
    return tuple(Placement(start, size) for start, size in rows)


def _ci(row: dict[str, Any]) -> CiProfile:
    return CiProfile(
        id=int(row["id"]),
        slices=int(row["slices"]),
        sms=int(row["sms"]),
        max_instances=int(row["max_instances"]),
        placements=_placements(row["placements"]),
        is_default=bool(row.get("default", False)),
    )


def _gi(row: dict[str, Any]) -> GiProfile:
    return GiProfile(
        id=int(row["id"]),
        enum_value=int(row["enum_value"]),
        slices=int(row["slices"]),
        memory_mb=int(row["memory_mb"]),
        sms=int(row["sms"]),
        engines=Engines(
            copy=int(row["ce"]), decoders=int(row["dec"]), encoders=int(row["enc"]),
            jpeg=int(row["jpg"]), ofa=int(row["ofa"]),
        ),
        max_instances=int(row["max_instances"]),
        placements=_placements(row["placements"]),
        ci_profiles=tuple(_ci(ci) for ci in row["ci_profiles"]),
        confidence=Confidence(row.get("confidence", "observed")),
        disputed=tuple(str(field) for field in row.get("disputed", ())),
        unknown=tuple(str(field) for field in row.get("unknown", ())),
        note=str(row.get("note", "")),
    )


def _model(row: dict[str, Any]) -> GpuModel:
    names = {int(pci, 16): str(name) for pci, name in row["names"].items()}
    return GpuModel(
        key=str(row["key"]),
        name=str(row["name"]),
        pci_device_ids=tuple(int(p, 16) for p in row["pci_device_ids"]),
        names_by_pci_id=tuple(sorted(names.items())),
        architecture=Architecture(row["architecture"]),
        max_mig_devices=int(row["max_mig_devices"]),
        profiles=ProfileTable(
            total_memory_mb=int(row["memory_mb"]),
            memory_slices=int(row["memory_slices"]),
            compute_slices=int(row["compute_slices"]),
            gi_profiles=tuple(_gi(gi) for gi in row["gi_profiles"]),
        ),
        note=str(row.get("note", "")),
        evidence=tuple(str(item) for item in row.get("evidence", ())),
        placements_confidence=Confidence(row.get("placements_confidence", "observed")),
        variant_of=str(row.get("variant_of", "")),
    )


# libyaml's loader reads the catalog some ten times faster than PyYAML's pure-Python one, which would
# otherwise be most of `migagent validate`'s run time; both resolve scalars by the same YAML 1.1 rules.
CATALOG_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def load_catalog() -> tuple[GpuModel, ...]:
    text = resources.files("migagent.catalog").joinpath("models.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=CATALOG_LOADER)  # a safe loader, C or Python
    return tuple(_model(row) for row in data["models"])
