"""`migagent doctor`: what NVML reports about each GPU's MIG support, and how it differs from the catalog.

Read-only by default: it calls `GpuDriver.inspect`, which uses query functions only, so it is safe
on a node running workloads. Profiles are printed in the catalog's (models.yaml) format, so a GPU
the catalog lacks, or a row that is wrong, can be fixed by pasting this output. It also reports
what decides how a change goes: the architecture (and so whether a mode change needs a reset),
persistence and virtualization mode, confidential computing, and what would block a GPU reset.
A setting NVML will not tell (NO_PERMISSION, an older driver) is reported as unknown, not a failure.

`--capture` (opt-in) reads the CI profiles too: NVML lists them only inside a GI, so it creates one
GI of each profile in turn on an empty MIG-enabled GPU, reads them, and destroys it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from migagent.catalog import CiProfile, GiProfile, GpuModel, ProfileTable, driver_variants, model_by_pci_device_id
from migagent.cli.commands import summary as command_summary
from migagent.cli.doctor_view import NOTHING_BLOCKS, SIMULATED_NODE, Inline, readable_document, summary
from migagent.cli.node import add_node_arguments, host_root, open_node
from migagent.layout.catalog_diff import diff_profiles, gi_values
from migagent.layout.profile import gi_profile_name
from migagent.nvml.inspect import GpuReport, NodeReport
from migagent.nvml.reset_checks import HostResetChecks


class _Pair(list[int]):
    """A [start, size] placement, printed inline as in the catalog's meaning of it."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Pair, lambda dumper, pair: dumper.represent_sequence(
    "tag:yaml.org,2002:seq", list(pair), flow_style=True))
_Dumper.add_representer(Inline, lambda dumper, mapping: dumper.represent_mapping(
    "tag:yaml.org,2002:map", dict(mapping), flow_style=True))

_CI_NOT_READ = (
    "not read: NVML lists CI profiles only inside an existing GPU instance, and doctor creates none"
    " (doctor --capture does, on an empty MIG-enabled GPU)"
)
_RESET_RULES = {
    "ampere": "a MIG mode change is pending until the GPU is reset (nvidia-smi -r)",
    "hopper": "a MIG mode change applies at once; pending only while the GPU is in use, then a reset",
    "blackwell": "a MIG mode change applies at once; pending only while the GPU is in use, then a reset",
}


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
        "architecture": gpu.architecture or "unknown (NVML did not say)",
        "mode_change": _RESET_RULES.get(gpu.architecture or "", "unknown: the architecture is not known"),
        "persistence_mode": _on_off(gpu.persistence_mode),
        "virtualization_mode": gpu.virtualization_mode or "unknown (NVML did not say)",
        **({"unreadable": list(gpu.unreadable)} if gpu.unreadable else {}),
        "memory_mb": gpu.total_memory_mb,
        "catalog_row": row.key if row is not None else None,
        "gi_profiles": [_gi_row(gi, table, ci_read=gi.id in gpu.ci_profiles_read) for gi in gpu.gi_profiles],
        "diff_against_catalog": diff,
    }


def _on_off(value: bool | None) -> str:
    return "unknown (NVML did not say)" if value is None else ("on" if value else "off")


def node_document(report: NodeReport, *, reset_blockers: list[str] | None = None) -> dict[str, Any]:
    """The node, one entry per GPU, after a summary; `reset_blockers` None: a simulated node (no host)."""
    document: dict[str, Any] = {
        "driver_version": report.driver_version,
        "nvml_version": report.nvml_version,
        "confidential_computing": report.confidential_computing or "unknown (NVML did not say)",
        "reset_preconditions": [SIMULATED_NODE] if reset_blockers is None else reset_blockers or [NOTHING_BLOCKS],
        "gpus": [gpu_document(gpu) for gpu in report.gpus],
    }
    return {"summary": summary(document), **document}


def _reset_blockers(args: argparse.Namespace, report: NodeReport) -> list[str] | None:
    """What would block `nvidia-smi -r` on this host; None on a simulated node (it has no host)."""
    if args.simulate or args.state:
        return None
    persistent = [gpu.pci_bus_id for gpu in report.gpus if gpu.persistence_mode]
    return [str(b) for b in HostResetChecks(host_root(args)).blockers(persistence_mode_on=persistent)]


def _run(args: argparse.Namespace) -> int:
    with open_node(args) as driver:
        report = driver.capture() if args.capture else driver.inspect()
    document = node_document(report, reset_blockers=_reset_blockers(args, report))
    if args.output == "json":
        print(json.dumps(document, indent=2))
    else:  # for people: identical GPUs once
        readable = readable_document(document)
        sys.stdout.write(yaml.dump(readable, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("doctor", help=command_summary("doctor"))
    parser.add_argument(
        "-o", "--output", choices=("yaml", "json"), default="yaml", help="output format"
    )
    parser.add_argument(
        "--capture",
        action="store_true",
        help="also read every CI profile: create one GPU instance of each profile in turn, read it, destroy it"
        " (refused unless MIG is enabled and the GPU holds no GPU instance)",
    )
    add_node_arguments(parser)
    parser.set_defaults(handler=_run)
