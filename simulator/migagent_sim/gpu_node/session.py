"""A simulated node kept up for many commands: one namespace (mounts.py) held open by a process that
only waits, each command entered into it with `nsenter --mount`. Cheaper than `run` per command
when a test or a scenario runs dozens of them, and the way to run a long-lived tool (the device
plugin) beside short ones (mig-parted, migagent) on the same node.

    with NodeSession(state, spec="8xH100-80GB-SXM") as node:
        node.run(["nvidia-mig-parted", "apply", "-f", config, "-c", "all-1g.10gb"], check=True)
        plugin = node.popen(["nvidia-device-plugin", ...])

Several state files may share one session when their GPUs are the same (count, models, bus ids):
`run(..., state=other)` points one command at another node of the same shape.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from migagent_sim.deadline import Deadline
from migagent_sim.fakelib.node import StateFileNode
from migagent_sim.gpu_node.files import save_facts
from migagent_sim.gpu_node.library import library_dir
from migagent_sim.gpu_node.node_gpus import gpu_facts
from migagent_sim.gpu_node.run import node_environment

_READY_TIMEOUT_S = 60.0


class NodeSession:
    def __init__(self, state: Path, *, spec: str | None = None, library: Path | None = None) -> None:
        self.state = state.resolve()
        self.spec = spec
        self.library = library_dir(library)
        self._scratch: Path | None = None
        self._holder: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> NodeSession:
        node_state = StateFileNode(self.state, spec=self.spec).current_state()
        self._scratch = Path(tempfile.mkdtemp(prefix="migagent-gpu-node-"))
        try:
            save_facts(self._scratch / "gpus.json", gpu_facts(node_state))
            ready = self._scratch / "ready"
            # The holder marks the namespace ready from inside it, then waits until it is killed.
            hold = ["sh", "-c", f'touch "{ready}" && exec sleep infinity']
            self._holder = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "migagent_sim.gpu_node.mounts",
                    str(self._scratch),
                    str(self.library),
                    "--",
                    *hold,
                ],
                stdin=subprocess.DEVNULL,
            )
            self._wait_ready(ready)
        except BaseException:
            self.close()
            raise
        return self

    def _wait_ready(self, ready: Path) -> None:
        deadline = Deadline(_READY_TIMEOUT_S)
        while not ready.exists():
            assert self._holder is not None
            if self._holder.poll() is not None:
                raise RuntimeError(f"the simulated node's namespace did not come up (exit {self._holder.returncode})")
            if deadline.passed():
                raise RuntimeError(f"the simulated node's namespace was not up after {_READY_TIMEOUT_S:g}s")
            time.sleep(0.02)

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._holder is not None and self._holder.poll() is None:
            self._holder.kill()
            self._holder.wait()
        self._holder = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def environment(self, *, state: Path | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = node_environment((state or self.state).resolve(), self.spec, self.library, os.environ)
        return {**env, **(extra or {})}

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` entered into the node's mount namespace."""
        if self._holder is None:
            raise RuntimeError("the session is not open")
        return ["nsenter", f"--mount=/proc/{self._holder.pid}/ns/mnt", "--", *argv]

    def run(
        self, argv: Sequence[str], *, state: Path | None = None, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        """subprocess.run of `argv` on the node (text mode, output captured unless told otherwise)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("check", False)
        return subprocess.run(self.command(argv), env=self.environment(state=state, extra=env), **kwargs)  # noqa: PLW1510

    def popen(
        self, argv: Sequence[str], *, state: Path | None = None, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> subprocess.Popen[Any]:
        """A long-running `argv` on the node; the caller stops it."""
        return subprocess.Popen(self.command(argv), env=self.environment(state=state, extra=env), **kwargs)
