"""The NVIDIA device plugin's sharing config: which resources it replicates, how often, under which name.

The plugin's config file (version v1; the same file GPU Feature Discovery reads) may say, besides its
flags (docs/device-plugin.md §3):

    sharing:
      timeSlicing:                 # or mps:, same shape
        renameByDefault: false     # true: every replicated resource becomes <name>.shared
        failRequestsGreaterThanOne: false
        resources:
          - name: nvidia.com/mig-1g.10gb   # `mig-1g.10gb` means the same (nvidia.com/ is added)
            replicas: 2            # at least 2; each device is advertised twice (<uuid>::0, <uuid>::1)
            rename: ...            # parsed, then ignored (see below)
            devices: all           # parsed (all, a count, or a list of indexes/UUIDs), then ignored

(k8s-device-plugin v0.18.2 api/config/v1 replicas.go, sharing.go, config.go). A node advertises
instances x replicas of each replicated resource, `<name>.shared` with renameByDefault. The plugin
and GFD both call DisableResourceNamingInConfig before use: a custom `rename` is dropped (the
resource keeps its name, or gets `.shared` with renameByDefault) and a `devices` subset becomes
all devices, each with a warning, so neither changes what the node shows. `failRequestsGreaterThanOne`
changes admission (a request for more than one replica is refused by Allocate), not the count. MPS
(`sharing.mps`) advertises replicas the same way; the plugin refuses MPS on MIG devices and with the
mixed strategy, so a MIG resource under MPS is not predicted.

Pure: the agent (what Node allocatable must show) and the simulator's device plugin (what it
registers) read the same rules from here.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from migagent.errors import PermanentError
from migagent.layout.strict_yaml import YamlSyntaxError, load_plain

SHARED_SUFFIX = ".shared"
SHARING_KINDS = ("timeSlicing", "mps")


class SharingConfigError(PermanentError):
    """A device plugin config the plugin itself would refuse (names the field and what is valid)."""


RESOURCE_PREFIX = "nvidia.com/"
_MAX_RESOURCE_NAME = 63
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GPU_UUID = re.compile(r"^GPU-[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
_MIG_UUID = re.compile(r"^MIG-([0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}|GPU-[-0-9a-fA-F]+/\d+/\d+)$")
_INDEX = re.compile(r"^\d+(:\d+)?$")


@dataclass(frozen=True)
class ReplicatedResource:
    """One entry of `sharing.<kind>.resources`."""

    name: str
    replicas: int
    rename: str | None = None
    """As written; the plugin ignores it (only renameByDefault renames)."""
    all_devices: bool = True
    """False when `devices` names a count or a list, which the plugin ignores (it replicates all)."""


@dataclass(frozen=True)
class Advertised:
    """How the plugin advertises one resource's devices."""

    name: str
    replicas: int
    exact: bool = True
    """False: instances x replicas is not what the node will show (a device subset, MPS on MIG)."""
    why_not_exact: str = ""


@dataclass(frozen=True)
class SharingConfig:
    """The `sharing` section of one plugin config; the empty one replicates nothing."""

    kind: str = ""
    """`timeSlicing`, `mps`, or "" when nothing is replicated."""
    rename_by_default: bool = False
    resources: tuple[ReplicatedResource, ...] = ()
    fail_requests_greater_than_one: bool = False
    """Allocate refuses a container asking for more than one replica (always so under MPS)."""

    @property
    def replicates(self) -> bool:
        return any(r.replicas > 1 for r in self.resources)

    def advertised(self, resource: str) -> Advertised:
        """The name and replica count under which the plugin advertises `resource`'s devices."""
        entry = next((r for r in self.resources if r.name == resource), None)
        if entry is None:
            return Advertised(resource, 1)
        name = resource + SHARED_SUFFIX if self.rename_by_default else resource
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
NAMED_FALLBACK = "default"


def select_config(names: Collection[str], selected: str | None, default: str | None) -> str | None:
    """Which of the plugin's configs its config-manager picks: the node label's, else the default,
    else (its fallbacks as the plugin chart sets them: named, single) the one called `default`, else
    the only one; None: none (a label naming a config that is not there is returned as it is)."""
    if selected or default:
        return selected or default
    if NAMED_FALLBACK in names:
        return NAMED_FALLBACK
    return next(iter(names)) if len(names) == 1 else None


def parse_plugin_config(text: str, *, where: str) -> SharingConfig:
    """The sharing section of a device plugin config file (YAML or JSON); SharingConfigError naming
    `where` and the field when the plugin would refuse it."""
    try:
        document = load_plain(text)
    except YamlSyntaxError as exc:
        raise SharingConfigError(f"{where}: {exc}") from exc
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
    fail_greater = section.get("failRequestsGreaterThanOne", False)
    if not isinstance(fail_greater, bool):
        raise SharingConfigError(f"{where}: {field}.failRequestsGreaterThanOne must be true or false")
    entries = tuple(_resource(entry, field=f"{field}.resources[{i}]", where=where) for i, entry in enumerate(resources))
    return SharingConfig(
        kind=kind,
        rename_by_default=rename_by_default,
        resources=entries,
        fail_requests_greater_than_one=fail_greater or kind == "mps",  # MPS always refuses (config.go)
    )


def _resource(entry: Any, *, field: str, where: str) -> ReplicatedResource:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise SharingConfigError(f"{where}: {field}.name is required (a resource name such as nvidia.com/gpu)")
    name = _resource_name(entry["name"], field=f"{field}.name", where=where)
    replicas = entry.get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
        raise SharingConfigError(
            f"{where}: {field}.replicas must be an integer of at least 2 (the plugin refuses fewer), got {replicas!r}"
        )
    rename = entry.get("rename")
    if rename is not None:
        if not isinstance(rename, str) or not rename:
            raise SharingConfigError(f"{where}: {field}.rename must be a resource name")
        rename = _resource_name(rename, field=f"{field}.rename", where=where)
    devices = entry.get("devices", "all")
    _check_devices(devices, field=f"{field}.devices", where=where)
    return ReplicatedResource(name=name, replicas=replicas, rename=rename, all_devices=devices == "all")


def _resource_name(text: str, *, field: str, where: str) -> str:
    """NewResourceName: `nvidia.com/` is added when missing; the whole at most 63 characters, the part
    after the prefix a DNS subdomain."""
    name = text if text.startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + text
    short = name.split("/", 1)[1]
    if len(name) > _MAX_RESOURCE_NAME or not _DNS_SUBDOMAIN.match(short):
        raise SharingConfigError(
            f"{where}: {field} {text!r} is not a valid resource name: at most {_MAX_RESOURCE_NAME} characters"
            " with its nvidia.com/ prefix, lower case letters, digits, '-' and '.'"
        )
    return name


def _check_devices(devices: Any, *, field: str, where: str) -> None:
    """ReplicatedDevices.UnmarshalJSON: "all", a positive count, or a list of indexes or UUIDs."""
    if devices == "all":
        return
    if isinstance(devices, str):
        raise SharingConfigError(f"{where}: {field} is {devices!r}; valid: all, a count, or a list")
    if isinstance(devices, int) and not isinstance(devices, bool):
        if devices <= 0:
            raise SharingConfigError(f"{where}: {field} is {devices}; a count of devices must be > 0")
        return
    if isinstance(devices, list):
        for item in devices:
            text = str(item) if isinstance(item, int) and not isinstance(item, bool) else item
            if not isinstance(text, str) or not (_INDEX.match(text) or _GPU_UUID.match(text) or _MIG_UUID.match(text)):
                raise SharingConfigError(
                    f"{where}: {field} has {item!r}; valid items: a GPU index, a MIG index (0:1), a GPU or MIG UUID"
                )
        return
    raise SharingConfigError(f"{where}: {field} is {devices!r}; valid: all, a count, or a list")
