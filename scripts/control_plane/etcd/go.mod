// The module the control-plane build compiles etcd in (go.etcd.io/etcd/server/v3's main package),
// apart from Kubernetes' so that neither changes the other's dependency versions.
// scripts/control_plane.sh reads the version from here.
module migagent.invalid/controlplane/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v3.7.3
