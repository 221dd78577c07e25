"""What a node's agent reports about its GPUs, read back from the Node's `migagent.io/observed`.

The agent writes, per GPU, its identity (index, uuid, model name, PCI ids), MIG mode and every GPU
instance with its profile ids, placement and the pods holding it (attempt/report/status.observed_annotation).
That is enough to run the planner for a node without reaching it: the profile table comes from the
catalog, by the GPU's PCI device id. A GPU of a model the catalog lacks makes the node unplannable
(said, never guessed).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from migagent.catalog import model_by_pci_device_id
from migagent.catalog.model import Placement
from migagent.jsontext import decode_json
from migagent.layout.observed import Observation, ObservedCi, ObservedGi, ObservedGpu


class UnreadableReportError(ValueError):
    """The annotation is absent, not what the agent writes, or names a GPU model the catalog lacks."""


@dataclass(frozen=True)
class ReportedNode:
    """A node as its agent last reported it: the GPUs, and the pods (`namespace/name`) on each GI."""

    observation: Observation
    pods: Mapping[tuple[int, Placement], tuple[str, ...]] = field(default_factory=dict, hash=False)

    def workloads(self) -> dict[tuple[int, Placement], int]:
        """Pods per GI, as the planner takes them (it evicts the fewest)."""
        return {gi: len(held) for gi, held in self.pods.items()}

    def pods_on_gpu(self, index: int) -> tuple[str, ...]:
        return tuple(sorted({pod for (gpu, _), held in self.pods.items() if gpu == index for pod in held}))


@functools.lru_cache(maxsize=4096)
def _placement(text: str) -> Placement:
    start, _, size = text.partition(":")
    return Placement(int(start), int(size))


def _gi(entry: Mapping[str, Any], gpu_index: int) -> ObservedGi:
    return _reported_gi(gpu_index, str(entry["placement"]), int(entry["profile_id"]),
                        tuple(int(ci) for ci in entry.get("ci_profile_ids") or ()))


@functools.lru_cache(maxsize=4096)
def _reported_gi(gpu_index: int, placement_text: str, profile_id: int, ci_profile_ids: tuple[int, ...]) -> ObservedGi:
    """One GI as reported (alike on every node that reports it: one object for all, across a fleet)."""
    placement = _placement(placement_text)
    cis = tuple(
        ObservedCi(id=i, profile_id=ci, placement=Placement(0, 0), uuid=f"reported-{gpu_index}-{placement}-{i}")
        for i, ci in enumerate(ci_profile_ids)
    )
    return ObservedGi(id=0, profile_id=profile_id, placement=placement, compute_instances=cis)


def _gpu(entry: Mapping[str, Any]) -> ObservedGpu:
    index = int(entry["index"])
    pci = entry.get("pci_device_id")
    if pci is None:
        raise UnreadableReportError(f"GPU {index}: no pci_device_id (an agent older than `migagent rollout`)")
    model = model_by_pci_device_id(int(pci))
    if model is None:
        raise UnreadableReportError(
            f"GPU {index} ({entry.get('name', '?')}): PCI device id {int(pci):#x} is not in the catalog"
        )
    current = entry.get("mode") == "enabled"
    pending = entry.get("pending_mode", entry.get("mode")) == "enabled"
    subsystem = entry.get("pci_subsystem_id")
    return ObservedGpu(
        index=index,
        uuid=str(entry.get("uuid", f"GPU-{index}")),
        name=str(entry.get("name", model.name)),
        pci_bus_id="",
        pci_device_id=int(pci),
        mig_capable=bool(entry.get("mig_capable", True)),
        mig_current=current,
        mig_pending=pending,
        gpu_instances=tuple(_gi(gi, index) for gi in entry.get("gpu_instances") or ()),
        profiles=model.profiles,
        mode_change_needs_reset=model.mode_change_needs_reset,
        pci_subsystem_id=None if subsystem is None else int(subsystem),
    )


def read_report(annotation: str | None) -> ReportedNode:
    """The node's GPUs and pods per GI from its observed annotation; UnreadableReportError says why not."""
    if not annotation:
        raise UnreadableReportError("no agent has reported this node's GPUs (no migagent.io/observed)")
    try:
        entries = decode_json(annotation)
        gpus = tuple(_gpu(entry) for entry in entries)
        pods = {
            (int(entry["index"]), _placement(str(gi["placement"]))): tuple(sorted(gi["pods"]))
            for entry in entries
            for gi in entry.get("gpu_instances") or ()
            if gi.get("pods")
        }
    except UnreadableReportError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise UnreadableReportError(f"migagent.io/observed is not what the agent writes: {error}") from error
    return ReportedNode(Observation(gpus), pods)
