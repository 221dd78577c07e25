#!/usr/bin/env bash
# Build the real Kubernetes control plane the tests in tests/realkube/ start: kube-apiserver,
# kube-controller-manager and kube-scheduler from k8s.io/kubernetes, and etcd from go.etcd.io/etcd/server/v3, each at the
# one release pinned in scripts/control_plane/{kubernetes,etcd}/go.mod (with go.sum beside them).
# Only the Go module proxy is needed: no binary download, no git clone. No binary is committed.
#
#   scripts/control_plane.sh [DIR]
#
# DIR defaults to ${MIGAGENT_CONTROL_PLANE_DIR:-$HOME/.cache/migagent/control-plane/<versions>}. When
# DIR already holds the three binaries and a stamp naming these versions, nothing is done (the cached
# case takes well under a second). The binaries are built into a scratch folder and moved into DIR
# only when all four linked, so an interrupted build never leaves a stamp over missing binaries.
# The last line printed is DIR. GOFLAGS (e.g. -p=1 on a shared machine) is passed through.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kube_mod="$here/control_plane/kubernetes"
etcd_mod="$here/control_plane/etcd"

k8s_version=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$kube_mod/go.mod")
etcd_version=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\)$/\1/p' "$etcd_mod/go.mod")
[ -n "$k8s_version" ] && [ -n "$etcd_version" ] \
  || { echo "control_plane.sh: cannot read the pinned versions from $kube_mod/go.mod and $etcd_mod/go.mod" >&2; exit 2; }
stamp="kubernetes $k8s_version etcd $etcd_version"

dir=${1:-${MIGAGENT_CONTROL_PLANE_DIR:-$HOME/.cache/migagent/control-plane/kubernetes-$k8s_version-etcd-$etcd_version}}
source "$here/built.sh"
if built "$dir" "$stamp" kube-apiserver kube-controller-manager kube-scheduler etcd; then
  echo "$dir"
  exit 0
fi

command -v go >/dev/null 2>&1 || { echo "control_plane.sh: go is not on PATH (Go >= 1.26 is needed)" >&2; exit 2; }
mkdir -p "$dir"
scratch=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# GOTOOLCHAIN=local: use the machine's Go (both go.mod files ask for 1.26.0), never download another.
# -mod=mod lets a missing go.sum line be filled from the proxy's checksum database.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod -trimpath"
started=$SECONDS

# The version the binaries report, as upstream's build stamps it.
# shellcheck source=control_plane/kube_ldflags.sh
. "$here/control_plane/kube_ldflags.sh"
ldflags=$(kube_ldflags "$k8s_version")
echo "control_plane.sh: building kube-apiserver $k8s_version" >&2
(cd "$kube_mod" && go build -ldflags "$ldflags" -o "$scratch/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
echo "control_plane.sh: building kube-controller-manager $k8s_version ($((SECONDS - started))s so far)" >&2
(cd "$kube_mod" && go build -ldflags "$ldflags" -o "$scratch/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager)
echo "control_plane.sh: building kube-scheduler $k8s_version ($((SECONDS - started))s so far)" >&2
(cd "$kube_mod" && go build -ldflags "$ldflags" -o "$scratch/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler)
echo "control_plane.sh: building etcd $etcd_version ($((SECONDS - started))s so far)" >&2
(cd "$etcd_mod" && go build -ldflags "-s -w" -o "$scratch/etcd" go.etcd.io/etcd/server/v3)

mv -f "$scratch/kube-apiserver" "$scratch/kube-controller-manager" "$scratch/kube-scheduler" "$scratch/etcd" "$dir/"
echo "$stamp" > "$dir/STAMP"
echo "control_plane.sh: built $stamp in $((SECONDS - started))s" >&2
echo "$dir"
