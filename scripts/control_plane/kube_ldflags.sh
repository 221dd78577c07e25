# shellcheck shell=bash
# The version stamp upstream's build puts into Kubernetes' binaries (and kube-apiserver derives its
# emulation version from); a plain `go build` would say v0.0.0-master. Sourced by
# scripts/control_plane.sh and scripts/real_node.sh:  go build -ldflags "$(kube_ldflags v1.37.2)" ...
kube_ldflags() {
  local version=$1 minor flags="-s -w" pkg
  minor=${version#v1.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags="$flags -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags="$flags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}
