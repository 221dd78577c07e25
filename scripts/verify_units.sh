#!/usr/bin/env bash
# Check the shipped systemd units with `systemd-analyze verify`; fail on any error or warning.
#
# The units name /usr/local/bin/migagent, which need not exist on the machine running the check,
# and verify refuses an ExecStart= whose program is missing. So the units are copied into a
# temporary directory with ExecStart= pointing at a stub executable there; everything else is
# checked as shipped. Units named only in After=/Before=/Wants= need not exist for verify.
#
# Usage: scripts/verify_units.sh [UNIT_DIR]   (default: the repository's systemd/)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
unit_dir=${1:-"$repo/systemd"}
analyze=${SYSTEMD_ANALYZE:-systemd-analyze}

if ! command -v "$analyze" >/dev/null 2>&1; then
    echo "verify_units: $analyze not found; install systemd to check the units" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

stub="$work/bin/migagent"
mkdir -p "$work/bin" "$work/units"
printf '#!/bin/sh\nexit 0\n' >"$stub"
chmod 0755 "$stub"

units=()
for path in "$unit_dir"/*.service "$unit_dir"/*.target; do
    [ -e "$path" ] || continue
    name=$(basename "$path")
    sed "s#/usr/local/bin/migagent#$stub#g" "$path" >"$work/units/$name"
    units+=("$work/units/$name")
done
if [ ${#units[@]} -eq 0 ]; then
    echo "verify_units: no .service or .target files in $unit_dir" >&2
    exit 2
fi

# Stand-ins for the units ours are ordered against, with the ordering their upstream units
# typically have (simplified), so that an ordering cycle through them is found here rather than at
# a customer's boot. Only loaded as dependencies, never verified themselves.
stub_unit() {
    local name=$1
    shift
    {
        echo "[Unit]"
        echo "Description=stand-in for $name"
        for line in "$@"; do echo "$line"; done
        case "$name" in
        *.service) printf '[Service]\nExecStart=/bin/true\n' ;;
        esac
    } >"$work/units/$name"
}
stub_unit nvidia-persistenced.service "After=syslog.target"
stub_unit nvidia-fabricmanager.service "After=network-online.target" "Wants=network-online.target"
stub_unit containerd.service "After=network.target local-fs.target"
stub_unit crio.service "After=network-online.target" "Wants=network-online.target"
stub_unit docker.service "After=network-online.target containerd.service" "Wants=network-online.target containerd.service"
stub_unit kubelet.service "After=network-online.target containerd.service docker.service" "Wants=network-online.target"
stub_unit k3s.service "After=network-online.target" "Wants=network-online.target"
stub_unit k3s-agent.service "After=network-online.target" "Wants=network-online.target"
stub_unit rke2-server.service "After=network-online.target" "Wants=network-online.target"
stub_unit rke2-agent.service "After=network-online.target" "Wants=network-online.target"
stub_unit nvsm.service "After=nvidia-gpu-reset.target nvidia-persistenced.service" "Wants=nvidia-gpu-reset.target"
# The container toolkit's unit: `nvidia-ctk cdi generate` once the system is up.
stub_unit nvidia-cdi-refresh.service "After=multi-user.target"
for dcgm in nvidia-dcgm.service dcgm.service; do
    stub_unit "$dcgm" "After=nvidia-gpu-reset.target nvidia-persistenced.service" "Wants=nvidia-gpu-reset.target"
done
for exporter in nvidia-dcgm-exporter.service dcgm-exporter.service; do
    stub_unit "$exporter" "After=nvidia-dcgm.service dcgm.service nvidia-gpu-reset.target"
done
# Pull every stand-in into the transactions that verify builds, so their ordering is checked too.
stub_unit migagent-ordering-check.target \
    "Wants=migagent-boot.service migagent-host.service kubelet.service containerd.service docker.service" \
    "Wants=crio.service k3s.service k3s-agent.service rke2-server.service rke2-agent.service" \
    "Wants=nvidia-dcgm.service dcgm.service nvsm.service nvidia-cdi-refresh.service multi-user.target" \
    "Wants=nvidia-dcgm-exporter.service dcgm-exporter.service nvidia-fabricmanager.service"

# What `systemctl enable` would do: link each unit into the .wants/ directory of every target its
# WantedBy= names. A target is ordered after the units it wants, so a cycle that closes only through
# an installed unit (e.g. through multi-user.target) is found too.
for unit in "${units[@]}"; do
    name=$(basename "$unit")
    for target in $(sed -n 's/^WantedBy=//p' "$unit"); do
        mkdir -p "$work/units/$target.wants"
        ln -sf "$unit" "$work/units/$target.wants/$name"
    done
done

# verify prints problems (unknown keys, bad values, missing programs, ordering cycles) on stderr,
# often with exit status 0, so any output at all counts as a failure. --man=no: we ship no man pages.
status=0
output=$(cd "$work/units" && "$analyze" verify --man=no "${units[@]}" \
    "$work/units/migagent-ordering-check.target" 2>&1) || status=$?
if [ "$status" -ne 0 ] || [ -n "$output" ]; then
    printf '%s\n' "$output" | sed "s#$work/units/##g; s#$stub#/usr/local/bin/migagent#g" >&2
    echo "verify_units: FAILED (exit $status) for: ${units[*]##*/}" >&2
    exit 1
fi
echo "verify_units: OK: ${units[*]##*/}"
