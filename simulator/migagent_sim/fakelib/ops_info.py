"""The fake library's ops for what the device plugin and GPU Feature Discovery read besides MIG
(native/fake_nvml/fake_nvml_info.c), over FakeNvml's InfoApi; conventions as in ops.py."""

from __future__ import annotations

from typing import Any

from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.fakelib.ops import Op, as_handle, int_answer, returns_int

Answer = tuple[tuple[int, ...], None]


def _compute_capability(fake: FakeNvml, device: int, *_: Any) -> Answer:
    return int_answer(*fake.nvmlDeviceGetCudaComputeCapability(as_handle(device)))


def _attributes(fake: FakeNvml, device: int, *_: Any) -> Answer:
    found = fake.nvmlDeviceGetAttributes_v2(as_handle(device))
    return int_answer(
        found.multiprocessorCount, found.sharedCopyEngineCount, found.sharedDecoderCount, found.sharedEncoderCount,
        found.sharedJpegCount, found.sharedOfaCount, found.gpuInstanceSliceCount, found.computeInstanceSliceCount,
        found.memorySizeMB,
    )  # fmt: skip


INFO_OPS: dict[str, Op] = {
    "minor_number": returns_int("nvmlDeviceGetMinorNumber"),
    "cuda_compute_capability": _compute_capability,
    "brand": returns_int("nvmlDeviceGetBrand"),
    "architecture": returns_int("nvmlDeviceGetArchitecture"),
    "attributes": _attributes,
    "supported_event_types": returns_int("nvmlDeviceGetSupportedEventTypes"),
}
