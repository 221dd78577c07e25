"""The two tools on a simulated node: `nvidia-mig-parted` (built by scripts/nvidia_tools.sh) and
`migagent` (this checkout, run as its CLI over the fake libnvidia-ml.so.1, no --simulate)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from migagent_sim.gpu_node.session import NodeSession

Outcome = tuple[int, str]  # exit status, stdout + stderr (stdout alone from `export`)


@dataclass
class Commands:
    session: NodeSession
    tools: Path
    workdir: Path

    def migagent(self, state: Path, *args: str) -> Outcome:
        env = {"MIGAGENT_HOST_ROOT": str(self.workdir / "no-host")}  # reset checks: a hermetic host
        result = self.session.run([sys.executable, "-m", "migagent", *args], state=state, env=env, timeout=600)
        return result.returncode, result.stdout + result.stderr

    def mig_parted(self, state: Path, *args: str, env: dict[str, str] | None = None) -> Outcome:
        result = self.session.run([str(self.tools / "nvidia-mig-parted"), *args], state=state, env=env, timeout=600)
        return result.returncode, result.stdout + result.stderr

    def export(self, tool: str, state: Path) -> Outcome:
        """`export` by `tool`: its stdout alone (nvpci logs warnings beside it), or stderr on failure."""
        argv = [str(self.tools / "nvidia-mig-parted")] if tool == "mig-parted" else [sys.executable, "-m", "migagent"]
        env = {"MIGAGENT_HOST_ROOT": str(self.workdir / "no-host")}
        result = self.session.run([*argv, "export"], state=state, env=env, timeout=600)
        return result.returncode, result.stdout if result.returncode == 0 else result.stderr

    def apply(self, tool: str, state: Path, config_file: Path, config: str) -> Outcome:
        file = ["-f", str(config_file), "-c", config]
        if tool == "mig-parted":
            return self.mig_parted(state, "apply", *file)
        return self.migagent(state, "apply", *file, "--journal-dir", str(self.workdir / f"journal-{state.stem}"))

    def check(self, tool: str, state: Path, config_file: Path, config: str) -> Outcome:
        """`assert` of `config` by `tool`."""
        file = ["-f", str(config_file), "-c", config]
        if tool == "mig-parted":
            return self.mig_parted(state, "assert", *file)
        return self.migagent(state, "assert", *file)
