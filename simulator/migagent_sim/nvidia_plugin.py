"""NVIDIA's own device plugin (and config-manager) as the container of the simulated plugin pod.

`NvidiaPluginContainer` runs `nvidia-device-plugin` v0.18.2 (built by scripts/nvidia_tools.sh) on
the simulated node, as the GPU Operator runs it: in a pod of its own (nvidia_plugin_pod.sh: a PID
and mount namespace, the kubelet's socket directory bind-mounted on /var/lib/kubelet/device-plugins),
with the `--mig-strategy` given, and, when sharing configs are given, config-manager as init
container and sidecar: the configs are written to a directory as the kubelet mounts a ConfigMap,
and the sidecar follows the node label `nvidia.com/device-plugin.config` through the API server
(`kubeconfig`) and SIGHUPs the plugin, which restarts in place. The plugin registers with the
simulated kubelet over the real device plugin API; nothing here models what it advertises.

The node (NVML through the fake libnvidia-ml.so.1, the files NVIDIA's tools read beside it) comes
from `node_command`, which wraps a command line to run on the simulated node and gives its
environment. Health checks are off (DP_DISABLE_HEALTHCHECKS): the simulator sends no NVML events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from migagent.layout.strategy import MigStrategy
from migagent_sim.deadline import Deadline
from migagent_sim.kubelet_status import DevicePluginHost

POD_SCRIPT = Path(__file__).with_name("nvidia_plugin_pod.sh")
NodeCommand = Callable[[Sequence[str]], tuple[list[str], dict[str, str]]]
"""argv -> (the argv that runs it on the simulated node, its environment)."""
_STOP_TIMEOUT_S = 10.0
_WATCH_S = 0.2
_EXITED = "pod: nvidia-device-plugin exited with status"
_NO_DEVICES = "No devices found. Waiting indefinitely."
_CONFIG_MANAGER_OUTCOMES = (
    ("Successfully sent signal", "signalled"),
    ("Already configured. Skipping update", "unchanged"),
    ("does not exist", "refused"),
    ("config-manager-init failed", "refused"),
)
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class NvidiaTools:
    """The folder scripts/nvidia_tools.sh built (k8s-device-plugin v0.18.2's binaries among others)."""

    directory: Path

    @property
    def device_plugin(self) -> Path:
        return self.directory / "nvidia-device-plugin"

    @property
    def config_manager(self) -> Path:
        return self.directory / "config-manager"

    @property
    def gpu_feature_discovery(self) -> Path:
        return self.directory / "gpu-feature-discovery"


@dataclass(frozen=True)
class NvidiaPluginSettings:
    device_plugin: Path
    config_manager: Path
    node_command: NodeCommand
    mig_strategy: MigStrategy
    workdir: Path
    """Where the pod's files go (configs, the selected config, its log); it must exist."""
    node_name: str = ""
    configs: Mapping[str, str] | None = None
    """The plugin's ConfigMap data (config name -> plugin config); None: no config-manager, no sharing."""
    default_config: str | None = None
    fallback_strategies: str = "named,single"
    """config-manager's fallbacks when no config is selected nor a default given (the plugin chart's)."""
    kubeconfig: Path | None = None
    """How config-manager reaches the API server (required with `configs`)."""
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    restart_backoff_s: float = 10.0
    """How long the kubelet waits before restarting an exited plugin (its first crash back-off)."""


@dataclass(frozen=True)
class SettleMark:
    events: int
    """The kubelet's device manager's plugin events so far."""
    log_size: int


class NvidiaPluginContainer:
    def __init__(self, settings: NvidiaPluginSettings, host: DevicePluginHost, on_exit: Callable[[str], None]) -> None:
        if settings.configs is not None and settings.kubeconfig is None:
            raise ValueError("NVIDIA's config-manager needs a kubeconfig to follow the node's config label")
        self._settings = settings
        self._host = host
        self._on_exit = on_exit
        self._process: subprocess.Popen[bytes] | None = None
        self._watcher: threading.Thread | None = None
        self._stopping = threading.Event()
        self.error: str | None = None
        self.starts = 0

    @property
    def config_restarts(self) -> int:
        """SIGHUPs the plugin received from config-manager (counted in its log)."""
        return self.log().count("Received SIGHUP, restarting.")

    @property
    def log_path(self) -> Path:
        return self._settings.workdir / "pod.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def start(self, selected: str | None) -> None:
        """The pod starts: its containers start as processes (the plugin then registers on its own)."""
        self.stop_process()
        self.join()
        self.error = None
        self.starts += 1
        argv, env = self._pod_command()
        self._stopping.clear()
        with self.log_path.open("ab") as log:
            log.write(f"--- pod start {self.starts} (config label: {selected})\n".encode())
            log.flush()
            self._process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        process = self._process
        self._watcher = threading.Thread(target=self._watch, args=(process,), name="nvidia-plugin-pod", daemon=True)
        self._watcher.start()

    def mark(self) -> SettleMark:
        """Where things stand now; `wait_settled(mark)` waits for what happens after it."""
        return SettleMark(self._host.manager.events, len(self.log()))

    def wait_settled(self, mark: SettleMark, *, quiet_s: float = 1.5, timeout_s: float = 60.0) -> bool:
        """Wait until the plugin is done (re)starting since `mark`: it registered with the kubelet and
        then held still for `quiet_s`, or it found nothing to serve, or it crash-loops (exited twice:
        once may be a SIGHUP that came before its handler), or the pod ended. False on timeout."""
        manager = self._host.manager
        deadline = Deadline(timeout_s)
        while not deadline.passed():
            if manager.wait_quiet(quiet_s, min(quiet_s * 2, max(deadline.left(), 0.01)), after=mark.events):
                return True
            since = self.log()[mark.log_size :]
            if _NO_DEVICES in since or since.count(_EXITED) >= 2 or self._process is None:
                return True
            if self._process.poll() is not None:
                return True
        return False

    def config_manager_outcome(self, mark: SettleMark, *, timeout_s: float = 60.0) -> str | None:
        """What the config-manager sidecar did about a label change since `mark`: "signalled" (it switched
        the config and SIGHUPed the plugin), "unchanged" (already configured) or "refused" (no such
        config: it exits); None on timeout."""
        deadline = Deadline(timeout_s)
        while not deadline.passed():
            since = self.log()[mark.log_size :]
            for marker, outcome in _CONFIG_MANAGER_OUTCOMES:
                if marker in since:
                    return outcome
            time.sleep(_WATCH_S)
        return None

    def config_selected(self, selected: str | None) -> None:
        """Nothing to do here: the config-manager sidecar watches the label itself."""

    def kubelet_restarted(self) -> None:
        """Nothing to do here: the plugin watches for kubelet.sock to be created itself."""

    def stop(self) -> None:
        """The pod is deleted: SIGTERM, the plugin removes its sockets, the kubelet sees it gone."""
        self.stop_process()
        manager = self._host.manager
        manager.wait_until(lambda: not any(manager.connected_sockets(r) for r in manager.known_resources()), 10)
        self._host.status.sync()

    def shut_down(self) -> None:
        self.stop_process()

    def join(self) -> None:
        if self._watcher is not None:
            self._watcher.join(timeout=_STOP_TIMEOUT_S)

    def stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        self._stopping.set()
        # unshare ignores SIGTERM while it waits for the pod's PID 1 (the script), so signal that one.
        for child in _children(process.pid) or [process.pid]:
            os.kill(child, signal.SIGTERM)
        try:
            process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _LOG.warning("the NVIDIA plugin pod did not stop on SIGTERM; killing it")
            process.kill()
            process.wait()

    @property
    def plugin_exits(self) -> int:
        """How often the plugin container exited (and was restarted) in this pod."""
        return self.log().count(_EXITED)

    def _watch(self, process: subprocess.Popen[bytes]) -> None:
        """Report each exit of the plugin (the pod crash-loops) and the pod's own end (init failed)."""
        reported = self.plugin_exits
        while process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(_WATCH_S)
            if self.plugin_exits > reported and not self._stopping.is_set():
                reported = self.plugin_exits
                self._report("nvidia-device-plugin exited")
        if not self._stopping.is_set() and process is self._process:
            self._report(f"nvidia-device-plugin pod exited with status {process.returncode}")

    def _report(self, what: str) -> None:
        lines = [line for line in self.log().splitlines() if line.strip() and not line.startswith("pod: ")]
        self.error = f"{what}: " + " | ".join(lines[-2:])
        _LOG.warning("%s", self.error)
        self._on_exit(self.error)

    def _pod_command(self) -> tuple[list[str], dict[str, str]]:
        settings = self._settings
        node_argv, node_env = settings.node_command([])
        plugin_args = ["--mig-strategy", str(settings.mig_strategy), *settings.extra_args]
        argv = [
            "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--propagation", "private",
            "bash", str(POD_SCRIPT), self._host.socket_dir, str(settings.device_plugin), str(settings.config_manager),
            str(len(node_argv)), *node_argv, *plugin_args,
        ]  # fmt: skip
        env = {
            **os.environ,
            **node_env,
            "DP_DISABLE_HEALTHCHECKS": "all",
            "RESTART_BACKOFF_S": f"{settings.restart_backoff_s:g}",
            **settings.env,
        }
        if settings.configs is not None:
            env.update(self._config_env(settings))
        return argv, env

    def _config_env(self, settings: NvidiaPluginSettings) -> dict[str, str]:
        """The ConfigMap mounted as the kubelet does (a file per key) and config-manager's settings."""
        source = settings.workdir / "available-configs"
        source.mkdir(exist_ok=True)
        for name, text in (settings.configs or {}).items():
            (source / name).write_text(text, encoding="utf-8")
        destination = settings.workdir / "config"
        destination.mkdir(exist_ok=True)
        return {
            "CONFIG_SRCDIR": str(source),
            "CONFIG_DST": str(destination / "config.yaml"),
            "KUBECONFIG": str(settings.kubeconfig),
            "NODE_NAME": settings.node_name,
            "DEFAULT_CONFIG": settings.default_config or "",
            "FALLBACK_STRATEGIES": settings.fallback_strategies,
        }


def gpu_node_command(state: Path, library: Path | None = None) -> NodeCommand:
    """Run commands on the simulated node whose state file is `state` (migagent_sim.gpu_node run)."""

    def wrap(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        lib = ["--lib", str(library)] if library is not None else []
        return [sys.executable, "-m", "migagent_sim.gpu_node", "run", "--state", str(state), *lib, "--", *argv], {}

    return wrap


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(word) for word in text.split()]


ContainerMaker = Callable[[DevicePluginHost, Callable[[str], None]], "NvidiaPluginContainer"]


def nvidia_plugin(settings: NvidiaPluginSettings) -> ContainerMaker:
    """A FakeKubelet `plugin_container` that runs NVIDIA's plugin with `settings`."""

    def make(host: DevicePluginHost, on_exit: Callable[[str], None]) -> NvidiaPluginContainer:
        return NvidiaPluginContainer(settings, host, on_exit)

    return make
