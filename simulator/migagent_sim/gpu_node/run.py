"""Run one command on a simulated GPU node: the state file made ready, the node's GPUs described in
a scratch directory, the command started under mounts.py (which writes the node's files there, in
a namespace of its own), signals passed on, the scratch directory removed when it exits."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType

from migagent_sim.fakelib.node import SPEC_ENV, STATE_ENV, StateFileNode
from migagent_sim.gpu_node.files import save_facts
from migagent_sim.gpu_node.node_gpus import gpu_facts

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def node_environment(state: Path, spec: str | None, library: Path, base: Mapping[str, str]) -> dict[str, str]:
    """What a process on the node needs: the library and nvidia-smi first, and the node's state."""
    env = dict(base)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(library), base.get("LD_LIBRARY_PATH", "")) if p)
    env["PATH"] = os.pathsep.join(p for p in (str(library), base.get("PATH", os.defpath)) if p)
    env[STATE_ENV] = str(state)
    if spec is not None:
        env[SPEC_ENV] = spec
    return env


def run_on_node(command: Sequence[str], *, state: Path, spec: str | None, library: Path) -> int:
    """The command's exit status (128 + N when it died of signal N)."""
    state = state.resolve()
    node_state = StateFileNode(state, spec=spec).current_state()  # NodeConfigError when unusable
    scratch = Path(tempfile.mkdtemp(prefix="migagent-gpu-node-"))
    try:
        save_facts(scratch / "gpus.json", gpu_facts(node_state))
        env = node_environment(state, spec, library, os.environ)
        mounts = [sys.executable, "-m", "migagent_sim.gpu_node.mounts", str(scratch), str(library), "--", *command]
        with subprocess.Popen(mounts, env=env) as child:
            previous = {sig: signal.signal(sig, _forward_to(child)) for sig in _FORWARDED}
            try:
                returncode = child.wait()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        return 128 - returncode if returncode < 0 else returncode
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _forward_to(child: subprocess.Popen[bytes]) -> Callable[[int, FrameType | None], None]:
    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    return forward
