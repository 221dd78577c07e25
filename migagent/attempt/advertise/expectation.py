"""What Node allocatable must show for the MIG devices the GPUs hold, under the plugin's sharing config.

`expected_resources` (expected.py) gives one device per MIG device under the plugin's MIG strategy;
the plugin's sharing config (migagent.layout.sharing, learnt by sharing_source.py) then multiplies
each replicated resource by its replicas and may rename it (`nvidia.com/mig-1g.10gb` x2 ->
`nvidia.com/mig-1g.10gb.shared: 14` for 7 instances). What the agent cannot know (a config it cannot
read, a device subset, a label GPU Feature Discovery has not written yet) is not guessed: that
resource is only required to be advertised, at least once per instance, and the wait asks for an
advertisement that holds still for `stable_s` instead of an exact count; `note` says why, once, in
the condition and the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog

from migagent.attempt.advertise.expected import expected_resources
from migagent.attempt.advertise.sharing_source import SharingSource, SharingView
from migagent.layout.observed import Observation
from migagent.layout.strategy import MigStrategy
from migagent.node.dra import Probe
from migagent.node.names import GPU_RESOURCE, MIG_RESOURCE_PREFIX, SHARED_GPU_RESOURCE
from migagent.node.port import KubePort, NodeView

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ResourceExpectation:
    """One resource the plugin advertises for the MIG devices of one kind."""

    resource: str
    """The name without sharing (`nvidia.com/mig-1g.10gb`)."""
    instances: int
    names: tuple[str, ...]
    """The names it may be advertised under (two when the sharing is unknown: its own, or `.shared`)."""
    count: int | None
    """instances x replicas; None when the replicas are unknown."""

    @property
    def exact(self) -> bool:
        return self.count is not None


@dataclass(frozen=True)
class Expectation:
    entries: tuple[ResourceExpectation, ...] = ()
    note: str | None = None
    """What the agent does not know about the advertisement, said in the condition (None: exact)."""
    stable_s: float = 0.0
    """With an inexact expectation: how long the advertisement must hold still to count as settled."""
    probe: Probe | None = field(default=None, compare=False)

    @classmethod
    def of(cls, expected: Mapping[str, int] | Expectation) -> Expectation:
        """`expected` as it is, or exactly these counts (resource name -> count)."""
        if isinstance(expected, Expectation):
            return expected
        return cls(tuple(ResourceExpectation(name, count, (name,), count) for name, count in expected.items()))

    @property
    def exact(self) -> bool:
        return all(entry.exact for entry in self.entries)

    def counts(self) -> dict[str, int]:
        """The exact entries as resource name -> count (the first name each may have)."""
        return {e.names[0]: e.count for e in self.entries if e.count is not None}

    def diff(self, allocatable: Mapping[str, int]) -> dict[str, tuple[int, int]]:
        """Each differing resource -> (advertised, expected); for a count the agent does not know,
        `expected` is the least it accepts (one per instance). Every other `nvidia.com/mig-*` resource
        must be 0 or absent; resources that are neither expected nor MIG are ignored."""
        diff: dict[str, tuple[int, int]] = {}
        covered: set[str] = set()
        for entry in self.entries:
            covered.update(entry.names)
            have = sum(allocatable.get(name, 0) for name in entry.names)
            if entry.count is not None and have != entry.count:
                diff[entry.names[0]] = (have, entry.count)
            elif entry.count is None and have < max(entry.instances, 1):
                diff[entry.names[0]] = (have, max(entry.instances, 1))
        for name, have in allocatable.items():  # a resource no device explains must be gone (0 or absent)
            if name.startswith(MIG_RESOURCE_PREFIX) and name not in covered and have:
                diff[name] = (have, 0)
        return dict(sorted(diff.items()))

    def matches(self, allocatable: Mapping[str, int]) -> tuple[bool, dict[str, tuple[int, int]]]:
        """(matches, diff): the counts match and the probe (DRA), if any, sees the devices too."""
        diff = self.diff(allocatable)
        return (not diff and (self.probe is None or self.probe() is None), diff)

    def describe(self) -> str:
        """`2 resource(s) (nvidia.com/mig-1g.10gb: 14, ...)`, and what is not known."""
        parts = [
            f"{'/'.join(e.names)}:"
            f" {e.count if e.count is not None else f'>= {e.instances}'}"
            for e in self.entries
        ]
        text = f"{len(self.entries)} resource(s) ({', '.join(parts)})"
        if self.note:
            text += f"; {self.note}: waiting for an advertisement stable for {self.stable_s:g}s"
        return text


def advertisement_matches(
    allocatable: Mapping[str, int], expected: Mapping[str, int] | Expectation
) -> tuple[bool, dict[str, tuple[int, int]]]:
    """(matches, diff): diff maps each differing resource to (advertised, expected)."""
    return Expectation.of(expected).matches(allocatable)


def plugin_resources(allocatable: Mapping[str, int]) -> dict[str, int]:
    """The resources a NVIDIA device plugin may own, from allocatable (what must hold still)."""
    return {
        name: count
        for name, count in sorted(allocatable.items())
        if name.startswith(MIG_RESOURCE_PREFIX) or name.startswith(GPU_RESOURCE)
    }


def expectation(
    observation: Observation, *, strategy: MigStrategy, sharing: SharingView, stable_s: float = 0.0
) -> Expectation:
    """Expectation for the node's GPUs (raises NotAdvertisableError as `expected_resources`)."""
    base = expected_resources(observation, strategy=strategy)
    entries: list[ResourceExpectation] = []
    unknown: list[str] = []
    for resource, instances in base.items():
        advertised = sharing.advertised(resource)
        if advertised is None:
            entries.append(ResourceExpectation(resource, instances, _candidates(resource), None))
            unknown.append(f"replicas of {resource}")
            continue
        count = instances * advertised.replicas if advertised.exact else None
        entries.append(ResourceExpectation(resource, instances, (advertised.name,), count))
        if not advertised.exact:
            unknown.append(advertised.why_not_exact)
    note = None
    if unknown:
        note = f"{'; '.join(unknown)} not known ({sharing.source})"
    return Expectation(tuple(entries), note=note, stable_s=stable_s if note else 0.0)


def _candidates(resource: str) -> tuple[str, ...]:
    """Where a resource with unknown sharing may show up: its own name, or renamed by default."""
    if resource == GPU_RESOURCE:
        return (GPU_RESOURCE, SHARED_GPU_RESOURCE)
    return (resource, resource + ".shared")


class ExpectedAdvertisement:
    """The agent's port: what to expect now, from the Node (its labels select the plugin's config)."""

    def __init__(
        self,
        api: KubePort,
        *,
        strategy: MigStrategy,
        sharing: SharingSource,
        stable_s: float,
        probe: Callable[[Observation], Probe | None] | None = None,
        device_plugin: bool = True,
    ) -> None:
        """`probe`: another consumer's check per observation (DRA); `device_plugin` False: no plugin
        advertises anything, so only that probe counts."""
        self._api = api
        self._strategy = strategy
        self._sharing = sharing
        self._stable_s = stable_s
        self._probe = probe
        self._device_plugin = device_plugin
        self._said: str | None = None

    def expected(
        self, observation: Observation, *, strategy: MigStrategy | None = None, node: NodeView | None = None
    ) -> Expectation:
        """`strategy`: the one resolved for this attempt (--mig-strategy auto), else the configured one;
        `node`: the Node as just read (its device-plugin config label), else read here."""
        if not self._device_plugin:
            found = Expectation()
            return Expectation(probe=self._probe(observation)) if self._probe is not None else found
        view = self._sharing.view(node if node is not None else self._api.get_node())
        found = expectation(observation, strategy=strategy or self._strategy, sharing=view, stable_s=self._stable_s)
        said = found.note or view.source
        if said != self._said:  # said once per change of what is known, not at every reconcile
            self._said = said
            if found.note:
                log.warning("advertisement_not_fully_known", note=found.note, stable_s=self._stable_s)
            else:
                log.info("device_plugin_sharing", source=view.source, sharing=view.describe())
        if self._probe is not None:
            return Expectation(found.entries, found.note, found.stable_s, self._probe(observation))
        return found
