#!/usr/bin/env bash
# Build NVIDIA's nvidia-ctk (github.com/NVIDIA/nvidia-container-toolkit, cmd/nvidia-ctk) from the Go
# module proxy at the release pinned below, the tool the GPU Operator's toolkit installs on a node at
# /usr/local/nvidia/toolkit/nvidia-ctk and that the agent runs after a change for --cdi (the
# gpu-operator overlay). The real-node tests install it there, on the node. No git clone, no binary
# download, nothing committed.
#
#   scripts/nvidia_ctk.sh [DIR]
#
# DIR defaults to ${MIGAGENT_NVIDIA_CTK_DIR:-$HOME/.cache/migagent/nvidia-ctk/<version>}. When DIR holds
# the binary and a stamp naming this version, nothing is done. The last line printed is DIR.
# GOFLAGS (e.g. -p=1 on a shared machine) is passed through.
set -euo pipefail
version=${NVIDIA_CTK_VERSION:-v1.20.2}
module=github.com/NVIDIA/nvidia-container-toolkit
stamp="nvidia-container-toolkit $version"
dir=${1:-${MIGAGENT_NVIDIA_CTK_DIR:-$HOME/.cache/migagent/nvidia-ctk/nvidia-container-toolkit-$version}}
source "$(dirname "$0")/built.sh"
if built "$dir" "$stamp" nvidia-ctk; then
  echo "$dir"
  exit 0
fi

for tool in go "${CC:-cc}"; do  # Go >= 1.26; a C compiler for go-nvml's cgo bindings
  command -v "$tool" >/dev/null 2>&1 || { echo "nvidia_ctk.sh: $tool is not on PATH" >&2; exit 2; }
done
scratch=$(mkdir -p "$dir" && mktemp -d "$dir/.build.XXXXXX")  # moved into DIR only once linked
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT

# The machine's Go (v1.20 needs Go 1.26); cgo on: go-nvml dlopens libnvidia-ml.so.1 at run time.
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} CGO_ENABLED=1
export GOFLAGS="${GOFLAGS:-} -mod=mod -trimpath"
started=$SECONDS
source=$(cd "$scratch" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$source" ] && [ -d "$source" ] || { echo "nvidia_ctk.sh: the Go module proxy did not serve $module@$version" >&2; exit 1; }
copy="$scratch/src"
mkdir -p "$copy"
cp -R "$source/." "$copy/"
chmod -R u+w "$copy"
rm -rf "$copy/vendor"  # the module zip's vendor/ is incomplete: -mod=mod resolves from the proxy instead
echo "nvidia_ctk.sh: building nvidia-ctk $version" >&2
(cd "$copy" && go build -ldflags "-s -w -X $module/internal/info.version=${version#v}" -o "$scratch/nvidia-ctk" ./cmd/nvidia-ctk)
mv -f "$scratch/nvidia-ctk" "$dir/"
echo "$stamp" > "$dir/STAMP"
echo "nvidia_ctk.sh: built $stamp in $((SECONDS - started))s" >&2
echo "$dir"
