"""Offline validation of a layout file's configs on catalog GPU models, with what was and was not checked.

Entries with a device filter must resolve and fit on every model (of those considered) the filter
matches. An entry with no filter is mig-parted's way of saying "wherever these profiles exist" (its
default file has `all-1g.5gb` unfiltered): models lacking one of its profiles are skipped, and it
must fit on at least one model that offers them all (a model where it does not fit is a warning),
unless models were named, where each named model must fit. Entries for hardware the catalog does
not describe cannot be checked. A config is only called valid when every entry was checked
somewhere, or (models named) is for other models than those; skipped is never counted as valid.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from migagent.catalog import GpuModel, all_models, driver_variants
from migagent.errors import LayoutDoesNotFitError
from migagent.layout.desired import DesiredNode
from migagent.layout.gpus import gpu_ranges, gpus_named
from migagent.layout.packing import ProfileNotOfferedError, offered_gi_names, resolve_profile
from migagent.layout.parse import select_config
from migagent.layout.profile import MigProfile
from migagent.layout.resolve import GpuIdentity, resolve_entry
from migagent.layout.spec import ALL_DEVICES, LayoutEntry, LayoutFile, PciFilter
from migagent.layout.strict_yaml import path_part
from migagent.planning.offline import empty_observation
from migagent.planning.planner import plan

NO_FILTER_MATCH = "not matched by any entry's device-filter"


@functools.cache
def _models_by_key() -> dict[str, GpuModel]:
    return {model.key: model for model in (*all_models(), *driver_variants())}


class ConfigStatus(StrEnum):
    VALID = "valid"
    PARTLY_CHECKED = "partly checked"
    NOT_CHECKED = "not checked"
    INVALID = "INVALID"


@dataclass
class ConfigReport:
    """What validating one config found, per model and per entry."""

    name: str
    checked: dict[str, list[int]] = field(default_factory=dict)  # model -> entries that fit on it
    skip_reasons: dict[str, list[str]] = field(default_factory=dict)  # model -> why an entry passed it by
    unchecked_entries: list[str] = field(default_factory=list)  # "[i] why it was checked nowhere"
    other_models: list[int] = field(default_factory=list)  # of those, entries only for models not named
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    misfits: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """(model, why) -> unfiltered entries that fit elsewhere but would fail on that model, so stated once."""

    @property
    def status(self) -> ConfigStatus:
        if self.problems:
            return ConfigStatus.INVALID
        if not self.checked:
            return ConfigStatus.NOT_CHECKED
        partly = len(self.unchecked_entries) > len(self.other_models)
        return ConfigStatus.PARTLY_CHECKED if partly else ConfigStatus.VALID

    def skipped(self) -> dict[str, str]:
        """Models no entry was checked on, with the reason, in catalog order."""
        return {model: self._skip_reason(model, reasons) for model, reasons in self.skip_reasons.items()
                if model not in self.checked}

    def _skip_reason(self, model: str, reasons: list[str]) -> str:
        specific = [r for r in dict.fromkeys(reasons) if r != NO_FILTER_MATCH]
        misfit = sorted({index for (key, _), indices in self.misfits.items() if key == model for index in indices})
        if misfit:
            specific.append(f"[{gpu_ranges(misfit)}] {'does' if len(misfit) == 1 else 'do'} not fit (see warning)")
        return "; ".join(specific) if specific else NO_FILTER_MATCH

    def misfit_warnings(self) -> list[str]:
        """One warning per model and reason, naming every entry it holds for (`[0-199]`)."""
        where = f"mig-configs.{path_part(self.name)}"
        return [
            f"{where}[{gpu_ranges(indices)}] would fail on {key} (no device-filter keeps it off that model): {error}"
            for (key, error), indices in self.misfits.items()
        ]


def _identity(model: GpuModel, entry: LayoutEntry) -> GpuIdentity:
    pci = next((p for p in model.pci_device_ids if entry.may_match_pci(p)), model.primary_pci_device_id)
    return GpuIdentity(index=0, pci_device_id=pci, subsystem_id=None, profiles=model.profiles,
                       label=f"GPU 0 ({model.key})")


_FitKey = tuple[str, int, bool, tuple[tuple[MigProfile, int], ...]]
_RESOLVE_FAILS = ""
_Outcomes = dict[_FitKey, str | None]
"""Per request: None (fits), the solver's message, or _RESOLVE_FAILS (resolving names the config)."""


def _check_on_model(entry: LayoutEntry, model: GpuModel, *, config: str, outcomes: _Outcomes) -> None:
    """Resolve the entry on an empty GPU of `model` and run the exact placement solver on it.

    Whether it fits depends only on the model, the PCI id the entry picks and what it asks for, so
    each such request is resolved and solved once (a large generated file repeats a few dozen
    requests thousands of times). A request that does not resolve is resolved again for each entry,
    because that message names the config; the solver's names only the GPU and the profiles."""
    identity = _identity(model, entry)
    key: _FitKey = (model.key, identity.pci_device_id, entry.mig_enabled, entry.requested)
    if key not in outcomes:
        outcomes[key] = _RESOLVE_FAILS
        desired = resolve_entry(entry, identity, config_name=config)
        try:
            plan(empty_observation([model], mig_enabled=entry.mig_enabled), DesiredNode(gpus=(desired,)))
        except LayoutDoesNotFitError as exc:
            outcomes[key] = str(exc)
        else:
            outcomes[key] = None
    failure = outcomes[key]
    if failure == _RESOLVE_FAILS:
        resolve_entry(entry, identity, config_name=config)  # raises, naming this config
    if failure:
        raise LayoutDoesNotFitError(failure)


def _missing_profiles(entry: LayoutEntry, model: GpuModel) -> tuple[str, ...]:
    return _missing_by_model(tuple(profile for profile, _count in entry.requested)).get(model.key, ())


@functools.lru_cache(maxsize=4096)
def _missing_by_model(profiles: tuple[MigProfile, ...]) -> dict[str, tuple[str, ...]]:
    """Per catalog model (and driver variant), the profiles it does not offer (cached: files repeat
    the same requests); the cached dicts are only read."""
    missing: dict[str, tuple[str, ...]] = {}
    for key, model in _models_by_key().items():
        lacking = []
        for profile in profiles:
            try:
                resolve_profile(profile, model.profiles)
            except ProfileNotOfferedError:
                lacking.append(str(profile))
        missing[key] = tuple(lacking)
    return missing


def _offered_nowhere(entry: LayoutEntry) -> list[str]:
    """For each profile of `entry` that no catalog model (nor driver variant) offers, a message naming
    the profiles of the same size that exist: `1g.11gb` is more likely a typo than unknown hardware."""
    everywhere = [*all_models(), *driver_variants()]
    messages = []
    for profile, _count in entry.requested:
        offered = []
        for model in everywhere:
            try:
                resolve_profile(profile, model.profiles)
            except ProfileNotOfferedError:
                continue
            offered.append(model.key)
        if not offered:
            names = {name for model in everywhere for name in offered_gi_names(model.profiles)}
            same_size = sorted((n for n in names if n.startswith(f"{profile.g}g.")), key=lambda n: (len(n), n))
            known = ", ".join(same_size) or "none"
            messages.append(f"profile '{profile}' is offered by no catalog GPU model ({profile.g}g profiles: {known})")
    return messages


def _report_uncheckable(entry: LayoutEntry, report: ConfigReport, *, where: str) -> None:
    """No model offers all the entry's profiles: a profile offered nowhere is a problem, a combination
    no model has is left unchecked."""
    unknown = _offered_nowhere(entry)
    if unknown:
        report.problems.extend(f"{where}: {message}" for message in unknown)
        return
    wanted = ", ".join(str(p) for p, _ in entry.requested)
    report.unchecked_entries.append(f"[{entry.index}] no catalog model offers all of {wanted}")


def _targets(entry: LayoutEntry, model: GpuModel) -> bool:
    return not entry.device_filter or _filter_targets(entry.device_filter, model.pci_device_ids)


@functools.lru_cache(maxsize=4096)
def _filter_targets(device_filter: tuple[PciFilter, ...], pci_device_ids: tuple[int, ...]) -> bool:
    """Whether a device filter may match one of a model's PCI ids (cached: files repeat filters)."""
    return not device_filter or any(f.may_match(p) for f in device_filter for p in pci_device_ids)


def _filter_text(entry: LayoutEntry) -> str:
    return ", ".join(str(f) for f in entry.device_filter)


def _untargeted_reason(entry: LayoutEntry, models: Sequence[GpuModel], elsewhere: list[str]) -> str:
    if not elsewhere:
        return f"[{entry.index}] device-filter {_filter_text(entry)} matches no catalog model"
    named = ", ".join(m.key for m in models)
    return (f"[{entry.index}] device-filter {_filter_text(entry)} matches {', '.join(elsewhere)}, "
            f"not among the models checked ({named})")


def _targeted(entry: LayoutEntry, models: Sequence[GpuModel], variants: Sequence[GpuModel]) -> list[GpuModel]:
    """The models an entry's filter matches; a driver variant shares its model's PCI id, so an entry
    filtered to that id is applied to (and checked on) the variant too."""
    targeted = [m for m in models if _targets(entry, m)]
    if entry.device_filter:
        targeted += [v for v in variants if _targets(entry, v) and v not in targeted]
    return targeted


def _check_entry(
    entry: LayoutEntry,
    models: Sequence[GpuModel],
    *,
    strict: bool,
    report: ConfigReport,
    variants: Sequence[GpuModel] = (),
    outcomes: _Outcomes,
) -> None:
    where = f"mig-configs.{path_part(report.name)}[{entry.index}]"
    targeted = _targeted(entry, models, variants)
    targeted_keys = {m.key for m in targeted}  # keys, not models: comparing catalog rows is slow
    for model in models:
        if model.key not in targeted_keys:
            report.skip_reasons.setdefault(model.key, []).append(NO_FILTER_MATCH)
    if not targeted:
        elsewhere = [m.key for m in all_models() if _targets(entry, m) and m not in models]
        report.unchecked_entries.append(_untargeted_reason(entry, models, elsewhere))
        report.other_models += [entry.index] * bool(elsewhere)
        return
    lenient = not strict and not entry.device_filter
    # A driver variant (the names an early GB200 driver reported) is one more place such an entry may be meant for.
    pool = [*targeted, *(v for v in variants if v not in targeted)] if lenient else targeted
    missing = {m.key: _missing_profiles(entry, m) for m in pool} if lenient else {}
    candidates = [m for m in pool if not missing.get(m.key)]
    for model in targeted:
        if missing.get(model.key):
            report.skip_reasons.setdefault(model.key, []).append(f"lacks {', '.join(missing[model.key])}")
    if not candidates:
        _report_uncheckable(entry, report, where=where)
        return
    misfits: list[tuple[str, LayoutDoesNotFitError]] = []
    for model in candidates:
        try:
            _check_on_model(entry, model, config=report.name, outcomes=outcomes)
        except LayoutDoesNotFitError as exc:
            misfits.append((model.key, exc))
        else:
            report.checked.setdefault(model.key, []).append(entry.index)
    # An unfiltered entry that fits somewhere is meant for those models (older mig-parted files have
    # an unfiltered `1g.10gb: 7` for 80 GB parts): elsewhere it would fail at apply time, so say so.
    if lenient and len(misfits) < len(candidates):
        for key, error in misfits:
            report.skip_reasons.setdefault(key, [])
            report.misfits.setdefault((key, str(error)), []).append(entry.index)
    else:
        report.problems.extend(f"{where} on {key}: {exc}" for key, exc in misfits)


BOARD_GPUS = 8
"""GPUs on one HGX or DGX baseboard, the usual MIG node: indices 0-7."""


def _warn_beyond_a_board(entry: LayoutEntry, report: ConfigReport) -> None:
    """A GPU index past a baseboard's is often a typo (`[0, 9]` for `[0, 1]`). Which GPUs a node has is
    known only on the node, where apply refuses an index that selects none; offline, it is a warning."""
    if entry.devices == ALL_DEVICES:
        return
    beyond = [index for index in entry.devices if index >= BOARD_GPUS]
    if beyond:
        where = f"mig-configs.{path_part(report.name)}[{entry.index}]"
        report.warnings.append(
            f"{where} lists {gpus_named(beyond)}, which only a node of {max(beyond) + 1} or more GPUs has (an HGX"
            f" board has GPUs 0-{BOARD_GPUS - 1}); on a node without, apply refuses this config"
        )


def validate_layout(
    layout: LayoutFile, *, config: str | None, models: Sequence[GpuModel] | None
) -> list[ConfigReport]:
    """One report per selected config (all of them when `config` is None), on `models` or every catalog model."""
    names = [config] if config is not None else list(layout.names)
    considered = list(models) if models else list(all_models())
    reports = []
    outcomes: _Outcomes = {}
    for name in names:
        report = ConfigReport(name)
        for entry in select_config(layout, name):
            _check_entry(entry, considered, strict=bool(models), report=report,
                         variants=() if models else driver_variants(), outcomes=outcomes)
            _warn_beyond_a_board(entry, report)
        report.warnings.extend(report.misfit_warnings())
        shown = [*considered, *([] if models else driver_variants())]
        report.checked = {m.key: report.checked[m.key] for m in shown if m.key in report.checked}
        reports.append(report)
    return reports
