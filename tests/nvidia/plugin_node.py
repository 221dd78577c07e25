"""One simulated GPU node whose plugin pod runs NVIDIA's device plugin, for the judge tests.

The fake API server holds the Node; the simulated kubelet serves the device plugin API on a socket
directory of its own; FakeNvml holds the GPUs and is saved to a state file after every change, which
NVIDIA's binaries read through the fake libnvidia-ml.so.1 (migagent_sim.gpu_node). The plugin pod
follows the GPU Operator's deploy label: `run_plugin` starts it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from migagent.layout.observed import Observation
from migagent.layout.strategy import MigStrategy
from migagent.node.names import DEVICE_PLUGIN_CONFIG_LABEL, deploy_label
from migagent.nvml.driver import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.persistence import persist_after_each_mutation
from migagent.sim.reset import SimResetRunner
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.cluster import apply_directly
from migagent_sim.fakelib.backend import nvml_for
from migagent_sim.kubelet import FakeKubelet
from migagent_sim.kubelet_status import DevicePluginHost
from migagent_sim.nvidia_plugin import NvidiaPluginContainer, NvidiaPluginSettings, NvidiaTools, gpu_node_command

NODE = "gpu-node-1"
PLUGIN_DEPLOY = deploy_label("device-plugin")
CONFIG_MAP = ("gpu-operator", "device-plugin-configs")


@dataclass(frozen=True)
class PluginSetup:
    spec: str
    strategy: MigStrategy
    configs: dict[str, str] | None = None
    """The plugin's ConfigMap (config name -> plugin config), chosen by config-manager; None: none."""
    default_config: str | None = None
    config: str | None = None
    """The one config the plugin reads (`--config-file`, the plugin chart's static config), without
    config-manager."""


class PluginNode:
    def __init__(self, workdir: Path, tools: NvidiaTools, library: Path, setup: PluginSetup) -> None:
        self.workdir = workdir
        self.setup = setup
        self.layout_file = workdir / "layouts.yaml"
        self.state_file = workdir / "gpu-node.json"
        self.fake = FakeNvml.from_spec(setup.spec)
        self.api = FakeApiServer(grace_scale=0.01)
        self._socket_dir = Path(tempfile.mkdtemp(prefix="plug-"))
        kubeconfig = workdir / "kubeconfig" if setup.configs is not None else None
        static_config = workdir / "plugin-config.yaml"
        if setup.config is not None:
            static_config.write_text(setup.config, encoding="utf-8")
        self.settings = NvidiaPluginSettings(
            device_plugin=tools.device_plugin,
            config_manager=tools.config_manager,
            node_command=gpu_node_command(self.state_file, library),
            mig_strategy=setup.strategy,
            workdir=workdir,
            node_name=NODE,
            configs=setup.configs,
            default_config=setup.default_config,
            kubeconfig=kubeconfig,
            extra_args=("--config-file", str(static_config)) if setup.config is not None else (),
            restart_backoff_s=1.0,
        )
        self.container: NvidiaPluginContainer | None = None
        self.kubelet = FakeKubelet(
            self.api,
            self.fake,
            node_name=NODE,
            socket_path=str(self._socket_dir / "pod-resources.sock"),
            mig_strategy=setup.strategy,
            plugin_container=self._make_container,
        )

    def _make_container(self, host: DevicePluginHost, on_exit: Callable[[str], None]) -> NvidiaPluginContainer:
        self.container = NvidiaPluginContainer(self.settings, host, on_exit)
        return self.container

    def __enter__(self) -> PluginNode:
        self.api.start()
        self.fake.save(self.state_file)
        persist_after_each_mutation(self.fake, self.state_file)
        if self.settings.kubeconfig is not None:
            self.settings.kubeconfig.write_text(yaml.safe_dump(_kubeconfig(self.api.url)), encoding="utf-8")
        if self.setup.configs is not None:
            self.api.put_config_map(*CONFIG_MAP, self.setup.configs)
        self.api.add_node(NODE, labels={PLUGIN_DEPLOY: "false"})
        self.kubelet.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kubelet.stop()
        self.api.stop()

    # --- the node ----------------------------------------------------------------------------

    def lay_out(self, layouts_yaml: str, name: str) -> None:
        """Put the GPUs in layout `name` of `layouts_yaml` (mig-parted format), as a node set up beforehand."""
        self.layout_file.write_text(layouts_yaml, encoding="utf-8")
        apply_directly(self.fake, self.layout_file, name)

    def observe(self) -> Observation:
        with GpuDriver(nvml_for(self.fake), reset_runner=SimResetRunner(self.fake)) as driver:
            return driver.observe()

    def run_plugin(self, *, config_label: str | None = None) -> None:
        """Start the plugin pod (with the node's config label set first) and wait until it settled; with
        config-manager, once its sidecar decided about the label (it may SIGHUP the plugin just started)."""
        self._label(DEVICE_PLUGIN_CONFIG_LABEL, config_label)
        container = self.container
        assert container is not None
        mark = container.mark()
        self._label(PLUGIN_DEPLOY, "true")
        if self.setup.configs is not None:
            container.config_manager_outcome(mark)
        assert container.wait_settled(mark, timeout_s=90), f"the plugin did not settle:\n{self.plugin_log()}"

    def select_config(self, name: str | None) -> str | None:
        """Change the node's nvidia.com/device-plugin.config and wait for what config-manager makes of it
        (config_manager_outcome); when it restarts the plugin, until the plugin settled again."""
        container = self.container
        assert container is not None
        mark = container.mark()
        self._label(DEVICE_PLUGIN_CONFIG_LABEL, name)
        outcome = container.config_manager_outcome(mark)
        if outcome == "signalled":
            assert container.wait_settled(mark, timeout_s=90), f"the plugin did not settle:\n{self.plugin_log()}"
        return outcome

    def _label(self, key: str, value: str | None) -> None:
        def edit(node: dict[str, Any]) -> None:
            labels = node["metadata"].setdefault("labels", {})
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value

        self.api.update_node(NODE, edit)

    # --- what the judges read -----------------------------------------------------------------

    def registered(self) -> dict[str, tuple[str, ...]]:
        """What the plugin registers now: resource -> its healthy device ids, sorted."""
        return {name: tuple(sorted(ids)) for name, ids in self.kubelet.device_manager.healthy_devices().items()}

    def plugin_log(self) -> str:
        return self.container.log()[-4000:] if self.container is not None else ""

    @property
    def plugin_error(self) -> str | None:
        return self.kubelet.plugin_error


def _kubeconfig(url: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": url}}],
        "users": [{"name": "device-plugin", "user": {}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "device-plugin"}}],
        "current-context": "sim",
    }
