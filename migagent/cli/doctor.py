"""`migagent doctor`: what NVML reports about each GPU's MIG support, and how it differs from the catalog.

Read-only by construction: it calls `GpuDriver.inspect`, which uses query functions only, so it is
safe on a node running workloads. Profiles are printed in the catalog's (models.yaml) format, so a
GPU the catalog lacks, or a row that is wrong, can be fixed by pasting this output.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from migagent.catalog import CiProfile, GiProfile, GpuModel, ProfileTable, driver_variants, model_by_pci_device_id
from migagent.cli.commands import summary
from migagent.cli.node import add_node_arguments, open_node
from migagent.layout.catalog_diff import diff_profiles, gi_values
from migagent.layout.profile import gi_profile_name
from migagent.nvml.inspect import GpuReport, NodeReport


class _Pair(list[int]):
    """A [start, size] placement, printed inline as in the catalog's meaning of it."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Pair, lambda dumper, pair: dumper.represent_sequence(
    "tag:yaml.org,2002:seq", list(pair), flow_style=True))

_CI_NOT_READ = "not read: NVML lists CI profiles only inside an existing GPU instance, and doctor creates none"


def _hex(value: int | None) -> str | None:
    return None if value is None else f"0x{value:08X}"


def reported_table(gpu: GpuReport, model: GpuModel | None) -> ProfileTable:
    """The GPU's profiles as a table; names need total memory, taken from the catalog when NVML hides it."""
    total = gpu.total_memory_mb
    if total is None:
        total = model.profiles.total_memory_mb if model is not None else max(
            (gi.memory_mb for gi in gpu.gi_profiles), default=0
        )
    placements = [p for gi in gpu.gi_profiles for p in gi.placements]
    return ProfileTable(
        total_memory_mb=total,
        memory_slices=max((p.end for p in placements), default=0),
        compute_slices=max((gi.slices for gi in gpu.gi_profiles), default=0),
        gi_profiles=gpu.gi_profiles,
    )


def _closest_row(gpu: GpuReport) -> tuple[GpuModel | None, list[str]]:
    """The catalog row (or driver variant) for this PCI id that NVML's report differs from least."""
    primary = model_by_pci_device_id(gpu.pci_device_id)
    rows = [primary] if primary is not None else []
    rows += [v for v in driver_variants() if gpu.pci_device_id in v.pci_device_ids]
    if not rows:
        return None, [f"no catalog row for PCI device id {_hex(gpu.pci_device_id)}: the profiles above, in the"
                      " catalog's format, are the start of one"]
    diffs = [
        (row, diff_profiles(reported_table(gpu, row), row, ci_profiles_read=gpu.ci_profiles_read)) for row in rows
    ]
    return min(diffs, key=lambda pair: len(pair[1]))


def _ci_row(ci: CiProfile) -> dict[str, Any]:
    return {
        "id": ci.id, "slices": ci.slices, "sms": ci.sms, "max_instances": ci.max_instances,
        "placements": [_Pair((p.start, p.size)) for p in ci.placements], "default": ci.is_default,
    }


def _gi_row(gi: GiProfile, table: ProfileTable, *, ci_read: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"id": gi.id, "name": f"MIG {gi_profile_name(gi, table)}", **gi_values(gi)}
    row["placements"] = [_Pair((p.start, p.size)) for p in gi.placements]
    row["ci_profiles"] = [_ci_row(ci) for ci in gi.ci_profiles] if ci_read else _CI_NOT_READ
    return row


def gpu_document(gpu: GpuReport) -> dict[str, Any]:
    row, diff = _closest_row(gpu)
    table = reported_table(gpu, row)
    if not gpu.mig_capable:
        diff = ["not MIG capable: nvmlDeviceGetMigMode answers NOT_SUPPORTED"]
    elif not gpu.gi_profiles:
        diff = ["NVML reported no GI profiles: some drivers refuse profile queries while MIG is disabled; doctor"
                " changes nothing, so enable MIG mode and run it again"]
    return {
        "index": gpu.index,
        "name": gpu.name,
        "uuid": gpu.uuid,
        "pci_bus_id": gpu.pci_bus_id,
        "pci_device_id": _hex(gpu.pci_device_id),
        "pci_subsystem_id": _hex(gpu.pci_subsystem_id),
        "mig": {"capable": gpu.mig_capable, "current": gpu.mig_current, "pending": gpu.mig_pending},
        "memory_mb": gpu.total_memory_mb,
        "catalog_row": row.key if row is not None else None,
        "gi_profiles": [_gi_row(gi, table, ci_read=gi.id in gpu.ci_profiles_read) for gi in gpu.gi_profiles],
        "diff_against_catalog": diff,
    }


def node_document(report: NodeReport) -> dict[str, Any]:
    return {
        "driver_version": report.driver_version,
        "nvml_version": report.nvml_version,
        "gpus": [gpu_document(gpu) for gpu in report.gpus],
    }


def _run(args: argparse.Namespace) -> int:
    with open_node(args) as driver:
        report = driver.inspect()
    document = node_document(report)
    if args.output == "json":
        print(json.dumps(document, indent=2))
    else:
        sys.stdout.write(yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("doctor", help=summary("doctor"))
    parser.add_argument(
        "-o", "--output", choices=("yaml", "json"), default="yaml", help="output format"
    )
    add_node_arguments(parser)
    parser.set_defaults(handler=_run)
