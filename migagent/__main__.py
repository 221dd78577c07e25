"""`python -m migagent` and the `migagent` console script: Ctrl-C while the CLI's modules still import is
one line and exit 130 too, as it is in `main` (this module imports nothing else before that point)."""

import sys


def console() -> int:
    try:
        from migagent.cli import main  # noqa: PLC0415
    except KeyboardInterrupt:
        print("migagent: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(console())
