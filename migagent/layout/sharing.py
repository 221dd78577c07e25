"""The NVIDIA device plugin's sharing config: which resources it replicates, how often, under which name.

The plugin's config file (version v1; the same file GPU Feature Discovery reads) may say, besides its
flags (reference/landscape.md §3.4):

    sharing:
      timeSlicing:                 # or mps:, same shape
        renameByDefault: false     # true: every replicated resource becomes <name>.shared
        failRequestsGreaterThanOne: false
        resources:
          - name: nvidia.com/mig-1g.10gb
            replicas: 2            # each device is advertised twice (ids <uuid>::0, <uuid>::1)
            rename: nvidia.com/mig-1g.10gb.ts   # optional, wins over renameByDefault
            devices: all           # optional: all (default), a count, or a list of indexes/UUIDs

(k8s-device-plugin api/config/v1/replicas.go and sharing.go). So a node advertises instances x
replicas of each replicated resource, under its new name when renamed. A `devices` subset replicates
only some devices; which ones depends on the plugin's enumeration order, so the count is not
predicted (`exact` is False) rather than guessed. `failRequestsGreaterThanOne` changes admission,
not the count. MPS (`sharing.mps`) advertises replicas the same way; the plugin refuses MPS on MIG
devices, so a MIG resource under MPS is not predicted either.

Pure: the agent (what Node allocatable must show) and the simulator's device plugin (what it
registers) read the same rules from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from migagent.errors import PermanentError

SHARED_SUFFIX = ".shared"
SHARING_KINDS = ("timeSlicing", "mps")


class SharingConfigError(PermanentError):
    """A device plugin config the plugin itself would refuse (names the field and what is valid)."""


@dataclass(frozen=True)
class ReplicatedResource:
    """One entry of `sharing.<kind>.resources`."""

    name: str
    replicas: int
    rename: str | None = None
    all_devices: bool = True
    """False when `devices` names a count or a list: only some devices are replicated."""


@dataclass(frozen=True)
class Advertised:
    """How the plugin advertises one resource's devices."""

    name: str
    replicas: int
    exact: bool = True
    """False: instances x replicas is not what the node will show (a device subset, MPS on MIG)."""
    why_not_exact: str = ""
    name_known: bool = True
    """False: renamed to a name the source does not tell (GPU Feature Discovery labels)."""


@dataclass(frozen=True)
class SharingConfig:
    """The `sharing` section of one plugin config; the empty one replicates nothing."""

    kind: str = ""
    """`timeSlicing`, `mps`, or "" when nothing is replicated."""
    rename_by_default: bool = False
    resources: tuple[ReplicatedResource, ...] = ()

    @property
    def replicates(self) -> bool:
        return any(r.replicas > 1 for r in self.resources)

    def advertised(self, resource: str) -> Advertised:
        """The name and replica count under which the plugin advertises `resource`'s devices."""
        entry = next((r for r in self.resources if r.name == resource), None)
        if entry is None:
            return Advertised(resource, 1)
        name = entry.rename or (resource + SHARED_SUFFIX if self.rename_by_default else resource)
        if not entry.all_devices:
            return Advertised(name, entry.replicas, exact=False, why_not_exact=f"{resource} replicates a device subset")
        if self.kind == "mps" and resource.startswith("nvidia.com/mig-"):
            return Advertised(name, entry.replicas, exact=False, why_not_exact=f"{resource} is shared with MPS")
        return Advertised(name, entry.replicas)

    def describe(self) -> str:
        if not self.resources:
            return "no sharing"
        parts = []
        for entry in self.resources:
            name = self.advertised(entry.name).name
            parts.append(f"{entry.name} x{entry.replicas}" + (f" as {name}" if name != entry.name else ""))
        return f"{self.kind}: {', '.join(parts)}"


NO_SHARING = SharingConfig()


def parse_plugin_config(text: str, *, where: str) -> SharingConfig:
    """The sharing section of a device plugin config file (YAML or JSON); SharingConfigError naming
    `where` and the field when the plugin would refuse it."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SharingConfigError(f"{where}: not valid YAML: {exc}") from exc
    if document is None:
        return NO_SHARING
    if not isinstance(document, dict):
        raise SharingConfigError(f"{where}: a device plugin config is a mapping (version, flags, sharing)")
    version = document.get("version", "v1")
    if version != "v1":
        raise SharingConfigError(f"{where}: version {version!r} is not supported; valid: v1")
    sharing = document.get("sharing") or {}
    if not isinstance(sharing, dict):
        raise SharingConfigError(f"{where}: sharing must be a mapping with timeSlicing and/or mps")
    unknown = sorted(set(sharing) - set(SHARING_KINDS))
    if unknown:
        raise SharingConfigError(f"{where}: sharing.{unknown[0]} is not known; valid: {', '.join(SHARING_KINDS)}")
    # As the plugin: MPS, when it replicates, is the active strategy (api/config/v1/sharing.go).
    for kind in ("mps", "timeSlicing"):
        section = sharing.get(kind)
        if section:
            config = _section(section, kind=kind, where=where)
            if config.replicates or kind == "timeSlicing":
                return config
    return NO_SHARING


def _section(section: Any, *, kind: str, where: str) -> SharingConfig:
    field = f"sharing.{kind}"
    if not isinstance(section, dict):
        raise SharingConfigError(f"{where}: {field} must be a mapping with resources")
    resources = section.get("resources")
    if not isinstance(resources, list) or not resources:
        raise SharingConfigError(f"{where}: {field}.resources must list at least one resource (no resources specified)")
    rename_by_default = section.get("renameByDefault", False)
    if not isinstance(rename_by_default, bool):
        raise SharingConfigError(f"{where}: {field}.renameByDefault must be true or false")
    entries = tuple(_resource(entry, field=f"{field}.resources[{i}]", where=where) for i, entry in enumerate(resources))
    return SharingConfig(kind=kind, rename_by_default=rename_by_default, resources=entries)


def _resource(entry: Any, *, field: str, where: str) -> ReplicatedResource:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise SharingConfigError(f"{where}: {field}.name is required (a resource name such as nvidia.com/gpu)")
    replicas = entry.get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas <= 0:
        raise SharingConfigError(f"{where}: {field}.replicas must be a positive integer, got {replicas!r}")
    rename = entry.get("rename")
    if rename is not None and (not isinstance(rename, str) or not rename):
        raise SharingConfigError(f"{where}: {field}.rename must be a resource name")
    devices = entry.get("devices", "all")
    if isinstance(devices, str) and devices != "all":
        raise SharingConfigError(f"{where}: {field}.devices is {devices!r}; valid: all, a count, or a list")
    return ReplicatedResource(
        name=entry["name"], replicas=replicas, rename=rename or None, all_devices=devices == "all"
    )
