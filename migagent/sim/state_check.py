"""Checks of a loaded simulator state file against the catalog and the command line.

A state file is the user's input (it may be hand-edited): a GPU instance whose profile id its
model does not offer would load, act oddly and be hidden by `export` (which names only known
profiles), so it is refused at load. A `--simulate` spec that differs from the saved node would
otherwise be ignored without a word.
"""

from __future__ import annotations

from itertools import groupby

from migagent.catalog import model_by_key
from migagent.catalog.model import GpuModel
from migagent.layout.profile import ci_profile_name, gi_profile_name
from migagent.sim.state import SimGpu, SimNodeState, StateFormatError


def _offered_gi(model: GpuModel) -> str:
    table = model.profiles
    return ", ".join(f"{gi.id} ({gi_profile_name(gi, table)})" for gi in table.gi_profiles)


def _check_gpu(index: int, gpu: SimGpu) -> None:
    model = model_by_key(gpu.model_key)
    table = model.profiles
    for j, gi in enumerate(gpu.gpu_instances):
        where = f"gpus[{index}].gpu_instances[{j}]"
        gi_profile = table.gi_profile(gi.profile_id)
        if gi_profile is None:
            raise StateFormatError(
                f"{where}: GPU instance profile id {gi.profile_id} is not offered by {model.key};"
                f" valid ids: {_offered_gi(model)}"
            )
        offered = {ci.id: ci for ci in gi_profile.ci_profiles}
        for k, ci in enumerate(gi.compute_instances):
            if ci.profile_id not in offered:
                valid = ", ".join(f"{c.id} ({ci_profile_name(gi_profile, c, table)})" for c in offered.values())
                raise StateFormatError(
                    f"{where}.compute_instances[{k}]: compute instance profile id {ci.profile_id} is not offered"
                    f" inside {gi_profile_name(gi_profile, table)} on {model.key}; valid ids: {valid}"
                )


def check_profiles(state: SimNodeState) -> None:
    """Raise StateFormatError naming the first GPU/compute instance whose profile id its model lacks."""
    for index, gpu in enumerate(state.gpus):
        _check_gpu(index, gpu)


def spec_of(state: SimNodeState) -> str:
    """The node spec that would create this node's GPUs, e.g. `2xA100-40GB,1xH100-80GB-SXM`."""
    runs = groupby(gpu.model_key for gpu in state.gpus)
    return ",".join(f"{len(list(group))}x{key}" for key, group in runs)


def check_spec_matches(state: SimNodeState, models: tuple[GpuModel, ...], *, spec: str, state_file: str) -> None:
    """Refuse a --simulate spec whose GPUs differ from those saved in the state file."""
    if [gpu.model_key for gpu in state.gpus] != [model.key for model in models]:
        raise StateFormatError(
            f"--simulate {spec} does not match the node saved in {state_file} ({spec_of(state)});"
            f" drop --simulate to use the saved node, or delete {state_file} to create a new one"
        )
