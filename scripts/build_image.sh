#!/usr/bin/env bash
# Build the migagent image offline into an OCI image-layout archive (readable by skopeo, umoci,
# `podman load`, `docker load` of an oci-archive): scripts/build_image.sh OUT.tar
#
# The same image as the Containerfile, made without a container engine or a registry pull (on
# machines where podman cannot start containers): mmdebstrap builds a minimal Debian rootfs from
# the apt mirror with python3, the host's pip fetches the wheels (the package and its
# dependencies, for the rootfs's Python), a venv in the rootfs installs them offline, and umoci
# writes the rootfs as one layer with the OCI labels and entrypoint. Needs root, mmdebstrap, umoci.
# Reproducible inputs, shared with the Containerfile: the Debian point release in image.env (a rootfs
# of another one is refused) and requirements.lock (the wheels, checked against their sha256).
#   MIRROR (default deb.debian.org), DEBIAN_SNAPSHOT (a snapshot.debian.org timestamp: install from
#   that snapshot instead), TAG (default the package version), PYTHON (the host Python whose pip
#   downloads the wheels), SOURCE_DATE_EPOCH (the image's `created`; default the commit's date).
set -euo pipefail
OUT=${1:?usage: scripts/build_image.sh OUT.tar}
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../image.env
. "$repo/image.env"
SUITE=$DEBIAN_SUITE
MIRROR=${MIRROR:-http://deb.debian.org/debian}
aptopts=()
if [ -n "${DEBIAN_SNAPSHOT:-}" ]; then
  MIRROR=http://snapshot.debian.org/archive/debian/$DEBIAN_SNAPSHOT
  aptopts=(--aptopt='Acquire::Check-Valid-Until "false"')
fi
PYTHON=${PYTHON:-python3}
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
mmdebstrap --quiet --variant=essential --include=python3,python3-venv,libstdc++6 "${merged_usr[@]}" "${aptopts[@]}" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  "$SUITE" "$rootfs" "$MIRROR"
in_root() { env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$rootfs" "$@"; }
release=$(cat "$rootfs/etc/debian_version")
if [ "$release" != "$DEBIAN_POINT_RELEASE" ]; then
  echo "build_image: the mirror gave Debian $release, image.env pins $DEBIAN_POINT_RELEASE (the Containerfile's" \
    "base): bump DEBIAN_POINT_RELEASE in image.env and the Containerfile, or set DEBIAN_SNAPSHOT" >&2
  exit 1
fi
pyver=$(in_root python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

step "wheels for Python $pyver (host pip, PyPI)"
wheels=$rootfs/tmp/wheels
# From a copy: pip builds in the folder it is given (build/, migagent.egg-info), and a test may be
# installing from this checkout at the same time (scripts/install_host.sh builds its own copy too).
mkdir "$work/source" && (cd "$repo" && cp -R pyproject.toml README.md migagent "$work/source/")
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" "$work/source"
arch=$(uname -m)
platforms=(--platform "manylinux2014_$arch" --platform "linux_$arch")
for minor in $(seq 17 39); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
# Exactly the locked wheels (--require-hashes): no resolution, so aiohttp (kubernetes.aio only) stays out.
"$PYTHON" -m pip download --quiet --dest "$wheels" --only-binary=:all: --python-version "$pyver" \
  --implementation cp "${platforms[@]}" --no-deps --require-hashes -r "$repo/requirements.lock"
cp "$repo/requirements.lock" "$rootfs/tmp/requirements.lock"

step "install into /opt/migagent (offline, inside the rootfs)"
in_root python3 -m venv /opt/migagent
in_root /opt/migagent/bin/pip install --quiet --no-index --find-links /tmp/wheels --no-cache-dir \
  --require-hashes --no-deps -r /tmp/requirements.lock
in_root /opt/migagent/bin/pip install --quiet --no-index --find-links /tmp/wheels --no-cache-dir --no-deps migagent
in_root /opt/migagent/bin/pip uninstall --quiet --yes pip setuptools
in_root dpkg --purge python3-venv "python$pyver-venv" python3-pip-whl python3-setuptools-whl >/dev/null
# The kubernetes client's asyncio twin (68 MB): neither the agent nor `import kubernetes` loads it.
rm -rf "$rootfs/opt/migagent/lib/python$pyver/site-packages/kubernetes/aio"
ln -s /opt/migagent/bin/migagent "$rootfs/usr/local/bin/migagent"
install -D -m 0644 "$repo/configs/mig-layouts/mig-layouts.yaml" "$rootfs/usr/share/migagent/mig-layouts.yaml"
# What the image holds, for audits and rebuilds: the Debian and Python package versions.
install -d "$rootfs/usr/share/doc/migagent"
cp "$rootfs/etc/debian_version" "$rootfs/usr/share/doc/migagent/debian-version.txt"
in_root dpkg-query -W -f='${Package} ${Version} ${Architecture}\n' >"$rootfs/usr/share/doc/migagent/debian-packages.txt"
in_root /opt/migagent/bin/python -c 'import importlib.metadata as m; print("\n".join(sorted(f"{d.name}=={d.version}" for d in m.distributions())))' \
  >"$rootfs/usr/share/doc/migagent/python-packages.txt"
rm -rf "$wheels" "$rootfs/tmp/requirements.lock" "$rootfs"/var/cache/* "$rootfs"/var/log/* "$rootfs"/var/lib/dpkg/*-old
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
# `created` is the commit's date (or SOURCE_DATE_EPOCH), not the build's, so a rebuild says the same.
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
else
  created=$(TZ=UTC git -C "$repo" log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null \
    || date -u +%Y-%m-%dT%H:%M:%SZ)
fi
umoci config --image "$layout:$TAG" --os linux --architecture "$(dpkg --print-architecture 2>/dev/null || echo amd64)" \
  --created "$created" --config.user root \
  --config.entrypoint migagent --config.cmd --help --config.workingdir / \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --config.env PYTHONUNBUFFERED=1 \
  --config.label org.opencontainers.image.title=migagent \
  --config.label "org.opencontainers.image.description=Node-level MIG partition manager for NVIDIA GPUs (mig-parted compatible)" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$revision" \
  --config.label "org.opencontainers.image.created=$created" \
  --config.label "org.opencontainers.image.source=$IMAGE_SOURCE" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label "org.opencontainers.image.base.name=debian:$DEBIAN_POINT_RELEASE"
umoci gc --layout "$layout"
mkdir -p "$(dirname "$OUT")"
tar -C "$layout" -cf "$OUT" .
echo "== build_image: wrote $OUT ($(du -m "$OUT" | cut -f1) MB compressed), image $TAG"
