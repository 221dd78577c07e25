"""Automatic placement (docs/nvml.md §6, inferred) and GI IDs from placement (docs/nvml.md §7)."""

from __future__ import annotations

from functools import partial

import pynvml
import pytest

from migagent.catalog import model_by_key
from migagent.sim import FakeNvml
from migagent.sim.state import StateFormatError
from tests.unit.sim.helpers import all_gi_ids, create_gi, gi_placement, gi_profile, nvml_code, started

SHORT_NAMES = {
    "1g": "1g.5gb", "1g+me": "1g.5gb+me", "1g2": "1g.10gb", "2g": "2g.10gb", "3g": "3g.20gb", "4g": "4g.20gb",
}
NONE = None
# The nine A100/Hopper sequences of docs/nvml.md §6; a 1-slice result is its start.
OBSERVED_ROWS = [
    (("1g",) * 7, [6, 4, 5, 0, 1, 2, 3]),
    (("3g", "3g"), [(4, 4), (0, 4)]),
    (("3g", "1g", "2g", "1g"), [(4, 4), 0, (2, 2), 1]),
    (("1g", "2g", "4g"), [6, (4, 2), (0, 4)]),
    (("4g", "2g", "1g"), [(0, 4), (4, 2), 6]),
    (("2g", "1g", "1g", "1g", "1g", "1g"), [(4, 2), 6, 0, 1, 2, 3]),
    (("1g", "1g", "2g", "3g"), [6, 4, (0, 2), NONE]),
    (("2g", "2g", "2g", "1g+me"), [(4, 2), (0, 2), (2, 2), 6]),
    (("3g", "2g", "1g"), [(4, 4), (0, 2), 2]),
]


def run_sequence(fake: FakeNvml, sequence: tuple[str, ...]) -> list[object]:
    device = fake.nvmlDeviceGetHandleByIndex(0)
    results: list[object] = []
    for short in sequence:
        profile = gi_profile("A100-40GB", SHORT_NAMES[short])
        if fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, profile.id) == 0:
            assert nvml_code(partial(fake.nvmlDeviceCreateGpuInstance, device, profile.id)) == (
                pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
            )
            results.append(None)
            continue
        start, size = gi_placement(fake, fake.nvmlDeviceCreateGpuInstance(device, profile.id))
        results.append(start if size == 1 else (start, size))
    return results


@pytest.mark.parametrize(("sequence", "expected"), OBSERVED_ROWS)
def test_auto_placement_follows_inferred_rule_uncertain(sequence: tuple[str, ...], expected: list[object]) -> None:
    assert run_sequence(started("A100-40GB"), sequence) == expected


@pytest.mark.parametrize(("sequence", "expected"), OBSERVED_ROWS[:3])
def test_auto_placement_follows_inferred_rule_on_hopper_too_uncertain(
    sequence: tuple[str, ...], expected: list[object]
) -> None:
    """H100's placement table is the A100's; the same profile IDs work there."""
    assert run_sequence(started("H100-80GB-SXM"), sequence) == expected


def test_the_lowest_start_rule_is_available_as_an_alternative() -> None:
    fake = FakeNvml.from_models([model_by_key("A100-40GB")], mig_enabled=True, auto_placement="lowest-start")
    fake.nvmlInit()
    assert run_sequence(fake, ("1g", "1g", "3g")) == [0, 1, (4, 4)]


def test_an_unknown_auto_placement_rule_is_refused() -> None:
    with pytest.raises(StateFormatError, match="inferred, lowest-start"):
        FakeNvml.from_models([model_by_key("A30-24GB")], auto_placement="best")


@pytest.mark.parametrize(
    ("name", "start", "size", "gi_id"),
    [("7g.40gb", 0, 8, 0), ("4g.20gb", 0, 4, 1), ("3g.20gb", 4, 4, 2), ("2g.10gb", 2, 2, 4),
     ("2g.10gb", 4, 2, 5), ("1g.5gb", 6, 1, 13), ("1g.5gb", 0, 1, 7), ("1g.10gb", 6, 2, 6)],
)
def test_gi_ids_follow_the_standard_swizzle_map(name: str, start: int, size: int, gi_id: int) -> None:
    fake = started("A100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = create_gi(fake, device, gi_profile("A100-40GB", name).id, start, size)
    assert fake.nvmlGpuInstanceGetInfo(gi).id == gi_id


@pytest.mark.parametrize(
    ("name", "start", "size", "gi_id"),
    [("7g.40gb", 0, 8, 0), ("3g.20gb", 4, 4, 1), ("3g.20gb", 0, 4, 2), ("1g.5gb", 0, 1, 11), ("2g.10gb", 2, 2, 6)],
)
def test_gi_ids_follow_the_xor4_map_of_boards_with_swapped_halves(name: str, start: int, size: int, gi_id: int) -> None:
    fake = started("A100-40GB", gi_id_map="xor4")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = create_gi(fake, device, gi_profile("A100-40GB", name).id, start, size)
    assert fake.nvmlGpuInstanceGetInfo(gi).id == gi_id


@pytest.mark.parametrize(
    ("id_map", "ids"), [("standard", [7, 8, 9, 10, 11, 12, 13]), ("xor4", [7, 8, 9, 11, 12, 13, 14])]
)
def test_seven_1g_instances_use_the_id_set_of_their_map(id_map: str, ids: list[int]) -> None:
    fake = started("A100-40GB", gi_id_map=id_map)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    for _ in range(7):
        fake.nvmlDeviceCreateGpuInstance(device, gi_profile("A100-40GB", "1g.5gb").id)
    assert all_gi_ids(fake, device, "A100-40GB") == ids


def test_gi_ids_on_a_four_slice_gpu_use_the_same_tree_inferred() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, gi_profile("A30-24GB", "2g.12gb").id, 2, 2)
    create_gi(fake, device, gi_profile("A30-24GB", "1g.6gb").id, 1, 1)
    assert all_gi_ids(fake, device, "A30-24GB") == [2, 4]


def test_recreating_an_instance_at_the_same_placement_reuses_its_id() -> None:
    fake = started("A100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    profile = gi_profile("A100-40GB", "2g.10gb").id
    gi = create_gi(fake, device, profile, 2, 2)
    first = fake.nvmlGpuInstanceGetInfo(gi).id
    fake.nvmlGpuInstanceDestroy(gi)
    assert fake.nvmlGpuInstanceGetInfo(create_gi(fake, device, profile, 2, 2)).id == first


def test_an_unknown_gi_id_map_is_refused_with_the_valid_choices() -> None:
    with pytest.raises(StateFormatError, match="standard, xor4"):
        FakeNvml.from_spec("A30-24GB", gi_id_map="xor8")
