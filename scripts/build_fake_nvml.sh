#!/usr/bin/env bash
# Build the fake NVML for GPU-less test clusters into DIR:
#   DIR/libnvidia-ml.so.1   the NVML C ABI, answered by migagent's simulator (native/fake_nvml/)
#   DIR/nvidia-smi          `nvidia-smi -r -i BUS` acting on the same simulated node
# Use:  LD_LIBRARY_PATH=DIR PATH=DIR:$PATH MIGAGENT_FAKE_NVML_SPEC=2xA100-80GB \
#       MIGAGENT_FAKE_NVML_STATE=/tmp/node.json migagent apply -f ... -c all-balanced
# Options: --old-driver  an R470 driver: reports 470.256.02 and omits nvmlDeviceGetComputeRunningProcesses_v3,
#          nvmlGpuInstanceCreateComputeInstanceWithPlacement and ...GetComputeInstancePossiblePlacements.
# Env: CC (default cc), PYTHON (the interpreter that has migagent installed; default python3).
set -euo pipefail
usage() { echo "usage: $0 DIR [--old-driver]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1; shift
defines=()
for option in "$@"; do
  case $option in
    --old-driver) defines+=(-DFAKE_NVML_OLD_DRIVER) ;;
    *) usage ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cc=${CC:-cc}
python=${PYTHON:-$(command -v python3)}
python=$(command -v "$python")
case $python in /*) ;; *) python=$PWD/$python ;; esac
# The fake nvidia-smi runs the simulator in this interpreter: refuse one that cannot, now, rather
# than an Ampere reset failing later with an import error.
if ! "$python" -c 'import migagent.sim.fake_nvidia_smi' 2>/dev/null; then
  echo "build_fake_nvml.sh: $python cannot import migagent; set PYTHON to the interpreter migagent is" \
    "installed in (e.g. PYTHON=.venv/bin/python)" >&2
  exit 2
fi
mkdir -p "$out"
"$cc" -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden "${defines[@]}" \
  -Wl,-soname,libnvidia-ml.so.1 -o "$out/libnvidia-ml.so.1" "$root"/native/fake_nvml/*.c -ldl -lpthread
cat > "$out/nvidia-smi" <<SCRIPT
#!/bin/sh
# Simulated nvidia-smi (reset only), built by scripts/build_fake_nvml.sh.
exec "$python" -m migagent.sim.fake_nvidia_smi "\$@"
SCRIPT
chmod +x "$out/nvidia-smi"
echo "built $out/libnvidia-ml.so.1 and $out/nvidia-smi (python: $python)"
