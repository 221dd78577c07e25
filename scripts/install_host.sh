#!/usr/bin/env bash
# Install migagent on a host for the systemd units (systemd/README.md), from this checkout:
#   sudo scripts/install_host.sh
#
# 1. a new venv, $PREFIX/releases/<stamp> (PREFIX default /opt/migagent), with migagent and its
#    dependencies pinned by constraints.txt (requirements.lock's versions), checked to run; then
#    $PREFIX/current is switched to it in one rename (atomic): a process started from the previous
#    release (host mode) keeps running from its own directory, untouched, until it is restarted; the
#    previous release is kept, and older ones are removed unless a process still runs from one;
# 2. /usr/local/bin/migagent, a link to $PREFIX/current/bin/migagent (the path the units run);
# 3. the units in /etc/systemd/system (nvidia-gpu-reset.target only where nothing provides it);
# 4. /etc/migagent/migagent.env (no layout selected: the units change nothing until you set
#    MIGAGENT_LAYOUT) and /etc/migagent/layouts.yaml (the shipped layouts), each only if absent, so
#    running it again (an upgrade) keeps your settings.
# It enables nothing: edit /etc/migagent/migagent.env, then `systemctl enable` (it prints how). Run
# again (an upgrade), it says what to restart for the new release to run.
#
# Options (environment): PREFIX (default /opt/migagent); ROOT (default /): install under this
# directory instead of /, for tests and image builds (the venv then runs from $ROOT$PREFIX, the
# link names $PREFIX, as seen from inside ROOT); PYTHON (default python3.11, else python3);
# LAYOUTS (default configs/mig-layouts/mig-layouts.yaml); PIP_ARGS (extra `pip install` args,
# e.g. --no-index --find-links DIR for an offline install).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${PREFIX:-/opt/migagent}
ROOT=${ROOT:-/}
ROOT=${ROOT%/}
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3.11
  command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
fi
LAYOUTS=${LAYOUTS:-$repo/configs/mig-layouts/mig-layouts.yaml}
say() { echo "install_host: $*"; }
die() { echo "install_host: $*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; set PYTHON to a Python >= 3.11"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$PYTHON is $("$PYTHON" -V 2>&1); migagent needs Python >= 3.11 (set PYTHON)"
[ -f "$LAYOUTS" ] || die "layouts file $LAYOUTS not found (set LAYOUTS)"
if [ -z "$ROOT" ] && [ "$(id -u)" != 0 ]; then
  die "run as root (it writes $PREFIX, /usr/local/bin and /etc), or set ROOT to install under a directory"
fi

base=$ROOT$PREFIX
upgrade=no
# A previous install: this layout (current -> releases/...), or the flat venv at $PREFIX of before.
{ [ -e "$base/current" ] || [ -e "$base/pyvenv.cfg" ]; } && upgrade=yes
previous=$(readlink "$base/current" 2>/dev/null || true)
stamp=$(date -u +%Y%m%dT%H%M%SZ)-$$
release=releases/$stamp
venv=$base/$release
say "venv $venv"
install -d -m 0755 "$base/releases"
"$PYTHON" -m venv "$venv"
# pip builds in the folder it installs from (setuptools writes build/ and migagent.egg-info there): it
# builds a private copy, so a read-only checkout installs and two installs at once share no build folder.
build_copy=$(mktemp -d "${TMPDIR:-/tmp}/migagent-source.XXXXXX")
trap 'rm -rf "$build_copy"' EXIT
(cd "$repo" && cp -R pyproject.toml README.md migagent "$build_copy/")
# The versions the image ships (requirements.lock's pins, constraints.txt): the host's Python may differ
# from the image's 3.11, so the wheels' hashes are not enforced here.
# shellcheck disable=SC2086
"$venv/bin/pip" install --quiet --disable-pip-version-check --constraint "$repo/constraints.txt" ${PIP_ARGS:-} "$build_copy" \
  || { rm -rf "$venv"; die "pip could not install migagent into $venv; nothing was switched"; }
version=$("$venv/bin/migagent" --version) || { rm -rf "$venv"; die "$venv/bin/migagent does not run; nothing was switched"; }

# One rename switches every new start to the new release; what runs keeps its own (still present).
swap_link() {  # swap_link TARGET LINK: LINK points to TARGET after one atomic rename
  ln -sfn "$1" "$2.new.$$"
  mv -T "$2.new.$$" "$2"
}
say "$PREFIX/current -> $release ($version)"
swap_link "$release" "$base/current"
runs_from() {  # runs_from DIR: a process was started by DIR's interpreter (argv[0], the venv's python)
  local cmdline argv0
  for cmdline in /proc/[0-9]*/cmdline; do
    IFS= read -r -d '' argv0 <"$cmdline" 2>/dev/null || continue
    case $argv0 in "$1"/*) return 0 ;; esac
  done
  return 1
}
for old in "$base"/releases/*; do
  name=releases/$(basename "$old")
  { [ "$name" = "$release" ] || [ "$name" = "$previous" ]; } && continue
  if runs_from "$old"; then  # not restarted since two upgrades: its files stay until it is
    say "keeping $PREFIX/$name: a process still runs from it (the next run after its restart removes it)"
    continue
  fi
  rm -rf "$old"
done

say "link $ROOT/usr/local/bin/migagent -> $PREFIX/current/bin/migagent"
install -d -m 0755 "$ROOT/usr/local/bin"
if [ "$(readlink "$ROOT/usr/local/bin/migagent" 2>/dev/null)" != "$PREFIX/current/bin/migagent" ]; then
  swap_link "$PREFIX/current/bin/migagent" "$ROOT/usr/local/bin/migagent"
fi

say "units in $ROOT/etc/systemd/system"
install -d -m 0755 "$ROOT/etc/systemd/system"
install -m 0644 "$repo/systemd/migagent-boot.service" "$repo/systemd/migagent-host.service" "$ROOT/etc/systemd/system/"
provided=no
for dir in /etc/systemd/system /run/systemd/system /usr/lib/systemd/system /lib/systemd/system; do
  [ -e "$ROOT$dir/nvidia-gpu-reset.target" ] && provided=yes
done
if [ "$provided" = no ]; then
  install -m 0644 "$repo/systemd/nvidia-gpu-reset.target" "$ROOT/etc/systemd/system/"
fi

install -d -m 0755 "$ROOT/etc/migagent"
if [ -e "$ROOT/etc/migagent/migagent.env" ]; then
  say "keeping $ROOT/etc/migagent/migagent.env"
else
  install -m 0644 "$repo/systemd/migagent.env.example" "$ROOT/etc/migagent/migagent.env"
fi
if [ -e "$ROOT/etc/migagent/layouts.yaml" ]; then
  say "keeping $ROOT/etc/migagent/layouts.yaml"
else
  install -m 0644 "$LAYOUTS" "$ROOT/etc/migagent/layouts.yaml"
fi

if [ -z "$ROOT" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
if [ "$upgrade" = no ]; then
  cat <<EOF
install_host: done ($version). Nothing runs yet, and the units change nothing until a layout is selected:
  1. pick a config:  $ROOT$PREFIX/current/bin/migagent validate -f $ROOT/etc/migagent/layouts.yaml
  2. set it:         MIGAGENT_LAYOUT=<name> in $ROOT/etc/migagent/migagent.env (and MIGAGENT_HOST_GPU_CLIENTS)
  3. enable:         systemctl enable migagent-boot.service; systemctl enable --now migagent-host.service
EOF
  exit 0
fi
running=""
if [ -z "$ROOT" ] && [ -d /run/systemd/system ] && systemctl is-active --quiet migagent-host.service; then
  running=" (it is running now)"
fi
cat <<EOF
install_host: upgraded to $version in $PREFIX/$release; your settings in $ROOT/etc/migagent are kept.
What already runs keeps the previous release until it is restarted:
  host mode:  systemctl restart migagent-host.service$running
  boot unit:  nothing to restart; the next boot runs the new release
EOF
if [ -e "$base/pyvenv.cfg" ]; then
  cat <<EOF
The venv of the previous install layout stays in $PREFIX for what runs from it; once restarted:
  rm -rf $PREFIX/bin $PREFIX/include $PREFIX/lib $PREFIX/lib64 $PREFIX/share $PREFIX/pyvenv.cfg
EOF
fi
