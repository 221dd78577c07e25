// The module the real node's optional containerd build compiles in (MIGAGENT_CONTAINERD=source in
// scripts/real_node.sh): containerd's daemon, its runc shim and ctr, apart from Kubernetes' module so
// that neither changes the other's dependency versions. scripts/real_node.sh reads the version here.
module migagent.invalid/realnode/containerd

go 1.26.6

require github.com/containerd/containerd/v2 v2.4.2
