"""FakeNvml: a stateful simulated GPU node with pynvml's own function surface.

`GpuDriver(lib)` takes the `pynvml` module in production and a FakeNvml in tests and in the
simulator. Every public `nvml*` method has pynvml's name, signature and return shape, takes and
returns pynvml's ctypes handles and structures, fills caller-allocated ctypes arrays, and raises
pynvml's own `NVMLError_*` classes. The MIG rules (slices, placements, capacity, media engines,
GI IDs, mode activation, IN_USE, stale handles) follow docs/nvml.md; where the evidence
there is thin, the behaviour is configurable and documented where it is implemented.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from migagent.catalog import GpuModel
from migagent.sim.controls import SimControls
from migagent.sim.fake_nvml_compute import ComputeInstanceApi
from migagent.sim.fake_nvml_device import DeviceApi
from migagent.sim.fake_nvml_info import InfoApi
from migagent.sim.fake_nvml_instances import GpuInstanceApi
from migagent.sim.fake_nvml_mode import ModeApi
from migagent.sim.spec import parse_node_spec
from migagent.sim.state import SimNodeState


class FakeNvml(DeviceApi, InfoApi, ModeApi, GpuInstanceApi, ComputeInstanceApi, SimControls):
    """`FakeNvml(state)`; `models` adds GPU models beyond the catalog (keyed by `model.key`)."""

    def __init__(self, state: SimNodeState, *, models: Mapping[str, GpuModel] | None = None) -> None:
        super().__init__(state, models=models)

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        gi_id_map: str = "standard",
        profiles_queryable_when_disabled: bool = False,
        mig_enabled: bool = False,
    ) -> FakeNvml:
        """A fresh node, e.g. `FakeNvml.from_spec("8xH100-80GB-SXM")` (see sim.spec)."""
        return cls.from_models(
            parse_node_spec(spec),
            gi_id_map=gi_id_map,
            profiles_queryable_when_disabled=profiles_queryable_when_disabled,
            mig_enabled=mig_enabled,
        )

    @classmethod
    def from_models(
        cls,
        models: Sequence[GpuModel],
        *,
        gi_id_map: str = "standard",
        profiles_queryable_when_disabled: bool = False,
        mig_enabled: bool = False,
        auto_placement: str = "inferred",
    ) -> FakeNvml:
        """A fresh node of the given models, which may be hand-built (not in the catalog)."""
        state = SimNodeState.create(
            models,
            gi_id_map=gi_id_map,
            profiles_queryable_when_disabled=profiles_queryable_when_disabled,
            mig_enabled=mig_enabled,
            auto_placement=auto_placement,
        )
        return cls(state, models={model.key: model for model in models})

    def save(self, path: str | Path) -> None:
        """Write the node's state as JSON, atomically (handles, faults and logs are not state)."""
        self.state.save(Path(path))

    @classmethod
    def load(cls, path: str | Path) -> FakeNvml:
        """The node saved at `path`; its models must be in the catalog."""
        return cls(SimNodeState.load(Path(path)))
