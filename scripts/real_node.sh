#!/usr/bin/env bash
# Build the real node tests/realnode starts beside the real control plane: the kubelet from
# k8s.io/kubernetes at the release scripts/control_plane/kubernetes/go.mod pins (the control plane's
# own module, so its Go build cache is shared: run this after scripts/control_plane.sh), the
# sandbox ("pause") program, and the container runtime. No binary download, nothing committed.
#
#   scripts/real_node.sh [DIR]
#
# DIR defaults to ${MIGAGENT_REAL_NODE_DIR:-$HOME/.cache/migagent/real-node/<versions>}; the last line
# printed is DIR. When DIR holds everything and a stamp naming these versions, nothing is built.
#
# The runtime: containerd and runc. By default Debian's packages (containerd 1.6.20, runc 1.1.5,
# the CNI plugins; `apt-get install`, about 11 s, when one is missing; needs root), linked into
# DIR/bin. MIGAGENT_CONTAINERD=source builds containerd v2 (the version in
# scripts/real_node/containerd/go.mod: daemon, runc shim, ctr; CGO off) from the Go module proxy
# instead, into DIR/bin: the release line the kubelet keeps supporting (it accepts 1.6 through a
# fallback it counts as going away at 1.38), at ~16 min of cold build on 2 cores. docs/testing.md
# ("A real node") has the measured costs and why the default is what it is.
# GOFLAGS (e.g. -p=1 on a shared machine) is passed through.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kube_mod="$here/control_plane/kubernetes"
containerd_mod="$here/real_node/containerd"
k8s_version=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$kube_mod/go.mod")
containerd_source=${MIGAGENT_CONTAINERD:-debian}
case $containerd_source in
  debian) runtime=containerd-debian ;;
  source) runtime=containerd-$(sed -n 's/^require github.com\/containerd\/containerd\/v2 \(v[0-9.]*\)$/\1/p' "$containerd_mod/go.mod") ;;
  *) echo "real_node.sh: MIGAGENT_CONTAINERD=$containerd_source: use debian (the default) or source" >&2; exit 2 ;;
esac
[ -n "$k8s_version" ] && [ "$runtime" != containerd- ] \
  || { echo "real_node.sh: cannot read the pinned versions from $kube_mod/go.mod or $containerd_mod/go.mod" >&2; exit 2; }
stamp="kubelet $k8s_version runtime $runtime"
dir=${1:-${MIGAGENT_REAL_NODE_DIR:-$HOME/.cache/migagent/real-node/kubernetes-$k8s_version-$runtime}}
needed=(kubelet pause busybox bin/containerd bin/containerd-shim-runc-v2 bin/ctr bin/runc cni/bridge cni/host-local cni/loopback)
source "$here/built.sh"
if built "$dir" "$stamp" "${needed[@]}"; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
scratch=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
started=$SECONDS
# Debian's runc and CNI plugins either way (runc needs cgo and libseccomp: not worth building), and
# its static busybox, what the tests' workload image holds.
packages=(runc containernetworking-plugins busybox-static)
[ "$containerd_source" = debian ] && packages+=(containerd)
missing=()
for package in "${packages[@]}"; do dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "real_node.sh: apt-get install ${missing[*]}" >&2
  [ "$(id -u)" = 0 ] || { echo "real_node.sh: installing ${missing[*]} needs root" >&2; exit 1; }
  # The packages start no service where PID 1 is not systemd; the fixture starts containerd itself.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
  echo "real_node.sh: packages installed in $((SECONDS - started))s" >&2
fi
mkdir -p "$scratch/bin" "$scratch/cni"
ln -sf /usr/sbin/runc "$scratch/bin/runc"
ln -sf /bin/busybox "$scratch/busybox"
for plugin in bridge host-local loopback; do ln -sf "/usr/lib/cni/$plugin" "$scratch/cni/$plugin"; done

command -v go >/dev/null 2>&1 || { echo "real_node.sh: go is not on PATH (Go >= 1.26 is needed)" >&2; exit 2; }
command -v "${CC:-cc}" >/dev/null 2>&1 || { echo "real_node.sh: a C compiler is needed (the pause program)" >&2; exit 2; }
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod -trimpath"
if [ "$containerd_source" = source ]; then
  echo "real_node.sh: building $runtime ($((SECONDS - started))s so far)" >&2
  (cd "$containerd_mod" && go build -tags "no_btrfs no_devmapper no_zfs no_aufs no_dynamic_plugins" -ldflags "-s -w" \
    -o "$scratch/bin/" github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr)
else
  for binary in containerd containerd-shim-runc-v2 ctr; do ln -sf "/usr/bin/$binary" "$scratch/bin/$binary"; done
fi

# The sandbox every pod's containers share namespaces with: sleeps until told to stop, reaps orphans.
cat > "$scratch/pause.c" <<'C'
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int signo) { (void)signo; _exit(0); }
static void reap(int signo) { (void)signo; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
C
"${CC:-cc}" -static -Os -s -o "$scratch/pause" "$scratch/pause.c"

# The same version stamp the control plane's binaries carry.
# shellcheck source=control_plane/kube_ldflags.sh
. "$here/control_plane/kube_ldflags.sh"
echo "real_node.sh: building kubelet $k8s_version ($((SECONDS - started))s so far)" >&2
(cd "$kube_mod" && go build -ldflags "$(kube_ldflags "$k8s_version")" -o "$scratch/kubelet" k8s.io/kubernetes/cmd/kubelet)

rm -rf "$dir/bin" "$dir/cni"
mv -f "$scratch/kubelet" "$scratch/pause" "$scratch/busybox" "$scratch/bin" "$scratch/cni" "$dir/"
echo "$stamp" > "$dir/STAMP"
echo "real_node.sh: built $stamp in $((SECONDS - started))s" >&2
echo "$dir"
