"""A node for `NodeReconcile` without HTTP or threads: FakeNvml behind the real GpuDriver and engine,
the in-memory KubePort (migagent_sim.doubles.memory_kube) with the real GpuOperatorPause and Drainer, an
in-memory PodResources, and a FakeClock. Two H100s holding `all-1g.10gb` (14 MIG devices)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from migagent.attempt.advertise.expectation import ExpectedAdvertisement
from migagent.attempt.advertise.expected import expected_resources
from migagent.attempt.advertise.sharing_source import SharingSettings, SharingSource
from migagent.attempt.drain.drainer import Drainer
from migagent.attempt.phases import AgentPhase
from migagent.attempt.ports import AgentPorts, AgentSettings, ReconcileReport
from migagent.attempt.reconcile_node import NodeReconcile
from migagent.attempt.window.deviceplugin import GpuOperatorPause
from migagent.attempt.window.post_change import PostChangeSteps
from migagent.clock import FakeClock
from migagent.layout.parse import load_layout_file
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.strategy import MigStrategy
from migagent.loops.agent import Agent
from migagent.node.budgets import PdbView
from migagent.node.names import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from migagent.node.port import PodView
from migagent.nvml.driver import GpuDriver
from migagent.podresources.model import PodDevices
from migagent.reconcile.journal import MemoryJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim.cluster import DEMO_LAYOUTS, GPU_OPERATOR_LABELS
from migagent_sim.doubles import builders
from migagent_sim.doubles.memory_kube import MemoryKube

ALL_1G = {"nvidia.com/mig-1g.10gb": 14}
BALANCED = {"nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 2, "nvidia.com/mig-3g.40gb": 2}
ALL_7G = {"nvidia.com/mig-7g.80gb": 2}


@dataclass
class PodResources:
    """The kubelet's PodResources List: the holdings of pods that still exist."""

    kube: MemoryKube
    holdings: list[PodDevices] = field(default_factory=list)

    def list(self) -> Sequence[PodDevices]:
        here = {(ref.namespace, ref.name) for ref in self.kube.pods}
        return [h for h in self.holdings if (h.namespace, h.name) in here]


class MemoryNode:
    def __init__(self, tmp_path: Path, *, start_layout: str = "all-1g.10gb") -> None:
        self.layout_file = tmp_path / "mig-layouts.yaml"
        self.layout_file.write_text(DEMO_LAYOUTS, encoding="utf-8")
        self.fake = FakeNvml.from_spec("2xH100-80GB-SXM")
        self.driver = GpuDriver(self.fake, reset_runner=SimResetRunner(self.fake)).__enter__()
        self.clock = FakeClock()
        self.journal = MemoryJournal()
        self.engine = ApplyEngine(self.driver, self.journal, clock=self.clock)
        self._apply(start_layout)
        self.kube = MemoryKube(
            labels={**GPU_OPERATOR_LABELS, MIG_CONFIG_LABEL: start_layout},
            advertise=lambda: expected_resources(self.driver.observe(), strategy=MigStrategy.MIXED),
        )
        self.kube.allocatable = dict(ALL_1G)
        self.pod_resources = PodResources(self.kube)
        self.settings = AgentSettings(config_file=self.layout_file, drain_timeout_s=10.0, readvertise_poll_s=0.5)
        self.post_change: PostChangeSteps | None = None
        self.label = start_layout
        """What the label watch has seen last (a change here mid-attempt supersedes the layout)."""

    def _apply(self, name: str) -> None:
        observation = self.driver.observe()
        desired = resolve_config(
            load_layout_file(self.layout_file), name, [identity_of(gpu) for gpu in observation.gpus]
        )
        result = self.engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=name)
        assert result.converged, result.error

    def ports(self) -> AgentPorts:
        return AgentPorts(
            api=self.kube,
            driver=self.driver,
            engine=self.engine,
            pod_resources=self.pod_resources,
            restarter=GpuOperatorPause(self.kube, clock=self.clock, timeout_s=5.0, poll_interval_s=0.5),
            drainer=Drainer(self.kube, clock=self.clock, poll_interval_s=0.5),
            clock=self.clock,
            advertisement=ExpectedAdvertisement(
                self.kube, strategy=MigStrategy.MIXED, sharing=SharingSource(SharingSettings()), stable_s=0.0
            ),
            post_change=self.post_change,
        )

    def set_label(self, name: str | None) -> None:
        """The admin writes the label and the watch sees it."""
        self.kube.set_label_for_test(MIG_CONFIG_LABEL, name)
        self.label = name  # type: ignore[assignment]

    def reconcile(
        self,
        *,
        stop: threading.Event | None = None,
        on_phase: Callable[[AgentPhase], None] | None = None,
        **settings: Any,
    ) -> ReconcileReport:
        return NodeReconcile(
            self.ports(),
            replace(self.settings, **settings),
            stop=stop,
            phase_hook=on_phase,
            current_label=lambda: self.label,
        ).run()

    def agent(self, **settings: Any) -> Agent:
        """The agent loop's scheduling around NodeReconcile, driven by `reconcile_once` (no thread)."""
        return Agent(self.ports(), replace(self.settings, **settings), current_label=lambda: self.label)

    # -- reading the node ---------------------------------------------------------------------

    @property
    def state(self) -> str | None:
        return self.kube.labels.get(MIG_CONFIG_STATE_LABEL)

    def condition(self) -> tuple[str, str, str]:
        found = self.kube.conditions["MigConfigReady"]
        return found.status, found.reason, found.message

    def released(self) -> bool:
        """Nothing outside the GPUs left disturbed: not cordoned, no label paused."""
        return not self.kube.unschedulable and "paused-for-mig-change" not in self.kube.labels.values()

    def gpu_pod(self, name: str, *, gpu: int, slot: int, labels: dict[str, str] | None = None) -> PodView:
        """A ReplicaSet pod holding the MIG device of the GI at `slot` on `gpu` (as PodResources says)."""
        gi = next(g for g in self.fake.state.gpus[gpu].gpu_instances if g.placement.start == slot)
        device = gi.compute_instances[0].uuid
        pod = builders.pod(
            name, namespace="ml", labels=labels, node_name=self.kube.node_name,
            gpu_resources=("nvidia.com/mig-1g.10gb",),
        )
        self.kube.add_pod(pod)
        self.pod_resources.holdings.append(PodDevices("ml", name, "main", "nvidia.com/mig-1g.10gb", (device,)))
        return pod

    def blocking_pdb(self, selects: dict[str, str]) -> None:
        """A budget that blocks for now (3 pods expected, minAvailable 1, none allowed), not for good."""
        self.kube.pdbs.append(
            PdbView("ml", "guard", match_labels=selects, min_available=1, expected_pods=3, disruptions_allowed=0)
        )
