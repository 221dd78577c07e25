"""The device plugin's MIG strategies as pure rules (docs/device-plugin.md §1)."""

from __future__ import annotations

from migagent.layout.profile import MigProfile
from migagent.layout.strategy import GpuDevices, MigStrategy, advertised_counts, strategy_problems


def _gpu(index: int, *profiles: str, mig: bool = True) -> GpuDevices:
    return GpuDevices(index, mig, tuple(MigProfile.parse(p) for p in profiles))


BALANCED = [_gpu(0, "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"), _gpu(1, "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")]
UNIFORM = [_gpu(0, "3g.40gb", "3g.40gb"), _gpu(1, "3g.40gb", "3g.40gb")]


def test_mixed_counts_each_mig_device_under_its_own_profile_resource() -> None:
    assert advertised_counts(MigStrategy.MIXED, BALANCED) == {
        "nvidia.com/mig-1g.10gb": 4,
        "nvidia.com/mig-2g.20gb": 2,
        "nvidia.com/mig-3g.40gb": 2,
    }


def test_single_counts_every_mig_device_as_one_nvidia_com_gpu() -> None:
    assert strategy_problems(MigStrategy.SINGLE, UNIFORM) == []
    assert advertised_counts(MigStrategy.SINGLE, UNIFORM) == {"nvidia.com/gpu": 4}


def test_none_counts_whole_gpus_even_with_mig_enabled() -> None:
    assert strategy_problems(MigStrategy.NONE, BALANCED) == []
    assert advertised_counts(MigStrategy.NONE, BALANCED) == {"nvidia.com/gpu": 2}


def test_single_refuses_a_node_with_more_than_one_mig_device_type_naming_the_gpus() -> None:
    problems = strategy_problems(MigStrategy.SINGLE, [_gpu(0, "3g.40gb", "3g.40gb"), _gpu(1, "7g.80gb")])
    assert len(problems) == 1
    assert "more than one MIG device type" in problems[0]
    assert "2x 3g.40gb on GPU 0" in problems[0]
    assert "1x 7g.80gb on GPU 1" in problems[0]
    assert "all-<profile>" in problems[0]


def test_single_refuses_mig_and_non_mig_gpus_on_one_node_and_an_empty_mig_gpu() -> None:
    problems = strategy_problems(MigStrategy.SINGLE, [_gpu(0, "7g.80gb"), _gpu(1, mig=False), _gpu(2)])
    assert any("same MIG mode" in p and "MIG off: GPU 1" in p for p in problems)
    assert "GPU 2 has MIG enabled but no MIG devices" in problems


def test_single_accepts_compute_instances_smaller_than_their_gi_when_uniform() -> None:
    # The single strategy's one pattern matches every MIG device; only mixed exits on C < G.
    gpus = [_gpu(0, "1c.3g.40gb", "1c.3g.40gb", "1c.3g.40gb")]
    assert strategy_problems(MigStrategy.SINGLE, gpus) == []
    assert advertised_counts(MigStrategy.SINGLE, gpus) == {"nvidia.com/gpu": 3}
    assert "Use 3g.40gb" in strategy_problems(MigStrategy.MIXED, gpus)[0]


def test_without_mig_every_strategy_advertises_whole_gpus() -> None:
    gpus = [_gpu(0, mig=False), _gpu(1, mig=False)]
    for strategy in MigStrategy:
        assert strategy_problems(strategy, gpus) == []
        assert advertised_counts(strategy, gpus) == {"nvidia.com/gpu": 2}


def test_refusals_name_a_nodes_gpus_as_ranges_not_one_by_one() -> None:
    eight = [_gpu(i, "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb") for i in range(8)]
    (single,) = strategy_problems(MigStrategy.SINGLE, eight)
    assert "16x 1g.10gb on GPUs 0-7; 8x 2g.20gb on GPUs 0-7; 8x 3g.40gb on GPUs 0-7" in single
    assert "GPU 1," not in single
    split = [_gpu(i, "7g.80gb") for i in range(4)] + [_gpu(i, mig=False) for i in (4, 5, 7)] + [_gpu(6)]
    problems = strategy_problems(MigStrategy.SINGLE, split)
    assert "(MIG on: GPUs 0-3, 6; MIG off: GPUs 4-5, 7)" in problems[0]
    assert "GPU 6 has MIG enabled but no MIG devices" in problems
    small = [_gpu(i, "1c.3g.40gb", "3g.40gb") for i in range(8)]
    (mixed,) = strategy_problems(MigStrategy.MIXED, small)
    assert mixed.startswith(
        "GPUs 0-7 have MIG devices of profile 1c.3g.40gb, which matches none of the device plugin's resource patterns."
    )
