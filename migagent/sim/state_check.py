"""Checks of a loaded simulator state file against the catalog and the command line.

A state file is the user's input (it may be hand-edited): a GPU instance whose profile id its
model does not offer would load, act oddly and be hidden by `export` (which names only known
profiles), so it is refused at load, and so is an instance at a placement no GPU could give it. A
`--simulate` spec that differs from the saved node would
otherwise be ignored without a word.
"""

from __future__ import annotations

from itertools import groupby

from migagent.catalog import model_by_key
from migagent.catalog.model import GiProfile, GpuModel, Placement, ProfileTable
from migagent.layout.profile import ci_profile_name, gi_profile_name
from migagent.sim.state import MIG_ENABLE, SimGpu, SimGpuInstance, SimNodeState, StateFormatError


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
    """Raise StateFormatError naming the first GPU/compute instance whose profile id its model lacks,
    or that sits where the hardware could never put it (see `check_placements`)."""
    for index, gpu in enumerate(state.gpus):
        _check_gpu(index, gpu)
        check_placements(index, gpu)


def _text(placement: Placement) -> str:
    return f"{placement.start}:{placement.size}"


def check_placements(index: int, gpu: SimGpu) -> None:
    """Raise StateFormatError (one line) for GPU instances where no GPU could hold them: with MIG off,
    at a placement their profile does not offer, overlapping another, or a repeated id; and likewise
    for compute instances inside their GPU instance. A simulator that loaded such a node would act on
    a machine that cannot exist."""
    model = model_by_key(gpu.model_key)
    table = model.profiles
    if gpu.gpu_instances and gpu.mig_current != MIG_ENABLE:
        raise StateFormatError(f"gpus[{index}]: holds GPU instances but its MIG mode is disabled")
    seen: list[tuple[int, SimGpuInstance]] = []
    for j, gi in enumerate(gpu.gpu_instances):
        where = f"gpus[{index}].gpu_instances[{j}]"
        profile = table.gi_profile(gi.profile_id)
        if profile is None:
            continue  # _check_gpu names it
        name = gi_profile_name(profile, table)
        if gi.placement not in profile.placements:
            legal = ", ".join(_text(p) for p in profile.placements)
            raise StateFormatError(
                f"{where}: placement {_text(gi.placement)} is not a placement of {name} on {model.key};"
                f" valid placements: {legal}"
            )
        for k, other in seen:
            if other.placement.overlaps(gi.placement):
                raise StateFormatError(
                    f"{where}: placement {_text(gi.placement)} overlaps gpu_instances[{k}] at {_text(other.placement)}"
                )
            if other.id == gi.id:
                raise StateFormatError(f"{where}: id {gi.id} is also the id of gpu_instances[{k}]")
        seen.append((j, gi))
        _check_ci_placements(where, gi, profile, table, model.key)


def _check_ci_placements(where: str, gi: SimGpuInstance, profile: GiProfile, table: ProfileTable, model: str) -> None:
    offered = {ci.id: ci for ci in profile.ci_profiles}
    taken: list[tuple[int, Placement]] = []
    for k, ci in enumerate(gi.compute_instances):
        ci_profile = offered.get(ci.profile_id)
        if ci_profile is None:
            continue  # _check_gpu names it
        if ci.placement not in ci_profile.placements:
            legal = ", ".join(_text(p) for p in ci_profile.placements)
            raise StateFormatError(
                f"{where}.compute_instances[{k}]: placement {_text(ci.placement)} is not a placement of"
                f" {ci_profile_name(profile, ci_profile, table)} inside {gi_profile_name(profile, table)} on {model};"
                f" valid placements: {legal}"
            )
        for m, placement in taken:
            if placement.overlaps(ci.placement):
                raise StateFormatError(
                    f"{where}.compute_instances[{k}]: placement {_text(ci.placement)} overlaps"
                    f" compute_instances[{m}] at {_text(placement)}"
                )
        taken.append((k, ci.placement))


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
