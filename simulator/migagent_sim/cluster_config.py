"""What a simulated node is made of: its layouts, its labels, its device plugin, the agent's fast options,
and the one construction of its kubelet (`make_kubelet`, for the fake API server and the real one alike).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import yaml

from migagent.attempt.ports import AgentSettings
from migagent.layout.strategy import MigStrategy
from migagent.node.names import deploy_label
from migagent.reconcile.retry import RetryPolicy
from migagent.sim.fake_nvml import FakeNvml
from migagent.sources.node_label import WatchSettings
from migagent.wiring import AgentOptions
from migagent_sim.cluster_api import ClusterApi
from migagent_sim.kubelet import FakeKubelet
from migagent_sim.kubelet_plugin import PluginMode
from migagent_sim.nvidia_plugin import ContainerMaker, NvidiaTools

DEMO_LAYOUTS = """\
version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  # GPUs 0-3 become "balanced" (two 1g.10gb kept, the other five merged into a 2g.20gb and a
  # 3g.40gb); GPUs 4-7 keep seven 1g.10gb each, untouched.
  half-balanced:
    - devices: [0, 1, 2, 3]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
    - devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
  all-7g:
    - devices: all
      mig-enabled: true
      mig-devices:
        "7g.80gb": 1
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  all-disabled:
    - devices: all
      mig-enabled: false
      mig-devices: {}
  not-advertisable:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1c.3g.40gb": 3
"""

GPU_OPERATOR_LABELS: Mapping[str, str] = MappingProxyType(
    {deploy_label(c): "true" for c in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")}
)


@dataclass(frozen=True)
class SimClusterConfig:
    spec: str = "8xH100-80GB-SXM"
    node_name: str = "gpu-node-1"
    layouts_yaml: str = DEMO_LAYOUTS
    start_layout: str | None = "all-1g.10gb"
    """Applied to the GPUs before anything starts (None: MIG disabled, no instances)."""
    labels: Mapping[str, str] = field(default_factory=lambda: dict(GPU_OPERATOR_LABELS))
    plugin_mode: PluginMode = "gpu-operator"
    plugin_lag_s: float = 0.0
    plugin_namespace: str = "gpu-operator"
    """Where the fake kubelet keeps the device-plugin pod (the standalone overlay: nvidia-device-plugin)."""
    plugin_labels: Mapping[str, str] | None = None
    """The plugin pod's labels (None: the GPU Operator's app=nvidia-device-plugin-daemonset)."""
    plugin_daemonset: str = "nvidia-device-plugin-daemonset"
    """The DaemonSet named as the plugin pod's owner (the standalone chart's `<release>-nvidia-device-plugin`)."""
    mig_strategy: MigStrategy = MigStrategy.MIXED
    """The device plugin's strategy; the agent's options() are set to the same."""
    watch_timeout_s: float = 30.0
    plugin_configs: Mapping[str, str] | None = None
    """The device plugin's ConfigMap (config name -> plugin config YAML, see `time_slicing_config`),
    chosen per node by `nvidia.com/device-plugin.config`; None: the plugin runs without sharing."""
    plugin_config_map: tuple[str, str] = ("gpu-operator", "nvidia-device-plugin-configs")
    plugin_default_config: str | None = None
    agent_reads_plugin_config: bool = True
    """options() point the agent at the plugin's ConfigMap (False: it must learn sharing otherwise)."""
    gfd_labels: bool = False
    """Publish GPU Feature Discovery's per-resource labels (replicas, product) with each registration."""
    dra_driver: bool = False
    """NVIDIA's DRA driver kubelet plugin runs on the node, publishing ResourceSlices (static MIG)."""
    nvidia_tools: NvidiaTools | None = None
    """Run NVIDIA's device plugin (and config-manager) from these binaries in the plugin pod instead
    of the simulated plugin; the GPUs' state is then saved to the workdir after every change, for them."""
    plugin_restart_backoff_s: float = 1.0
    """With `nvidia_tools`: how long the pod waits to restart a plugin that exited (10 s on a real node)."""


def time_slicing_config(
    replicas: int,
    *,
    resources: tuple[str, ...] = ("nvidia.com/mig-1g.10gb",),
    rename_by_default: bool = False,
    rename: Mapping[str, str] | None = None,
) -> str:
    """A device plugin config (version v1) replicating `resources` `replicas` times each."""
    entries = [
        {"name": name, "replicas": replicas, **({"rename": rename[name]} if rename and name in rename else {})}
        for name in resources
    ]
    config = {
        "version": "v1",
        "flags": {"migStrategy": "mixed"},
        "sharing": {"timeSlicing": {"renameByDefault": rename_by_default, "resources": entries}},
    }
    return str(yaml.safe_dump(config, sort_keys=False))


PDB_BLOCKING_FOR_NOW: dict[str, int] = {
    "observedGeneration": 1,
    "disruptionsAllowed": 0,
    "currentHealthy": 1,
    "desiredHealthy": 1,
    "expectedPods": 3,
}
"""A PodDisruptionBudget status (minAvailable 1) that blocks for now, not for good: 3 pods expected, 1
healthy (the other replicas not Ready yet). With 1 pod expected it would never allow an eviction,
and the agent's safety gate would refuse the change before touching the node."""


GIVE_UP_S = 120.0
"""The simulated agent's give-up deadlines (drain, re-advertisement, the plugin pod's return). A passing
test never reaches them: they only decide how long a stuck change waits before it fails. Cut to 10 s,
a loaded machine reached them in changes that were not stuck (a re-advertisement took over 10 s at
load 60 and a rollout halted); a test of the give-up path sets its own, shorter."""


def fast_options(node_name: str, layout_file: Path, socket_path: str) -> AgentOptions:
    """Agent options with every wait and poll cut down to simulator speed (the give-up deadlines are not
    waits: GIVE_UP_S)."""
    return AgentOptions(
        node_name=node_name,
        settings=AgentSettings(
            config_file=layout_file,
            drain_timeout_s=GIVE_UP_S,
            readvertise_timeout_s=GIVE_UP_S,
            readvertise_poll_s=0.05,
            plugin_settle_s=5.0,
            advertisement_stable_s=0.3,
            resync_period_s=60.0,
            retry=RetryPolicy(failure_backoff_initial=0.2, failure_backoff_max=2.0),
            heartbeat_s=1.0,
        ),
        podresources_socket=socket_path,
        plugin_timeout_s=GIVE_UP_S,
        poll_interval_s=0.05,
        watch=WatchSettings(resync_period_s=60.0, watch_timeout_s=30.0, backoff_initial_s=0.05, backoff_max_s=0.5),
        # Not cut down: an agent whose renewals a loaded machine delays past the Lease's duration stops
        # (someone else may own the node), and a test would see a node that never reports. Tests of
        # expiry set their own.
        lease_duration_s=15,
    )


def make_kubelet(
    config: SimClusterConfig,
    api: ClusterApi,
    fake: FakeNvml,
    *,
    socket_path: str,
    plugin_container: ContainerMaker | None = None,
) -> FakeKubelet:
    """The node's kubelet as `config` describes it: the one construction, for the fake API server and the real."""
    return FakeKubelet(
        api,
        fake,
        node_name=config.node_name,
        socket_path=socket_path,
        plugin_lag_s=config.plugin_lag_s,
        plugin_mode=config.plugin_mode,
        plugin_namespace=config.plugin_namespace,
        plugin_labels=config.plugin_labels,
        plugin_daemonset=config.plugin_daemonset,
        mig_strategy=config.mig_strategy,
        plugin_config_map=config.plugin_config_map if config.plugin_configs is not None else None,
        plugin_default_config=config.plugin_default_config,
        gfd_labels=config.gfd_labels,
        dra=config.dra_driver,
        plugin_container=plugin_container,
    )
