#!/usr/bin/env bash
# Build the migagent image offline into an OCI image-layout archive (readable by skopeo, umoci,
# `podman load`, `docker load` of an oci-archive): scripts/build_image.sh OUT.tar
#
# The same image as the Containerfile, made without a container engine or a registry pull (on
# machines where podman cannot start containers): mmdebstrap builds a minimal Debian rootfs from
# the apt mirror with python3, the host's pip fetches the wheels (the package and its
# dependencies, for the rootfs's Python), a venv in the rootfs installs them offline, and umoci
# writes the rootfs as one layer with the OCI labels and entrypoint. Needs root, mmdebstrap, umoci.
#   SUITE (default bookworm, Python 3.11; trixie has 3.13), MIRROR (default deb.debian.org),
#   TAG (default the package version), PYTHON (the host Python whose pip downloads the wheels).
set -euo pipefail
OUT=${1:?usage: scripts/build_image.sh OUT.tar}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PYTHON=${PYTHON:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
version=$("$PYTHON" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$repo/pyproject.toml")
TAG=${TAG:-$version}
for tool in mmdebstrap umoci chroot; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build_image: $tool is not on PATH (apt-get install mmdebstrap umoci)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build_image: run as root (mmdebstrap and umoci keep file owners)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/migagent-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
step() { echo "== build_image: $* ($(date -u +%H:%M:%S))"; }

step "debian $SUITE rootfs with python3 (mmdebstrap)"
# essential + python3 + libstdc++6 (grpcio needs it) + python3-venv: no apt, docs, man pages or
# locales; python3-venv is purged again once the venv exists. The merged-usr hook lays out /usr as
# bookworm wants without the usrmerge package, which would pull in perl (46 MB).
merged_usr=()
[ -d /usr/share/mmdebstrap/hooks/merged-usr ] && merged_usr=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
mmdebstrap --quiet --variant=essential --include=python3,python3-venv,libstdc++6 "${merged_usr[@]}" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  "$SUITE" "$rootfs" "$MIRROR"
in_root() { env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$rootfs" "$@"; }
pyver=$(in_root python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

step "wheels for Python $pyver (host pip, PyPI)"
wheels=$rootfs/tmp/wheels
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" "$repo"
arch=$(uname -m)
platforms=(--platform "manylinux2014_$arch" --platform "linux_$arch")
for minor in $(seq 17 39); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
"$PYTHON" -m pip download --quiet --dest "$wheels" --only-binary=:all: --python-version "$pyver" \
  --implementation cp "${platforms[@]}" "$wheels"/migagent-*.whl

step "install into /opt/migagent (offline, inside the rootfs)"
in_root python3 -m venv /opt/migagent
in_root /opt/migagent/bin/pip install --quiet --no-index --find-links /tmp/wheels --no-cache-dir migagent
in_root /opt/migagent/bin/pip uninstall --quiet --yes pip setuptools
in_root dpkg --purge python3-venv "python$pyver-venv" python3-pip-whl python3-setuptools-whl >/dev/null
# The kubernetes client's asyncio twin (68 MB): neither the agent nor `import kubernetes` loads it.
rm -rf "$rootfs/opt/migagent/lib/python$pyver/site-packages/kubernetes/aio"
ln -s /opt/migagent/bin/migagent "$rootfs/usr/local/bin/migagent"
install -D -m 0644 "$repo/configs/mig-layouts/mig-layouts.yaml" "$rootfs/usr/share/migagent/mig-layouts.yaml"
rm -rf "$wheels" "$rootfs"/var/cache/* "$rootfs"/var/log/* "$rootfs"/var/lib/dpkg/*-old
echo "unpacked rootfs: $(du -sm "$rootfs" | cut -f1) MB"

step "OCI image layout (umoci), tag $TAG"
layout=$work/oci
umoci init --layout "$layout"
umoci new --image "$layout:$TAG"
umoci unpack --image "$layout:$TAG" "$work/bundle" >/dev/null
rm -rf "$work/bundle/rootfs"
mv "$rootfs" "$work/bundle/rootfs"
umoci repack --image "$layout:$TAG" "$work/bundle"
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
umoci config --image "$layout:$TAG" --os linux --architecture "$(dpkg --print-architecture 2>/dev/null || echo amd64)" \
  --config.entrypoint migagent --config.cmd --help --config.workingdir / \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --config.env PYTHONUNBUFFERED=1 \
  --config.label org.opencontainers.image.title=migagent \
  --config.label "org.opencontainers.image.description=Node-level MIG partition manager for NVIDIA GPUs (mig-parted compatible)" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$revision" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label "org.opencontainers.image.base.name=debian:$SUITE"
umoci gc --layout "$layout"
mkdir -p "$(dirname "$OUT")"
tar -C "$layout" -cf "$OUT" .
echo "== build_image: wrote $OUT ($(du -m "$OUT" | cut -f1) MB compressed), image $TAG"
