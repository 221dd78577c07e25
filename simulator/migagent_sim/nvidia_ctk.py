"""`nvidia-smi` and `nvidia-ctk` for the simulated node, as a command runner (argv -> exit code, output).

Only what mig-manager runs after a change (mig-parted deployments/container/reconfigure-mig.sh):
`nvidia-smi`, `nvidia-ctk system create-device-nodes --control-devices --dev-root=R`,
`nvidia-ctk cdi generate --mode=management ... --output=F` and `nvidia-ctk cdi transform root`.
Like the real tools it refuses what it does not know (unknown subcommand or flag: exit 1), and
fails while the driver is not loaded (`driver_loaded=False`: NVML cannot initialise).

The generated management spec lists one device, `all`, with a device node per GPU and per MIG
compute instance that exists in FakeNvml at that moment, so a test sees a spec written before the
change name devices that are gone. The MIG node paths are the simulator's own
(`/dev/nvidia-caps/sim-gpu<g>-gi<gi>-ci<ci>`); real ones are capability minor numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import MIG_ENABLE

_GENERATE_FLAGS = ("--mode", "--driver-root", "--dev-root", "--vendor", "--class", "--output", "--nvidia-cdi-hook-path")
_TRANSFORM_FLAGS = ("--from", "--to", "--input", "--output")


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    output: str = ""


@dataclass
class FakeNvidiaTools:
    fake: FakeNvml
    driver_loaded: bool = True
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str]) -> ToolResult:
        self.calls.append(tuple(argv))
        args = list(argv)
        while args and args[0] == "chroot":  # `chroot ROOT nvidia-smi`: the tool inside the root
            args = args[2:]
        if not args:
            return ToolResult(1, "no command")
        tool = Path(args[0]).name
        if not self.driver_loaded and tool in ("nvidia-smi", "nvidia-ctk"):
            return ToolResult(9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
        if tool == "nvidia-smi":
            return ToolResult(0, f"{len(self.fake.state.gpus)} GPUs")
        if tool == "nvidia-ctk":
            return self._ctk(args[1:])
        return ToolResult(127, f"{args[0]}: command not found")

    def _ctk(self, args: list[str]) -> ToolResult:
        if args[:2] == ["system", "create-device-nodes"]:
            return _refuse_unknown(args[2:], ("--control-devices", "--dev-root")) or ToolResult(0)
        if args[:2] == ["cdi", "generate"]:
            return _refuse_unknown(args[2:], _GENERATE_FLAGS) or self._generate(_flags(args[2:]))
        if args[:3] == ["cdi", "transform", "root"]:
            return _refuse_unknown(args[3:], _TRANSFORM_FLAGS) or self._transform(_flags(args[3:]))
        return ToolResult(1, f"nvidia-ctk: unknown command {' '.join(args[:3])!r}")

    def _generate(self, flags: dict[str, str]) -> ToolResult:
        if flags.get("--mode") != "management":
            return ToolResult(1, "the simulator generates only --mode=management specs")
        return self._write(flags.get("--output"), self._management_spec(flags))

    def _transform(self, flags: dict[str, str]) -> ToolResult:
        text = Path(flags["--input"]).read_text(encoding="utf-8")
        return self._write(flags.get("--output"), yaml.safe_load(text.replace(flags["--from"], flags["--to"])))

    def _management_spec(self, flags: dict[str, str]) -> dict[str, Any]:
        root = flags.get("--dev-root", "/").rstrip("/")
        nodes = []
        for g, gpu in enumerate(self.fake.state.gpus):
            nodes.append({"path": f"/dev/nvidia{g}", "hostPath": f"{root}/dev/nvidia{g}"})
            if gpu.mig_current != MIG_ENABLE:
                continue
            for gi in gpu.gpu_instances:
                for ci in gi.compute_instances:
                    path = f"/dev/nvidia-caps/sim-gpu{g}-gi{gi.id}-ci{ci.id}"
                    nodes.append({"path": path, "hostPath": f"{root}{path}"})
        return {
            "cdiVersion": "0.5.0",
            "kind": f"{flags.get('--vendor', 'nvidia.com')}/{flags.get('--class', 'gpu')}",
            "devices": [{"name": "all", "containerEdits": {"deviceNodes": nodes}}],
        }

    @staticmethod
    def _write(output: str | None, spec: dict[str, Any]) -> ToolResult:
        text = yaml.safe_dump(spec, sort_keys=False)
        if output is None:
            return ToolResult(0, text)
        Path(output).write_text(text, encoding="utf-8")
        return ToolResult(0)


def _flags(args: list[str]) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in args if arg.startswith("--") and "=" in arg)


def _refuse_unknown(args: list[str], known: Sequence[str]) -> ToolResult | None:
    unknown = [arg for arg in args if arg.split("=", 1)[0] not in known]
    return ToolResult(1, f"flag provided but not defined: {unknown[0]}") if unknown else None
