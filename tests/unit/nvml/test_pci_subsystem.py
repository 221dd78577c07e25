"""The simulator reports a nonzero PCI subsystem id, as every real board does, so layouts with
subsystem-qualified device filters (`0xDDDDVVVV:0xSSSSVVVV`) select exactly the boards they name."""

from __future__ import annotations

from migagent.layout.parse import parse_layout
from migagent.layout.resolve import identity_of, resolve_config
from migagent.sim import FakeNvml
from migagent.sim.fake_nvml_device import simulated_subsystem_id
from tests.unit.nvml.conftest import DriverFactory


def _layout(*, partitioned: str, disabled: str) -> str:
    return f"""
version: v1
mig-configs:
  picked:
    - device-filter: ["{partitioned}"]
      devices: all
      mig-enabled: true
      mig-devices: {{"1g.10gb": 7}}
    - device-filter: ["{disabled}"]
      devices: all
      mig-enabled: false
"""


def test_observed_gpus_carry_the_nonzero_subsystem_id_nvml_reports(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-80GB,H100-80GB-SXM")
    gpus = open_driver(fake).observe().gpus

    assert [gpu.pci_subsystem_id for gpu in gpus] == [
        simulated_subsystem_id(fake.model(i).primary_pci_device_id) for i in range(2)
    ]
    assert all(gpu.pci_subsystem_id for gpu in gpus)


def test_a_subsystem_qualified_filter_selects_the_board_with_that_subsystem_only(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("2xA100-80GB", mig_enabled=True)
    identities = [identity_of(gpu) for gpu in open_driver(fake).observe().gpus]
    device_id = fake.model(0).primary_pci_device_id
    ours = f"{device_id:#010x}:{simulated_subsystem_id(device_id):#010x}"
    other_board = f"{device_id:#010x}:0x000010de"

    ours_partitioned = parse_layout(_layout(partitioned=ours, disabled=other_board), source="a.yaml")
    other_partitioned = parse_layout(_layout(partitioned=other_board, disabled=ours), source="b.yaml")

    assert [(g.index, g.mig_enabled) for g in resolve_config(ours_partitioned, "picked", identities).gpus] == [
        (0, True),
        (1, True),
    ]
    assert [(g.index, g.mig_enabled) for g in resolve_config(other_partitioned, "picked", identities).gpus] == [
        (0, False),
        (1, False),
    ]
