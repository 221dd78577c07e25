"""Every GI multiset of every catalog model, through the real stack on FakeNvml.

Each multiset that fits is planned, applied by the engine through GpuDriver on a simulated GPU of
that model (starting from the previous multiset, so every apply is also a transition) and
asserted; each multiset one instance beyond a fitting one that a naive brute-force packer
(tests/unit/planning/brute.py, independent of the planner) cannot place is refused with no NVML mutation at all.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from migagent.catalog import all_models
from migagent.catalog.model import GpuModel
from migagent.clock import FakeClock
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.nvml.driver import GpuDriver
from migagent.planning import enumerate_fitting_multisets
from migagent.planning.solver import default_gi
from migagent.reconcile.assertion import config_mismatches
from migagent.reconcile.bootid import FixedBootId
from migagent.reconcile.journal import MemoryJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine, ApplyOutcome, ApplyResult
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from tests.unit.planning.brute import brute_fits


class _Gpu:
    """One simulated MIG-enabled GPU of a model, with a fresh engine per apply."""

    def __init__(self, model: GpuModel) -> None:
        self.fake = FakeNvml.from_models([model], mig_enabled=True)
        self.driver = GpuDriver(self.fake, reset_runner=SimResetRunner(self.fake)).__enter__()
        self.journal = MemoryJournal()

    def apply(self, gis: tuple[DesiredGi, ...]) -> tuple[DesiredNode, ApplyResult]:
        desired = DesiredNode(gpus=(DesiredGpu(index=0, mig_enabled=True, gpu_instances=gis),))
        engine = ApplyEngine(self.driver, self.journal, clock=FakeClock(), boot_id_provider=FixedBootId())
        with capture_logs():
            return desired, engine.apply(desired, layout_hash=desired_node_hash(desired), config_name="x")


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_every_fitting_multiset_is_applied_on_fake_nvml_and_asserts_as_applied(model: GpuModel) -> None:
    gpu = _Gpu(model)
    multisets = enumerate_fitting_multisets(model.profiles)
    assert len(multisets) > 1
    for gis in multisets:
        desired, result = gpu.apply(gis)
        assert result.outcome is ApplyOutcome.CONVERGED, f"{model.key} {gis}: {result.error}"
        assert config_mismatches(gpu.driver.observe(), desired) == (), f"{model.key} {gis}"


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_every_multiset_one_instance_too_large_is_refused_before_any_nvml_mutation(model: GpuModel) -> None:
    table = model.profiles
    gpu = _Gpu(model)
    refused = 0
    for base in enumerate_fitting_multisets(table):
        for extra in table.gi_profiles:
            candidate = (*base, default_gi(table, extra.id))
            if brute_fits(table, [gi.profile_id for gi in candidate]):
                continue
            gpu.fake.sim_mutations = []
            _, result = gpu.apply(candidate)
            assert result.outcome is ApplyOutcome.FAILED, f"{model.key} {candidate}"
            assert result.error is not None
            assert result.error.startswith(f"GPU 0 ({gpu.driver.observe().gpu(0).name}): ")
            assert "closest layout that fits" in result.error
            assert gpu.fake.sim_mutations == [], f"{model.key} {candidate}"
            refused += 1
    assert refused > 0
