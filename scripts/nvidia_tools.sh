#!/usr/bin/env bash
# Build NVIDIA's own GPU-side tools, the judges of migagent's GPU side, from the Go module proxy at
# the releases pinned below: from github.com/NVIDIA/mig-parted, nvidia-mig-parted and
# nvidia-mig-manager; from github.com/NVIDIA/k8s-device-plugin, nvidia-device-plugin,
# gpu-feature-discovery and config-manager. No git clone, no binary download, nothing committed.
#
#   scripts/nvidia_tools.sh [DIR]
#
# DIR defaults to ${MIGAGENT_NVIDIA_TOOLS_DIR:-$HOME/.cache/migagent/nvidia-tools/<versions>}. When DIR
# holds the five binaries and a stamp naming these versions, nothing is done (well under a second).
# The binaries are built in a scratch folder and moved into DIR only when all five linked, so an
# interrupted build never leaves a stamp over missing binaries. The last line printed is DIR.
# GOFLAGS (e.g. -p=1 on a shared machine) is passed through.
#
# To verify against other releases, set MIG_PARTED_VERSION and/or DEVICE_PLUGIN_VERSION (the proxy
# must serve them; see docs/verification.md); they get a cache folder of their own.
set -euo pipefail
mig_parted_version=${MIG_PARTED_VERSION:-v0.10.0}
device_plugin_version=${DEVICE_PLUGIN_VERSION:-v0.18.2}
stamp="mig-parted $mig_parted_version k8s-device-plugin $device_plugin_version"
binaries=(nvidia-mig-parted nvidia-mig-manager nvidia-device-plugin gpu-feature-discovery config-manager)

dir=${1:-${MIGAGENT_NVIDIA_TOOLS_DIR:-$HOME/.cache/migagent/nvidia-tools/mig-parted-$mig_parted_version-k8s-device-plugin-$device_plugin_version}}
source "$(dirname "$0")/built.sh"
if built "$dir" "$stamp" "${binaries[@]}"; then
  echo "$dir"
  exit 0
fi

command -v go >/dev/null 2>&1 || { echo "nvidia_tools.sh: go is not on PATH (Go >= 1.25 is needed)" >&2; exit 2; }
command -v "${CC:-cc}" >/dev/null 2>&1 || { echo "nvidia_tools.sh: a C compiler is needed (cgo: go-nvml)" >&2; exit 2; }
mkdir -p "$dir"
scratch=$(mktemp -d "$dir/.build.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT

# GOTOOLCHAIN=local: the machine's Go, never a downloaded one. cgo on: go-nvml's bindings are cgo
# (it dlopens libnvidia-ml.so.1 at run time; nothing links against a real driver).
export GOTOOLCHAIN=local CGO_ENABLED=1
export GOFLAGS="${GOFLAGS:-} -mod=mod -trimpath"
started=$SECONDS

# A writable copy of one module at one version, without its vendor/ (the module zip's copy is
# incomplete, so -mod=mod resolves every dependency from the proxy instead).
module_copy() {
  local module=$1 version=$2 source
  source=$(cd "$scratch" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$source" ] && [ -d "$source" ] \
    || { echo "nvidia_tools.sh: the Go module proxy did not serve $module@$version" >&2; exit 1; }
  local copy="$scratch/src/${module##*/}"
  mkdir -p "$copy"
  cp -R "$source/." "$copy/"
  chmod -R u+w "$copy"
  rm -rf "$copy/vendor"
  echo "$copy"
}

mig_parted=$(module_copy github.com/NVIDIA/mig-parted "$mig_parted_version")
device_plugin=$(module_copy github.com/NVIDIA/k8s-device-plugin "$device_plugin_version")

build() {
  local module_dir=$1 package=$2 name=$3 version_pkg=$4 version=$5
  echo "nvidia_tools.sh: building $name $version ($((SECONDS - started))s so far)" >&2
  (cd "$module_dir" && go build -ldflags "-s -w -X $version_pkg.version=$version" -o "$scratch/$name" "$package")
}
build "$mig_parted" ./cmd/nvidia-mig-parted nvidia-mig-parted github.com/NVIDIA/mig-parted/internal/info "$mig_parted_version"
build "$mig_parted" ./cmd/nvidia-mig-manager nvidia-mig-manager github.com/NVIDIA/mig-parted/internal/info "$mig_parted_version"
build "$device_plugin" ./cmd/nvidia-device-plugin nvidia-device-plugin github.com/NVIDIA/k8s-device-plugin/internal/info "$device_plugin_version"
build "$device_plugin" ./cmd/gpu-feature-discovery gpu-feature-discovery github.com/NVIDIA/k8s-device-plugin/internal/info "$device_plugin_version"
build "$device_plugin" ./cmd/config-manager config-manager github.com/NVIDIA/k8s-device-plugin/internal/info "$device_plugin_version"

# mig-manager's reconfigure script and NVIDIA's default layouts travel with the binaries: the
# head-to-head runs mig-manager as NVIDIA deploys it, and the judge tests apply NVIDIA's own config.
cp "$mig_parted/deployments/container/reconfigure-mig.sh" "$scratch/reconfigure-mig.sh"
cp "$mig_parted/deployments/systemd/config-default.yaml" "$scratch/config-default.yaml"
for binary in "${binaries[@]}"; do mv -f "$scratch/$binary" "$dir/"; done
mv -f "$scratch/reconfigure-mig.sh" "$scratch/config-default.yaml" "$dir/"
echo "$stamp" > "$dir/STAMP"
echo "nvidia_tools.sh: built $stamp in $((SECONDS - started))s" >&2
echo "$dir"
