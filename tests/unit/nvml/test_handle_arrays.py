"""GI/CI handle arrays are sized for the larger of NVML's instance count and the catalog's maximum:
a count NVML under-reports (mig-parted hard-codes A30's) must not hide instances or overrun the array."""

from __future__ import annotations

from typing import Any

from migagent.catalog import Placement
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner

ONE_G = 19  # A100-80GB 1g.10gb
THREE_G = 9  # A100-80GB 3g.40gb


class _UnderReportingCounts(FakeNvml):
    """A driver whose GI and CI profile infos say one instance at most."""

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:  # noqa: N802
        info = super().nvmlDeviceGetGpuInstanceProfileInfo(device, profile, version)
        info.instanceCount = 1
        return info

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(  # noqa: N802
        self, gpu_instance: Any, profile: int, eng_profile: int, version: int = 2
    ) -> Any:
        info = super().nvmlGpuInstanceGetComputeInstanceProfileInfo(gpu_instance, profile, eng_profile, version)
        info.instanceCount = 1
        return info


def test_instances_past_an_under_reported_count_are_all_observed() -> None:
    fake = _UnderReportingCounts.from_spec("A100-80GB", mig_enabled=True)
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    with driver.session():
        for start in range(3):
            gi_id = driver.create_gpu_instance(0, profile_id=ONE_G, placement=Placement(start, 1))
            driver.create_compute_instance(0, gi_id=gi_id, profile_id=0, placement=Placement(0, 1))
        three_g = driver.create_gpu_instance(0, profile_id=THREE_G, placement=Placement(4, 4))
        for start in range(3):
            driver.create_compute_instance(0, gi_id=three_g, profile_id=0, placement=Placement(start, 1))
        gpu = driver.observe().gpu(0)
    assert [gi.placement.start for gi in gpu.gpu_instances] == [0, 1, 2, 4]
    assert [len(gi.compute_instances) for gi in gpu.gpu_instances] == [1, 1, 1, 3]
