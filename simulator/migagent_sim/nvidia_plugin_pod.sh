#!/usr/bin/env bash
# The NVIDIA device plugin pod, as the GPU Operator runs it, on one simulated node. Run by
# migagent_sim.nvidia_plugin as PID 1 of a PID and mount namespace of its own (`unshare --pid
# --fork --mount-proc --mount`): the containers share that PID namespace (shareProcessNamespace), as
# NVIDIA's config-manager needs to find the plugin by its command name.
#
#   nvidia_plugin_pod.sh SOCKET_DIR PLUGIN CONFIG_MANAGER N NODE_COMMAND(N words)... PLUGIN_ARGS...
#
# SOCKET_DIR is bind-mounted on /var/lib/kubelet/device-plugins (the plugin always makes its sockets
# there). NODE_COMMAND... runs a command on the simulated node (NVML, /sys, /proc, /dev): the plugin
# runs under it; config-manager does not (it needs no GPU, and it looks for the plugin in /proc). With
# CONFIG_SRCDIR, CONFIG_DST, KUBECONFIG and NODE_NAME set, config-manager runs first with --oneshot
# (the init container: a failure keeps the plugin from starting) and then beside the plugin (the
# sidecar: it follows nvidia.com/device-plugin.config and SIGHUPs the plugin); the plugin reads
# CONFIG_DST. An exited plugin is restarted; SIGTERM stops the containers and then the pod. Each
# plugin exit is logged as "pod: nvidia-device-plugin exited with status N".
set -u
socket_dir=$1 plugin=$2 config_manager=$3 node_words=$4
shift 4
node=("${@:1:$node_words}")
shift "$node_words"

mkdir -p /var/lib/kubelet/device-plugins
mount --bind "$socket_dir" /var/lib/kubelet/device-plugins || exit 2

config_manager() {
  "$config_manager" --node-name "$NODE_NAME" --kubeconfig "$KUBECONFIG" \
    --config-file-srcdir "$CONFIG_SRCDIR" --config-file-dst "$CONFIG_DST" \
    --default-config "${DEFAULT_CONFIG:-}" --fallback-strategies "${FALLBACK_STRATEGIES:-named,single}" "$@"
}
stopping=0 plugin_pid='' sidecar_pid=''
stop() {
  stopping=1
  kill -TERM $plugin_pid $sidecar_pid 2>/dev/null
}
trap stop TERM INT

if [ -n "${CONFIG_SRCDIR:-}" ]; then
  echo "pod: config-manager-init"
  config_manager --oneshot --send-signal=false || { echo "pod: config-manager-init failed" >&2; exit 3; }
  set -- --config-file "$CONFIG_DST" "$@"
  # The sidecar exits when the label names a config that does not exist; it is restarted like any container.
  (
    while :; do
      echo "pod: config-manager"
      config_manager --signal 1 --process-to-signal nvidia-device-plugin
      echo "pod: config-manager exited with status $?"
      sleep "${RESTART_BACKOFF_S:-10}"
    done
  ) &
  sidecar_pid=$!
fi
# restartPolicy Always: the kubelet restarts an exited container after a back-off (10 s, doubling,
# on a real node; RESTART_BACKOFF_S here). Sidecar and plugin start together, as containers do, so
# a SIGHUP can reach a plugin that has not set up its handler yet: it dies and is restarted, as in a pod.
while [ "$stopping" = 0 ]; do
  echo "pod: nvidia-device-plugin $*"
  # The sidecar finds the plugin by its command name: start it under the name it has in NVIDIA's image.
  "${node[@]}" bash -c 'exec -a nvidia-device-plugin "$0" "$@"' "$plugin" "$@" &
  plugin_pid=$!
  wait "$plugin_pid"
  status=$?
  while kill -0 "$plugin_pid" 2>/dev/null; do wait "$plugin_pid"; status=$?; done
  [ "$stopping" = 0 ] || break
  echo "pod: nvidia-device-plugin exited with status $status"
  sleep "${RESTART_BACKOFF_S:-10}" & wait $!
done
[ -z "$sidecar_pid" ] || { kill -TERM "$sidecar_pid" 2>/dev/null; wait "$sidecar_pid"; }
echo "pod: stopped"
