"""`migagent validate`: format, resolution and fit of layouts, per catalog GPU model, without a GPU.

Entries with a device filter must resolve and fit on every catalog model the filter matches. An
entry with no filter is mig-parted's way of saying "wherever these profiles exist" (its default file
has `all-1g.5gb` unfiltered): models lacking one of its profiles are listed as not applicable, and
it must fit on at least one model that offers them all (a model where it does not fit is a warning)
— unless models were named with --gpu-model, where each named model must fit. Entries only for
hardware the catalog does not describe (a filter matching no catalog model, or profiles no catalog
model offers) cannot be checked: they are warnings, not errors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from migagent.catalog import GpuModel, UnknownGpuModelError, all_models, model_by_key
from migagent.cli.layout_args import add_config_file_argument, add_selected_config_argument, read_layout
from migagent.errors import InvalidLayoutError, LayoutDoesNotFitError
from migagent.layout.desired import DesiredNode
from migagent.layout.packing import ProfileNotOfferedError, resolve_profile
from migagent.layout.parse import select_config
from migagent.layout.resolve import GpuIdentity, resolve_entry
from migagent.layout.spec import LayoutEntry, LayoutFile
from migagent.layout.strict_yaml import path_part
from migagent.planning.offline import empty_observation
from migagent.planning.planner import plan


@dataclass
class _Verdict:
    fits: list[str] = field(default_factory=list)
    not_applicable: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _identity(model: GpuModel, entry: LayoutEntry) -> GpuIdentity:
    pci = next((p for p in model.pci_device_ids if entry.may_match_pci(p)), model.primary_pci_device_id)
    label = f"GPU 0 ({model.key})"
    return GpuIdentity(index=0, pci_device_id=pci, subsystem_id=None, profiles=model.profiles, label=label)


def _check_on_model(entry: LayoutEntry, model: GpuModel, *, config: str) -> None:
    """Resolve the entry on an empty GPU of `model` and run the exact placement solver on it."""
    desired = resolve_entry(entry, _identity(model, entry), config_name=config)
    plan(empty_observation([model], mig_enabled=entry.mig_enabled), DesiredNode(gpus=(desired,)))


def _offers_every_profile(entry: LayoutEntry, model: GpuModel) -> bool:
    try:
        for profile, _count in entry.requested:
            resolve_profile(profile, model.profiles)
    except ProfileNotOfferedError:
        return False
    return True


def _check_entry(
    entry: LayoutEntry, models: Sequence[GpuModel], *, config: str, strict: bool, verdict: _Verdict
) -> None:
    where = f"mig-configs.{path_part(config)}[{entry.index}]"
    targeted = [m for m in models if any(entry.may_match_pci(p) for p in m.pci_device_ids)]
    if not targeted:
        # e.g. mig-parted's entries for GB200 or RTX PRO 6000: hardware the catalog does not describe.
        filters = ", ".join(str(f) for f in entry.device_filter)
        verdict.warnings.append(f"{where}: device-filter {filters} matches no catalog model; not checked")
        return
    # Without named models, an unfiltered entry means "wherever these profiles exist" (mig-parted's
    # default file relies on that): models lacking a profile are not applicable, not errors.
    lenient = not strict and not entry.device_filter
    candidates = [m for m in targeted if not lenient or _offers_every_profile(entry, m)]
    if lenient and not candidates:
        verdict.warnings.append(f"{where}: no catalog model offers all of its profiles; not checked")
        return
    verdict.not_applicable.extend(f"{where} on {m.key}" for m in targeted if m not in candidates)
    misfits: list[tuple[str, LayoutDoesNotFitError]] = []
    for model in candidates:
        try:
            _check_on_model(entry, model, config=config)
        except LayoutDoesNotFitError as exc:
            misfits.append((model.key, exc))
        else:
            verdict.fits.append(f"{where} on {model.key}")
    # An unfiltered entry that fits somewhere is meant for those models (older mig-parted files have
    # an unfiltered `1g.10gb: 7` for 80 GB parts): elsewhere it would fail at apply time, so say so.
    if lenient and len(misfits) < len(candidates):
        verdict.warnings.extend(
            f"{where} would fail on {key} (no device-filter keeps it off that model): {exc}" for key, exc in misfits
        )
    else:
        verdict.problems.extend(f"{where} on {key}: {exc}" for key, exc in misfits)


def validate_layout(layout: LayoutFile, *, config: str | None, model_keys: Sequence[str] | None) -> dict[str, _Verdict]:
    names = [config] if config is not None else list(layout.names)
    try:
        models = [model_by_key(k) for k in model_keys] if model_keys else list(all_models())
    except UnknownGpuModelError as exc:
        raise InvalidLayoutError(f"--gpu-model: {exc}") from exc
    verdicts: dict[str, _Verdict] = {}
    for name in names:
        verdict = verdicts.setdefault(name, _Verdict())
        for entry in select_config(layout, name):
            _check_entry(entry, models, config=name, strict=bool(model_keys), verdict=verdict)
    return verdicts


def _run(args: argparse.Namespace) -> int:
    layout = read_layout(args.config_file)
    verdicts = validate_layout(layout, config=args.selected_config, model_keys=args.gpu_model)
    problems = [p for v in verdicts.values() for p in v.problems]
    for name, verdict in verdicts.items():
        models = sorted({f.rsplit(" on ", 1)[1] for f in verdict.fits})
        if verdict.problems:
            print(f"{name}: INVALID")
        elif models:
            print(f"{name}: ok; fits on {', '.join(models)}")
        else:
            print(f"{name}: not checked (no catalog model it applies to)")
        for warning in verdict.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
        if args.verbose and verdict.not_applicable:
            print(f"  not applicable (profiles not offered): {'; '.join(verdict.not_applicable)}")
    if problems:
        raise InvalidLayoutError(f"{layout.path}: {len(problems)} problem(s):\n" + "\n".join(problems))
    print(f"{layout.path}: {len(verdicts)} config(s) valid")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("validate", help="check a layout file's format, resolution and fit, offline")
    add_config_file_argument(parser)
    add_selected_config_argument(parser)
    parser.add_argument(
        "--gpu-model", action="append", metavar="KEY",
        help="catalog model to check on (repeatable; default: every model the filters match)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="also list models an entry does not apply to")
    parser.set_defaults(handler=_run)
