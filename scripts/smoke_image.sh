#!/usr/bin/env bash
# Smoke-test an image archive from scripts/build_image.sh without a container engine: unpack its
# rootfs with umoci and run, in a chroot, `migagent --version`, `migagent validate` on the shipped
# layouts and `migagent demo` (all of the simulator, on loopback). Prints the unpacked size.
#   scripts/smoke_image.sh OUT.tar [TAG]       (needs root, umoci; skopeo, when present, inspects)
set -euo pipefail
ARCHIVE=${1:?usage: scripts/smoke_image.sh OUT.tar [TAG]}
work=$(mktemp -d "${TMPDIR:-/tmp}/migagent-smoke.XXXXXX")
rootfs=$work/bundle/rootfs
cleanup() {
  for mount in "$rootfs/dev" "$rootfs/proc"; do mountpoint -q "$mount" 2>/dev/null && umount -l "$mount"; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/oci"
tar -C "$work/oci" -xf "$ARCHIVE"
TAG=${2:-$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["manifests"][0]; print(m["annotations"]["org.opencontainers.image.ref.name"])' "$work/oci/index.json")}
if command -v skopeo >/dev/null 2>&1; then
  echo "== skopeo inspect oci-archive:$ARCHIVE:$TAG"
  skopeo inspect --config "oci-archive:$ARCHIVE:$TAG" | python3 -c \
    'import json,sys; c=json.load(sys.stdin)["config"]; print("entrypoint", c.get("Entrypoint"), "labels", sorted(c.get("Labels", {})))'
fi
umoci unpack --image "$work/oci:$TAG" "$work/bundle" >/dev/null
echo "== unpacked rootfs: $(du -sm "$rootfs" | cut -f1) MB"
mount -t proc proc "$rootfs/proc"
mount --bind /dev "$rootfs/dev"
in_image() { env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$rootfs" "$@"; }
echo "== migagent --version"; in_image migagent --version
echo "== package records"; wc -l "$rootfs"/usr/share/doc/migagent/{debian,python}-packages.txt
echo "== nothing shipped that nothing imports (aiohttp)"
in_image /opt/migagent/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("aiohttp") is not None)'
echo "== the agent's modules import"; in_image /opt/migagent/bin/python -c 'import migagent.cli.agent, kubernetes.client'
if command -v skopeo >/dev/null 2>&1; then
  skopeo inspect --config "oci-archive:$ARCHIVE:$TAG" | python3 -c \
    'import json,sys; c=json.load(sys.stdin)["config"]; l=c.get("Labels", {}); print("user", c.get("User"), "created", l.get("org.opencontainers.image.created"), "source", l.get("org.opencontainers.image.source"))'
fi
echo "== migagent validate (shipped layouts)"; in_image migagent validate -f /usr/share/migagent/mig-layouts.yaml
echo "== migagent demo"; in_image migagent demo --timeout 120 | tail -n 8
echo "== migagent demo --mig-strategy single"; in_image migagent demo --mig-strategy single --timeout 120 | tail -n 4
echo "== smoke_image: ok"
