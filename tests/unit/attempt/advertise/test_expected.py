from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from migagent.attempt.advertise.expectation import advertisement_matches
from migagent.attempt.advertise.expected import NotAdvertisableError, describe_diff, expected_resources
from migagent.errors import InvalidLayoutError
from migagent.layout.observed import Observation
from migagent.layout.profile import MigProfile
from migagent.layout.strategy import GpuDevices, MigStrategy, mig_resource_name, strategy_problems
from migagent_sim.doubles.builders import mig_gpu


def test_each_whole_gi_compute_instance_is_one_unit_of_its_mixed_strategy_resource() -> None:
    observation = Observation(
        gpus=(
            mig_gpu(0, [("3g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)]),
            mig_gpu(1, [("1g.5gb", i) for i in range(7)]),
        )
    )
    assert expected_resources(observation) == {
        "nvidia.com/mig-1g.5gb": 8,
        "nvidia.com/mig-2g.10gb": 1,
        "nvidia.com/mig-3g.20gb": 1,
    }


def test_a_media_extension_profile_is_advertised_as_its_plain_profile_as_nvidia_plugin_v0_18_2_does() -> None:
    """Found against NVIDIA's plugin: its resource pattern `1g.5gb` comes first and matches `1g.5gb+me`."""
    observation = Observation(gpus=(mig_gpu(0, [("1g.5gb+me", 0), ("1g.5gb", 1)]),))
    assert expected_resources(observation) == {"nvidia.com/mig-1g.5gb": 2}
    assert mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"  # its own name, which GFD labels


def test_gpus_with_mig_disabled_advertise_no_mig_resources_and_whole_gpus_only_on_request() -> None:
    observation = Observation(gpus=(mig_gpu(0, [], mig=False), mig_gpu(1, [("7g.40gb", 0)])))
    assert expected_resources(observation) == {"nvidia.com/mig-7g.40gb": 1}
    assert expected_resources(observation, include_full_gpus=True) == {
        "nvidia.com/gpu": 1,
        "nvidia.com/mig-7g.40gb": 1,
    }


def test_a_gpu_instance_without_compute_instances_is_not_a_mig_device() -> None:
    observation = Observation(gpus=(mig_gpu(0, [("3g.20gb", 0, []), ("3g.20gb", 4)]),))
    assert expected_resources(observation) == {"nvidia.com/mig-3g.20gb": 1}


def test_compute_instances_smaller_than_their_gi_count_as_the_gi_as_nvidia_plugin_v0_18_2_advertises_them() -> None:
    """Found against NVIDIA's plugin: the pattern `3g.20gb` matches `1c.3g.20gb` (it does not exit)."""
    observation = Observation(gpus=(mig_gpu(0, [("3g.20gb", 0, ["1c.3g.20gb", "1c.3g.20gb", "1c.3g.20gb"])]),))
    assert expected_resources(observation) == {"nvidia.com/mig-3g.20gb": 3}


def test_a_device_no_pattern_matches_is_refused_because_the_plugin_exits_on_it() -> None:
    gpu = GpuDevices(0, True, (MigProfile.parse("1c.3g.20gb"),), patterns=("1g.5gb",))
    assert strategy_problems(MigStrategy.MIXED, [gpu]) == [
        "GPU 0 has MIG devices of profile 1c.3g.20gb, which matches none of the device plugin's resource patterns."
        " Use 3g.20gb (one compute instance per GPU instance) instead"
    ]
    assert issubclass(NotAdvertisableError, InvalidLayoutError)


def test_advertisement_matches_treats_missing_and_zero_the_same() -> None:
    ok, diff = advertisement_matches(
        {"nvidia.com/mig-1g.5gb": 7, "nvidia.com/mig-7g.40gb": 0}, {"nvidia.com/mig-1g.5gb": 7}
    )
    assert ok
    assert diff == {}
    ok, _ = advertisement_matches(
        {"nvidia.com/mig-1g.5gb": 7}, {"nvidia.com/mig-1g.5gb": 7, "nvidia.com/mig-3g.20gb": 0}
    )
    assert ok


def test_advertisement_does_not_match_while_a_stale_mig_resource_is_still_advertised() -> None:
    ok, diff = advertisement_matches(
        {"nvidia.com/mig-1g.5gb": 7, "nvidia.com/mig-7g.40gb": 1, "cpu": 16}, {"nvidia.com/mig-1g.5gb": 7}
    )
    assert not ok
    assert diff == {"nvidia.com/mig-7g.40gb": (1, 0)}
    assert describe_diff(diff) == "nvidia.com/mig-7g.40gb: advertised 1, expected 0"


def test_advertisement_does_not_match_while_an_expected_resource_is_missing() -> None:
    ok, diff = advertisement_matches({"cpu": 16}, {"nvidia.com/mig-3g.20gb": 2})
    assert not ok
    assert diff == {"nvidia.com/mig-3g.20gb": (0, 2)}


_counts = st.dictionaries(
    st.sampled_from(["nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-7g.40gb", "cpu"]),
    st.integers(min_value=0, max_value=7),
)


@settings(deadline=None)  # no wall-clock limit: a loaded machine took 251 ms for a 0.04 ms example
@given(allocatable=_counts, expected=_counts)
def test_advertisement_matches_exactly_when_the_diff_is_empty(
    allocatable: dict[str, int], expected: dict[str, int]
) -> None:
    ok, diff = advertisement_matches(allocatable, expected)
    assert ok == (not diff)
    for name, (have, want) in diff.items():
        assert have != want
        assert allocatable.get(name, 0) == have
        assert expected.get(name, 0) == want
