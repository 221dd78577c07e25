"""Layout-file arguments shared by validate, plan, apply and assert (mig-parted's flags and env vars)."""

from __future__ import annotations

import argparse
import os
import sys

from migagent.errors import UsageError
from migagent.layout.parse import load_layout_file
from migagent.layout.spec import LayoutFile


def add_config_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--config-file",
        default=os.environ.get("MIG_PARTED_CONFIG_FILE"),
        required="MIG_PARTED_CONFIG_FILE" not in os.environ,
        help="layout file in mig-parted v1 format, '-' for stdin (env MIG_PARTED_CONFIG_FILE)",
    )


def add_selected_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c", "--selected-config",
        default=os.environ.get("MIG_PARTED_SELECTED_CONFIG"),
        help="config name in the file; optional when it holds one (env MIG_PARTED_SELECTED_CONFIG)",
    )


def read_layout(path: str) -> LayoutFile:
    if not path:
        raise UsageError("-f/--config-file is empty; give a layout file, or '-' for stdin")
    if path == "-":
        return load_layout_file(sys.stdin.buffer, source="<stdin>")
    return load_layout_file(path)
