"""Which sharing config the device plugin on this node runs with, from what the agent can read.

In order (the first one configured wins):
1. `--device-plugin-config-file`: a plugin config file (the one config, whatever the node label
   says), or a directory of them named by config (a mounted copy of the plugin's ConfigMap, selected
   as below), for hosts where the ConfigMap is not readable;
2. `--device-plugin-config-map NAMESPACE/NAME`: the plugin's ConfigMap (GPU Operator ClusterPolicy
   `devicePlugin.config.name`, in the operator namespace; the plugin chart's `config.name`, or the
   `<release>-nvidia-device-plugin-configs` map it renders from `config.map`);
3. GPU Feature Discovery's labels on the Node: `nvidia.com/<resource>.replicas` and `.product`,
   which ends `-SHARED` for a replicated resource that is not renamed (GFD internal/lm/resource.go);
   GFD and the plugin (v0.18.2) honour no rename but renameByDefault's, so a replicated resource
   whose product lacks `-SHARED` is advertised as `<resource>.shared`.
With 1 and 2 the config is the key the Node's `nvidia.com/device-plugin.config` label names, else
`--device-plugin-config-default` (ClusterPolicy `devicePlugin.config.default`, chart
`config.default`), else config-manager's fallbacks as the plugin chart sets them: the key `default`,
else the only key (layout.sharing.select_config). A Node that selects a config nothing configured can read is
"unknown", not "unshared": the agent then waits for a stable advertisement (advertisement.py).
GFD labels only exist for resources present when GFD last ran, so a resource it has not labelled
yet is unknown when it replicates anything, and plain otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from migagent.durable import read_bounded
from migagent.errors import PermanentError
from migagent.layout.sharing import (
    NO_SHARING,
    SHARED_SUFFIX,
    Advertised,
    SharingConfig,
    SharingConfigError,
    parse_plugin_config,
    select_config,
)
from migagent.node.names import DEVICE_PLUGIN_CONFIG_LABEL
from migagent.node.port import NodeView

_REPLICAS_SUFFIX = ".replicas"
_PRODUCT_SUFFIX = ".product"
_SHARED_PRODUCT = "-SHARED"


@dataclass(frozen=True)
class SharingView:
    """What the agent knows of the plugin's sharing config on this node, and where it learnt it."""

    source: str
    config: SharingConfig | None = None
    labelled: Mapping[str, Advertised | None] = field(default_factory=dict)
    """From GFD labels: per resource (without sharing) how it is advertised (None: the labels do not say)."""
    unlabelled_known: bool = True
    """From GFD: a resource without labels is plain (nothing on the node replicates)."""
    unknown: bool = False

    def advertised(self, resource: str) -> Advertised | None:
        """How `resource` is advertised; None when the agent cannot know."""
        if self.config is not None:
            return self.config.advertised(resource)
        if self.unknown:
            return None
        if resource in self.labelled:
            return self.labelled[resource]
        return Advertised(resource, 1) if self.unlabelled_known else None

    def describe(self) -> str:
        if self.config is not None:
            return self.config.describe()
        if self.unknown:
            return "unknown"
        shared = [f"{name} x{a.replicas}" for name, a in sorted(self.labelled.items()) if a and a.replicas > 1]
        return "GFD labels: " + (", ".join(shared) or "nothing replicated")


PLAIN = SharingView(source="no device plugin sharing config configured", config=NO_SHARING)


class ConfigMapReader(Protocol):
    def read_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The ConfigMap's data; None when it does not exist."""
        ...


@dataclass(frozen=True)
class SharingSettings:
    config_file: Path | None = None
    config_map: str | None = None
    """`namespace/name` of the plugin's ConfigMap."""
    default_config: str | None = None
    gfd_labels: bool = True

    def __post_init__(self) -> None:
        if self.config_map is not None and self.config_map.count("/") != 1:
            raise SharingConfigError(
                f"--device-plugin-config-map {self.config_map!r} must be NAMESPACE/NAME,"
                " e.g. gpu-operator/time-slicing-config"
            )


class SharingSource:
    def __init__(self, settings: SharingSettings, *, reader: ConfigMapReader | None = None) -> None:
        self._settings = settings
        self._reader = reader

    def view(self, node: NodeView) -> SharingView:
        selected = node.labels.get(DEVICE_PLUGIN_CONFIG_LABEL)
        settings = self._settings
        if settings.config_file is not None:
            files = _read_files(settings.config_file)
            if not settings.config_file.is_dir():  # the one config this host's plugin runs with
                where = str(settings.config_file)
                return SharingView(source=where, config=parse_plugin_config(next(iter(files.values())), where=where))
            return self._select(files, str(settings.config_file), selected)
        if settings.config_map is not None and self._reader is not None:
            return self._from_config_map(settings.config_map, self._reader, selected)
        if settings.gfd_labels and any(_replicas_labels(node.labels)):
            return gfd_view(node.labels)
        if selected:
            return SharingView(
                source=f"the node selects device plugin config {selected!r} ({DEVICE_PLUGIN_CONFIG_LABEL}), which the"
                " agent cannot read: pass --device-plugin-config-map or --device-plugin-config-file",
                unknown=True,
            )
        return PLAIN

    def _from_config_map(self, config_map: str, reader: ConfigMapReader, selected: str | None) -> SharingView:
        namespace, name = config_map.split("/")
        where = f"ConfigMap {config_map}"
        try:
            data = reader.read_config_map(namespace, name)
        except PermanentError as exc:  # forbidden, say: the plugin's config is then unknown, not absent
            return SharingView(source=f"{where} not readable: {exc}", unknown=True)
        if data is None:
            return SharingView(source=f"{where} does not exist", unknown=True)
        return self._select(data, where, selected)

    def _select(self, configs: Mapping[str, str], where: str, selected: str | None) -> SharingView:
        """The config `selected` (else the default, else the only one), parsed; only that one must be valid."""
        key = select_config(configs, selected, self._settings.default_config)
        if key is None:
            return SharingView(
                source=f"{where} has {len(configs)} configs ({', '.join(configs)}) and neither the node label"
                f" {DEVICE_PLUGIN_CONFIG_LABEL} nor --device-plugin-config-default picks one",
                unknown=True,
            )
        if key not in configs:
            return SharingView(
                source=f"the node selects device plugin config {key!r}, which {where} does not have"
                f" (it has: {', '.join(configs) or 'none'})",
                unknown=True,
            )
        how = "node label" if selected else "default"
        config = parse_plugin_config(configs[key], where=f"{where} config {key}")
        return SharingView(source=f"{where}, config {key!r} ({how})", config=config)


def _read_files(path: Path) -> dict[str, str]:
    """One config file (its key: its stem), or a directory holding a file per config (a mounted ConfigMap)."""
    try:
        if path.is_dir():
            files = [f for f in sorted(path.iterdir()) if f.is_file() and not f.name.startswith(".")]
            return {f.name: read_bounded(f).decode("utf-8") for f in files}
        return {path.stem: read_bounded(path).decode("utf-8")}
    except OSError as exc:
        raise SharingConfigError(f"--device-plugin-config-file {path}: cannot be read: {exc.strerror or exc}") from exc


def _replicas_labels(labels: Mapping[str, str]) -> list[str]:
    return [key for key in labels if key.startswith("nvidia.com/") and key.endswith(_REPLICAS_SUFFIX)]


def gfd_view(labels: Mapping[str, str]) -> SharingView:
    """What GPU Feature Discovery's labels say: per resource its replicas, and renamed or not."""
    labelled: dict[str, Advertised | None] = {}
    for key in _replicas_labels(labels):
        resource = key.removesuffix(_REPLICAS_SUFFIX)
        try:
            replicas = int(labels[key])
        except ValueError:
            continue
        if replicas <= 0:
            # GFD labels a MIG-enabled GPU's nvidia.com/gpu without its sharing (replicas 0), yet under the
            # `none` strategy the plugin replicates those GPUs as its config says: found against NVIDIA's GFD.
            labelled[resource] = None
            continue
        product = labels.get(resource + _PRODUCT_SUFFIX, "")
        renamed = replicas > 1 and not product.endswith(_SHARED_PRODUCT)
        labelled[resource] = Advertised(resource + SHARED_SUFFIX if renamed else resource, replicas)
    replicating = any(a is not None and a.replicas > 1 for a in labelled.values())
    return SharingView(
        source="GPU Feature Discovery labels (nvidia.com/<resource>.replicas)",
        labelled=labelled,
        unlabelled_known=not replicating,
    )
