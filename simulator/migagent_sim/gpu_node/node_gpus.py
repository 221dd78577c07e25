"""The facts the node's files state about each GPU (files.GpuFacts), read from a simulated node."""

from __future__ import annotations

from migagent.catalog import model_by_key
from migagent.sim.device_bus import parse_bus_id
from migagent.sim.fake_nvml_device import simulated_subsystem_id
from migagent.sim.state import SimNodeState
from migagent_sim.gpu_node.files import GpuFacts


def gpu_facts(state: SimNodeState) -> list[GpuFacts]:
    facts = []
    for index, gpu in enumerate(state.gpus):
        model = model_by_key(gpu.model_key)
        domain, bus, device = parse_bus_id(gpu.pci_bus_id) or (0, 0, 0)
        pci_id = model.primary_pci_device_id  # 0xDDDDVVVV, as NVML's pciDeviceId
        facts.append(
            GpuFacts(
                index=index,
                name=model.name,
                uuid=gpu.uuid,
                address=f"{domain:04x}:{bus:02x}:{device:02x}.0",
                device_id=pci_id >> 16,
                subsystem=simulated_subsystem_id(pci_id),
            )
        )
    return facts
