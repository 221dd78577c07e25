"""`migagent validate`: format, resolution and fit of layouts, per catalog GPU model, without a GPU.

One line per config: the models it fits, and any entry that could not be checked (with -v, also
the models skipped and why); see `planning.validation` for the rules. Only a config whose every
entry was checked is counted valid; exit 1 when any config is invalid or could be checked on no
model at all (an unknown profile such as `1g.11gb` is invalid).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence

from migagent.catalog import UnknownGpuModelError, model_by_key
from migagent.cli.commands import summary
from migagent.cli.layout_args import add_config_file_argument, add_selected_config_argument, read_layout
from migagent.errors import InvalidLayoutError, UsageError
from migagent.layout.gpus import gpu_ranges
from migagent.layout.parse import cap_problems
from migagent.planning.validation import ConfigReport, ConfigStatus, validate_layout


def _line(report: ConfigReport) -> str:
    """One line per config: what it is, and the models it fits."""
    checked = ", ".join(report.checked)
    unchecked = "; ".join(report.unchecked_entries)
    if report.status is ConfigStatus.VALID:  # entries for models not named (--gpu-model) are said, not listed
        others = f"; entries [{gpu_ranges(report.other_models)}] are for other models" if report.other_models else ""
        return f"{report.name}: valid on {checked}{others}"
    if report.status is ConfigStatus.PARTLY_CHECKED:
        return f"{report.name}: partly checked; valid on {checked}; not checked: {unchecked}"
    if report.status is ConfigStatus.NOT_CHECKED:
        return f"{report.name}: NOT CHECKED: {unchecked}"
    fits = f" (valid on {checked})" if checked else ""
    return f"{report.name}: INVALID{fits}: {len(report.problems)} problem(s), listed below"


_WIDTH = 100


def _wrapped(text: str) -> str:
    """A detail of -v, wrapped under its config: a list of 17 models or 200 entries stays readable."""
    return textwrap.fill(text, width=_WIDTH, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False)


def _models(models: Sequence[str]) -> str:
    return f"{len(models)} models: {', '.join(models)}" if len(models) > 1 else models[0]


def _details(report: ConfigReport) -> list[str]:
    """Models grouped by the entries checked on them, and by why they were skipped."""
    by_entries: dict[str, list[str]] = {}
    for model, entries in report.checked.items():
        by_entries.setdefault(gpu_ranges(entries), []).append(model)
    by_reason: dict[str, list[str]] = {}
    for model, reason in report.skipped().items():
        by_reason.setdefault(reason, []).append(model)
    lines = [f"checked entries [{entries}] on {_models(models)}" for entries, models in by_entries.items()]
    lines += [f"skipped {_models(models)}; why: {reason}" for reason, models in by_reason.items()]
    return [_wrapped(line) for line in lines]


def _print_config(report: ConfigReport, *, verbose: bool) -> None:
    if verbose:
        print(textwrap.fill(_line(report), width=_WIDTH, subsequent_indent="    ", break_on_hyphens=False))
        for detail in _details(report):
            print(detail)
    else:
        print(_line(report))  # one line per config, for scripts
    for warning in report.warnings:
        print(f"  warning: {warning}", file=sys.stderr)


def _summary(path: str, reports: Sequence[ConfigReport]) -> str:
    counts = {status: sum(1 for r in reports if r.status is status) for status in ConfigStatus}
    parts = [f"{counts[ConfigStatus.VALID]} config(s) valid"]
    parts += [f"{counts[s]} {s.value}" for s in (ConfigStatus.PARTLY_CHECKED, ConfigStatus.NOT_CHECKED) if counts[s]]
    return f"{path}: {', '.join(parts)}"


def _run(args: argparse.Namespace) -> int:
    layout = read_layout(args.config_file)
    try:
        models = [model_by_key(k) for k in args.gpu_model] if args.gpu_model else None
    except UnknownGpuModelError as exc:
        raise UsageError(f"--gpu-model: {exc}") from exc
    reports = validate_layout(layout, config=args.selected_config, models=models)
    for report in reports:
        _print_config(report, verbose=args.verbose)
    problems = [p for r in reports for p in r.problems]
    # A config checked on no model at all is not known to apply anywhere: apply would be the first
    # to find out. Saying "valid" (or exiting 0) would be a guess.
    problems += [
        f"mig-configs.{r.name}: could not be checked on any catalog GPU model ({'; '.join(r.unchecked_entries)})"
        for r in reports
        if r.status is ConfigStatus.NOT_CHECKED
    ]
    if problems:
        raise InvalidLayoutError(f"{layout.path}: {len(problems)} problem(s):\n" + cap_problems(problems))
    print(_summary(layout.path, reports))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("validate", help=summary("validate"))
    add_config_file_argument(parser)
    add_selected_config_argument(parser)
    parser.add_argument(
        "--gpu-model", action="append", metavar="KEY",
        help="catalog model to check on (repeatable; default: every model the filters match)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="also list the models skipped and why, and which entries were checked on each model"
    )
    parser.set_defaults(handler=_run)
