"""The list of sub-commands, in the order `migagent --help` shows them.

Each module exposes `register(subparsers)`; listing them here (rather than registering on import)
keeps imports free of side effects.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from migagent.cli import agent, apply, demo, doctor, export, host, validate

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

REGISTRARS: list[Registrar] = [
    validate.register,
    export.register,
    apply.register,
    host.register,
    agent.register,
    demo.register,
    doctor.register,
]
