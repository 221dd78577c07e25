#!/usr/bin/env python3
"""Regenerate configs/mig-layouts/mig-layouts.yaml from the migagent GPU catalog.

    python configs/generate_layouts.py           # rewrite the file
    python configs/generate_layouts.py --check   # exit 1 if the file is out of date

The output is deterministic; tests/unit/layout checks the shipped file matches it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from migagent.catalog import all_models
from migagent.layout.generate import render_layout_file

OUTPUT = Path(__file__).resolve().parent / "mig-layouts" / "mig-layouts.yaml"


def render() -> str:
    return render_layout_file(all_models())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the file is up to date")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"file to write (default: {OUTPUT})")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date; run: python configs/generate_layouts.py", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
