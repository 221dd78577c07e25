"""NVML is held only inside a session: per call, or once around a unit of work (nested = one init)."""

from __future__ import annotations

from migagent.catalog import Placement
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner

SEVEN_G = 0  # the A100's 7g.80gb GI profile id


class _CountingFake(FakeNvml):
    """FakeNvml recording each nvmlInit / nvmlShutdown."""

    calls: list[str]

    def nvmlInit(self) -> None:  # noqa: N802
        self.calls = getattr(self, "calls", [])
        self.calls.append("init")
        super().nvmlInit()

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.calls.append("shutdown")
        super().nvmlShutdown()


def _fake(spec: str, *, mig_enabled: bool = False) -> _CountingFake:
    fake = _CountingFake.from_spec(spec, mig_enabled=mig_enabled)
    assert isinstance(fake, _CountingFake)
    return fake


def test_a_driver_outside_a_session_holds_nvml_only_for_each_call() -> None:
    fake = _fake("2xA100-80GB", mig_enabled=True)
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    assert fake.sim_nvml_clients == 0
    driver.observe()
    driver.create_gpu_instance(0, profile_id=SEVEN_G, placement=Placement(0, 8))
    assert fake.sim_nvml_clients == 0
    assert not driver.nvml_held
    assert fake.calls == ["init", "shutdown", "init", "shutdown"]


def test_nested_sessions_and_every_call_inside_share_one_nvml_init() -> None:
    fake = _fake("2xA100-80GB", mig_enabled=True)
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    with driver.session():
        with driver.session():
            driver.observe()
            assert fake.sim_nvml_clients == 1
        driver.observe_gpu(1)
        assert driver.nvml_held
    assert fake.calls == ["init", "shutdown"]
    assert fake.sim_nvml_clients == 0


def test_a_reset_inside_a_session_releases_nvml_once_and_initialises_it_again() -> None:
    fake = _fake("A100-80GB")
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    with driver.session():
        driver.set_mig_mode(0, enabled=True)
        driver.reset_gpu(0)  # the simulated nvidia-smi refuses while this process holds NVML
        assert driver.observe_gpu(0).mig_current
    assert fake.calls == ["init", "shutdown", "init", "shutdown"]
    assert fake.sim_nvml_clients == 0


def test_a_reset_outside_a_session_leaves_nvml_released() -> None:
    fake = _fake("A100-80GB")
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    driver.set_mig_mode(0, enabled=True)
    driver.reset_gpu(0)
    assert fake.sim_nvml_clients == 0
    assert not driver.nvml_held
