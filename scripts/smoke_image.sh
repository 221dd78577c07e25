#!/usr/bin/env bash
# Smoke-test an image archive from scripts/build_image.sh without a container engine: unpack its
# rootfs with umoci and run, in a chroot, `migagent --version`, `migagent validate` on the shipped
# layouts, and `apply`, `assert` and `doctor` on a node simulated by FakeNvml (`--simulate` is a product
# feature); checks that the Kubernetes simulator (`migagent_sim`, `migagent demo`) is NOT in the image.
# Prints the unpacked size.
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
layouts=/usr/share/migagent/mig-layouts.yaml
echo "== migagent apply/assert/doctor --simulate"
in_image migagent apply --simulate 2xH100-80GB-SXM --state /tmp/smoke-node.json -f "$layouts" -c all-balanced 2>/dev/null
in_image migagent assert --state /tmp/smoke-node.json -f "$layouts" -c all-balanced
in_image migagent doctor --state /tmp/smoke-node.json -o json >/dev/null
echo "== the simulator distribution is not in the image"
if in_image /opt/migagent/bin/python -c 'import migagent_sim' 2>/dev/null; then
  echo "migagent_sim is importable in the image: the product image must not ship the simulator" >&2; exit 1
fi
if in_image migagent demo --help >/dev/null 2>&1; then echo "'migagent demo' exists in the image" >&2; exit 1; fi
echo "== smoke_image: ok"
