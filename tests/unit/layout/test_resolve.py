"""Applying a config to a node's GPUs: per-GPU profile resolution, selection rules, CI packing."""

from __future__ import annotations

import pytest

from migagent.catalog import GpuModel, all_models, model_by_key
from migagent.errors import LayoutDoesNotFitError, LayoutSelectsNoGpuError
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.observed import ObservedGpu
from migagent.layout.parse import load_layout_file, parse_layout
from migagent.layout.profile import MigProfile, ci_profile_name
from migagent.layout.resolve import identity_of, resolve_config, resolve_entries, resolve_entry
from migagent.layout.spec import ALL_DEVICES, LayoutEntry, LayoutFile, PciFilter
from migagent.planning.offline import empty_observation
from migagent.planning.planner import plan
from migagent.planning.validation import ConfigStatus, validate_layout
from tests.unit.layout.support import MIG_PARTED_STYLE, gpu

# Catalog GI / CI profile ids used below (A100 family; see migagent/catalog/models.yaml).
GI_1G, GI_2G, GI_3G, GI_4G, GI_7G = 19, 14, 9, 5, 0


def entry(mig_devices: dict[str, int], *, index: int = 0, devices: tuple[int, ...] | None = None,
          device_filter: tuple[PciFilter, ...] = ()) -> LayoutEntry:
    """An enabled entry; `devices=None` means all GPUs."""
    return LayoutEntry(
        index=index,
        devices=ALL_DEVICES if devices is None else devices,
        device_filter=device_filter,
        mig_enabled=True,
        mig_devices=tuple((MigProfile.parse(name), count) for name, count in mig_devices.items()),
    )


def on(model_key: str, mig_devices: dict[str, int]) -> tuple[DesiredGi, ...]:
    desired = resolve_entry(entry(mig_devices), gpu(0, model_key), config_name="c")
    return desired.gpu_instances


@pytest.fixture(scope="module")
def fixture_file() -> LayoutFile:
    return load_layout_file(MIG_PARTED_STYLE)


def test_each_gpu_of_a_mixed_node_gets_its_own_models_profiles(fixture_file: LayoutFile) -> None:
    node = [gpu(0, "A100-40GB"), gpu(1, "A30-24GB"), gpu(2, "A100-80GB"), gpu(3, "A30-24GB")]
    desired = resolve_config(fixture_file, "all-balanced", node)
    assert [g.index for g in desired.gpus] == [0, 1, 2, 3]
    # A100-40GB: 3g.20gb (9), 2g.10gb (14), two 1g.5gb (19); A30: 2g.12gb (5), two 1g.6gb (14).
    assert desired.gpus[0].gpu_instances == (DesiredGi(9, (2,)), DesiredGi(14, (1,)), DesiredGi(19, (0,)),
                                             DesiredGi(19, (0,)))
    assert desired.gpus[1].gpu_instances == (DesiredGi(5, (1,)), DesiredGi(14, (0,)), DesiredGi(14, (0,)))
    assert desired.gpus[2].gpu_instances == desired.gpus[0].gpu_instances
    assert desired.gpus[3] == DesiredGpu(index=3, mig_enabled=True, gpu_instances=desired.gpus[1].gpu_instances,
                                         config_name="all-balanced")


def test_a_count_that_differs_by_model_follows_the_filtered_entries(fixture_file: LayoutFile) -> None:
    desired = resolve_config(fixture_file, "all-1g.10gb", [gpu(0, "A100-40GB"), gpu(1, "H100-80GB-SXM")])
    forty, eighty = desired.gpus
    assert [gi.profile_id for gi in forty.gpu_instances] == [15] * 4
    assert [gi.profile_id for gi in eighty.gpu_instances] == [GI_1G] * 7


def test_a_profile_the_gpu_lacks_names_gpu_entry_profile_and_what_it_offers() -> None:
    layout = parse_layout(
        "version: v1\nmig-configs:\n  all-3g.20gb:\n"
        '    - {devices: all, mig-enabled: true, mig-devices: {"3g.20gb": 2}}\n',
        source="layouts.yaml",
    )
    with pytest.raises(LayoutDoesNotFitError) as info:
        resolve_config(layout, "all-3g.20gb", [gpu(0, "A100-40GB"), gpu(1, "A30-24GB")])
    assert str(info.value) == (
        "GPU 1 (A30-24GB): profile '3g.20gb' in mig-configs.all-3g.20gb[0] is not offered; "
        "this GPU offers 1g.6gb, 1g.6gb+me, 2g.12gb, 2g.12gb+me, 4g.24gb"
    )


def test_a_compute_profile_the_gi_lacks_lists_the_gis_compute_profiles() -> None:
    with pytest.raises(LayoutDoesNotFitError) as info:
        on("A100-40GB", {"3c.4g.20gb": 1})
    assert "profile '3c.4g.20gb' in mig-configs.c[0] is not offered" in str(info.value)
    assert "its GPU instance 4g.20gb offers compute profiles 1c.4g.20gb, 2c.4g.20gb, 4g.20gb" in str(info.value)


def test_problems_on_several_gpus_are_reported_together() -> None:
    bad = entry({"1g.5gb": 1, "1g.6gb": 1})
    with pytest.raises(LayoutDoesNotFitError) as info:
        resolve_entries([bad], [gpu(0, "A100-40GB"), gpu(1, "A30-24GB")], config_name="c")
    assert [line.split(":")[0] for line in str(info.value).splitlines()] == ["GPU 0 (A100-40GB)", "GPU 1 (A30-24GB)"]


def test_a_filter_with_a_subsystem_qualifier_selects_only_that_board() -> None:
    qualified = entry({"7g.40gb": 1}, device_filter=(PciFilter(0x20B010DE, 0x134F10DE),))
    node = [
        gpu(0, "A100-40GB", subsystem=0x134F10DE),
        gpu(1, "A100-40GB", subsystem=0x145F10DE),
        gpu(2, "A100-40GB", subsystem=None),
    ]
    desired = resolve_entries([qualified], node, config_name="c")
    assert [g.index for g in desired.gpus] == [0]


def test_a_later_entry_wins_for_the_gpus_it_selects() -> None:
    everyone = entry({"1g.5gb": 7}, index=0)
    gpu_one = entry({"7g.40gb": 1}, index=1, devices=(1,))
    desired = resolve_entries([everyone, gpu_one], [gpu(0, "A100-40GB"), gpu(1, "A100-40GB")], config_name="c")
    assert len(desired.gpus[0].gpu_instances) == 7
    assert desired.gpus[1].gpu_instances == (DesiredGi(GI_7G, (4,)),)


def test_an_overridden_entry_is_not_resolved_on_that_gpu() -> None:
    # Entry 0 would not fit an A30, but entry 1 replaces it there.
    everyone = entry({"1g.5gb": 7}, index=0)
    a30 = entry({"4g.24gb": 1}, index=1, device_filter=(PciFilter(0x20B710DE),))
    desired = resolve_entries([everyone, a30], [gpu(0, "A30-24GB")], config_name="c")
    assert desired.gpus[0].gpu_instances == (DesiredGi(0, (3,)),)


def test_gpus_no_entry_selects_are_absent_and_left_untouched(fixture_file: LayoutFile) -> None:
    node = [gpu(i, "A100-40GB") for i in range(6)]
    desired = resolve_config(fixture_file, "custom-config", node)
    assert [g.index for g in desired.gpus] == [0, 1, 2, 3]
    assert desired.gpu(4) is None
    assert desired.gpu(0) == DesiredGpu(index=0, mig_enabled=False, config_name="custom-config")


def test_custom_config_splits_one_3g_into_three_compute_instances(fixture_file: LayoutFile) -> None:
    desired = resolve_config(fixture_file, "custom-config", [gpu(i, "A100-40GB") for i in range(4)])
    third = desired.gpu(3)
    assert third is not None
    assert third.gpu_instances == (DesiredGi(GI_3G, (2,)), DesiredGi(GI_3G, (0, 0, 0)))


def test_an_index_the_node_lacks_is_refused_naming_each_and_the_nodes_gpus(fixture_file: LayoutFile) -> None:
    with pytest.raises(LayoutSelectsNoGpuError) as refused:
        resolve_config(fixture_file, "custom-config", [gpu(2, "A100-40GB"), gpu(3, "A100-40GB")])
    assert str(refused.value).endswith(
        "mig-configs.custom-config[0] lists GPU 0, which this node does not have (it has GPUs 2-3);"
        " mig-configs.custom-config[0] lists GPU 1, which this node does not have (it has GPUs 2-3)"
    )


def test_mig_enabled_with_no_devices_keeps_mig_on_with_no_instances(fixture_file: LayoutFile) -> None:
    desired = resolve_config(fixture_file, "all-enabled", [gpu(0, "H200-141GB")])
    assert desired.gpus == (DesiredGpu(index=0, mig_enabled=True, config_name="all-enabled"),)


def test_three_1c_of_a_3g_pack_into_one_gpu_instance() -> None:
    assert on("A100-80GB", {"1c.3g.40gb": 3}) == (DesiredGi(GI_3G, (0, 0, 0)),)


def test_a_fourth_1c_of_a_3g_starts_a_second_gpu_instance() -> None:
    assert on("A100-80GB", {"1c.3g.40gb": 4}) == (DesiredGi(GI_3G, (0, 0, 0)), DesiredGi(GI_3G, (0,)))


def test_different_compute_sizes_share_a_gi_when_their_placements_fit() -> None:
    assert on("A100-80GB", {"1c.3g.40gb": 1, "2c.3g.40gb": 1}) == (DesiredGi(GI_3G, (0, 1)),)
    # 3c at 0:3 and 4:3 leave compute slice 3 for the 1c.
    assert on("A100-80GB", {"3c.7g.80gb": 2, "1c.7g.80gb": 1}) == (DesiredGi(GI_7G, (0, 2, 2)),)
    assert on("A100-80GB", {"4c.7g.80gb": 1, "3c.7g.80gb": 1}) == (DesiredGi(GI_7G, (2, 3)),)


def test_a_full_gi_profile_never_shares_its_gi_with_a_compute_profile() -> None:
    assert on("A100-80GB", {"1c.3g.40gb": 1, "3g.40gb": 1}) == (DesiredGi(GI_3G, (2,)), DesiredGi(GI_3G, (0,)))


def test_a_compute_profile_past_its_per_gi_limit_starts_another_gi() -> None:
    assert on("A100-80GB", {"2c.3g.40gb": 2}) == (DesiredGi(GI_3G, (1,)), DesiredGi(GI_3G, (1,)))


def test_the_double_memory_1g_on_hopper_uses_its_default_compute_profile() -> None:
    assert on("H100-80GB-SXM", {"1g.20gb": 1}) == (DesiredGi(15, (7,)),)


def test_a_gi_count_past_the_profiles_limit_resolves_and_is_left_to_the_planner_to_refuse() -> None:
    gis = on("A100-80GB", {"3g.40gb": 3})
    assert gis == (DesiredGi(GI_3G, (2,)),) * 3
    observation = empty_observation([model_by_key("A100-80GB")])
    with pytest.raises(LayoutDoesNotFitError) as info:
        plan(observation, DesiredNode(gpus=(DesiredGpu(index=0, mig_enabled=True, gpu_instances=gis),)))
    message = str(info.value)
    assert message.startswith("GPU 0 (NVIDIA A100-SXM4-80GB)")
    assert "3g.40gb" in message
    assert "closest" in message


def test_more_compute_instances_than_compute_slices_are_refused_without_expanding_the_count() -> None:
    with pytest.raises(LayoutDoesNotFitError) as info:
        on("A100-40GB", {"1g.5gb": 8})
    assert str(info.value) == (
        "GPU 0 (A100-40GB): mig-configs.c[0].mig-devices asks for 8 compute instances; "
        "this GPU has 7 compute slices, so at most 7 fit"
    )
    with pytest.raises(LayoutDoesNotFitError, match=f"asks for {10**5} compute instances"):
        on("H100-80GB-SXM", {"1g.10gb": 10**5})
    with pytest.raises(LayoutDoesNotFitError, match="asks for 5 compute instances"):
        on("A30-24GB", {"1g.6gb": 4, "1c.4g.24gb": 1})


def test_zero_counts_request_nothing() -> None:
    assert on("A30-24GB", {"1g.6gb": 0, "4g.24gb": 1}) == (DesiredGi(0, (3,)),)


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_every_compute_profile_packs_its_limit_into_one_gi_and_one_more_into_a_second(model: GpuModel) -> None:
    table = model.profiles
    identity = gpu(0, model.key)
    for gi in table.gi_profiles:
        for ci in gi.ci_profiles:
            if ci.is_default or ci.slices == gi.slices:
                continue
            name = str(ci_profile_name(gi, ci, table))
            packed = resolve_entry(entry({name: ci.max_instances}), identity, config_name="c").gpu_instances
            assert packed == (DesiredGi(gi.id, (ci.id,) * ci.max_instances),), name
            if gi.max_instances > 1:
                more = resolve_entry(entry({name: ci.max_instances + 1}), identity, config_name="c")
                assert len(more.gpu_instances) == 2, name


def test_validation_checks_a_filtered_config_on_every_model_the_filters_target(fixture_file: LayoutFile) -> None:
    (report,) = validate_layout(fixture_file, config="all-1g.10gb", models=None)
    assert list(report.checked) == ["A100-40GB", "A100-80GB", "H100-80GB-SXM", "H100-80GB-PCIe"]
    assert report.status is ConfigStatus.VALID


def test_a_filter_naming_one_board_of_a_model_is_checked_on_that_model() -> None:
    h800_only = parse_layout(
        'version: v1\nmig-configs:\n  c:\n    - {device-filter: "0x232410DE", devices: all, mig-enabled: true,'
        ' mig-devices: {"7g.80gb": 1}}\n', source="l.yaml",
    )
    assert "H100-80GB-SXM" in validate_layout(h800_only, config="c", models=None)[0].checked
    one_board = entry({"1g.10gb": 7}, device_filter=(PciFilter(0x20B010DE, 0x134F10DE),))
    misfit = parse_layout(
        'version: v1\nmig-configs:\n  c:\n    - {device-filter: "0x20B010DE:0x134F10DE", devices: all,'
        ' mig-enabled: true, mig-devices: {"1g.20gb": 1}}\n', source="l.yaml",
    )
    (report,) = validate_layout(misfit, config="c", models=None)
    assert report.status is ConfigStatus.INVALID
    assert any("A100-40GB" in problem and "1g.20gb" in problem for problem in report.problems), report.problems
    # At run time a GPU whose subsystem is unknown or different is still not selected.
    assert not one_board.selects(gpu_index=0, pci_device_id=0x20B010DE, subsystem_id=None)


def test_validation_accepts_a_config_that_fits_everything_it_targets(fixture_file: LayoutFile) -> None:
    (report,) = validate_layout(fixture_file, config="all-balanced", models=None)
    assert report.status is ConfigStatus.VALID
    assert not report.problems


def test_an_observed_gpu_becomes_an_identity_with_its_own_table() -> None:
    table = model_by_key("A30-24GB").profiles
    observed = ObservedGpu(
        index=2, uuid="GPU-1", name="NVIDIA A30", pci_bus_id="0000:3B:00.0", pci_device_id=0x20B710DE,
        mig_capable=True, mig_current=True, mig_pending=True, profiles=table,
    )
    identity = identity_of(observed)
    assert (identity.index, identity.pci_device_id, identity.label) == (2, 0x20B710DE, "GPU 2 (NVIDIA A30)")
    assert identity.profiles is table


def test_an_observed_gpu_without_mig_offers_no_profiles() -> None:
    observed = ObservedGpu(
        index=0, uuid="GPU-2", name="Tesla T4", pci_bus_id="0000:00:04.0", pci_device_id=0x1EB810DE,
        mig_capable=False, mig_current=False, mig_pending=False,
    )
    with pytest.raises(LayoutDoesNotFitError, match="this GPU offers no MIG profiles"):
        resolve_entry(entry({"1g.5gb": 1}), identity_of(observed), config_name="c")
