"""PCI bus ids as NVML parses them, and the simulated GPU they name."""

from __future__ import annotations

import re

import pynvml

from migagent.sim.handles import nvml_error
from migagent.sim.state import SimNodeState

_BUS_ID = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<device>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<function>[0-9a-fA-F]))?$"
)


def parse_bus_id(text: str | bytes) -> tuple[int, int, int] | None:
    """(domain, bus, device) from the forms NVML accepts: `%x:%x:%x.%x`, `%x:%x:%x`, `%x:%x.%x`."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    match = _BUS_ID.match(text.strip())
    if match is None or (match["domain"] is None and match["function"] is None):
        return None
    return int(match["domain"] or "0", 16), int(match["bus"], 16), int(match["device"], 16)


def index_by_bus_id(state: SimNodeState, bus_id: str | bytes) -> int:
    """The GPU's index; INVALID_ARGUMENT for a malformed id, NOT_FOUND for one not on this node."""
    wanted = parse_bus_id(bus_id)
    if wanted is None:
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    for index, gpu in enumerate(state.gpus):
        if parse_bus_id(gpu.pci_bus_id) == wanted:
            return index
    raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
