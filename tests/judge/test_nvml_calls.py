"""What NVIDIA's tools ask of the fake libnvidia-ml.so.1: every NVML function they link against is in
the library (go-nvml binds each at its first call; a missing one would kill the tool), and every
function they call on a simulated node is modelled, not answered NOT_SUPPORTED, except the fabric
query a GPU without NVLink fabric answers so. The calls come from MIGAGENT_FAKE_NVML_TRACE."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import yaml

from migagent_sim.gpu_node.nvidia_tools import BINARIES
from migagent_sim.gpu_node.session import NodeSession
from tests.judge.commands import Commands

# GFD asks every GPU; NOT_SUPPORTED is what a GPU outside an NVLink fabric (these) answers.
UNSUPPORTED_AS_ON_HARDWARE = {"nvmlDeviceGetGpuFabricInfo"}


def _nvml_symbols(binary: Path, *, defined: bool) -> set[str]:
    flag = "--defined-only" if defined else "--undefined-only"
    listing = subprocess.run(["nm", "-D", flag, str(binary)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in listing.splitlines() if line.split() and line.split()[-1].startswith("nvml")}


def test_every_nvml_function_the_tools_link_against_is_in_the_library(nvidia_tools: Path, fake_library: Path) -> None:
    exported = _nvml_symbols(fake_library / "libnvidia-ml.so.1", defined=True)
    for binary in BINARIES:
        missing = _nvml_symbols(nvidia_tools / binary, defined=False) - exported
        assert not missing, f"{binary} links against {sorted(missing)}: run scripts/fake_nvml_unsupported.sh"


def _traced(trace: Path) -> Counter[str]:
    return Counter(trace.read_text(encoding="utf-8").splitlines()) if trace.exists() else Counter()


def test_mig_parted_and_gfd_call_only_functions_the_simulator_models(
    tmp_path: Path, nvidia_tools: Path, fake_library: Path
) -> None:
    config = tmp_path / "layouts.yaml"
    mixed = {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "1g.20gb": 1, "3g.40gb": 1}}
    config.write_text(yaml.safe_dump({"version": "v1", "mig-configs": {"mixed": [mixed]}}), encoding="utf-8")
    trace = tmp_path / "trace"
    state = tmp_path / "node.json"
    with NodeSession(state, spec="A100-80GB,H100-80GB-SXM", library=fake_library) as session:
        commands = Commands(session, nvidia_tools, tmp_path)
        env = {"MIGAGENT_FAKE_NVML_TRACE": str(trace)}
        for args in (
            ["apply", "-f", str(config), "-c", "mixed"],
            ["assert", "-f", str(config), "-c", "mixed"],
            ["export"],
        ):
            code, output = commands.mig_parted(state, *args, env=env)
            assert code == 0, output
        labels = tmp_path / "labels"
        gfd = [str(nvidia_tools / "gpu-feature-discovery"), "--oneshot", "--mig-strategy=mixed", "--no-timestamp"]
        done = session.run([*gfd, f"--output-file={labels}"], env=env, timeout=300)
        assert done.returncode == 0, done.stderr
    calls = _traced(trace)
    unsupported = {line.split()[0] for line in calls if line.endswith(" unsupported")}
    assert unsupported <= UNSUPPORTED_AS_ON_HARDWARE, f"called but not modelled: {sorted(unsupported)}"
    for needed in ("nvmlDeviceCreateGpuInstance", "nvmlGpuInstanceCreateComputeInstance", "nvmlDeviceGetAttributes_v2"):
        assert calls[needed] > 0, f"the tools no longer call {needed}: the trace is not what this test reads"
    assert "nvidia.com/mig-1g.20gb.count=2" in labels.read_text(encoding="utf-8").splitlines()
