"""A file shaped like mig-parted's default config (81 names, docs/mig-parted.md §3) loads and resolves."""

from __future__ import annotations

import pytest

from migagent.catalog import GpuModel, all_models
from migagent.layout.generate import config_name_for
from migagent.layout.parse import load_layout_file
from migagent.layout.profile import gi_profile_name
from migagent.layout.resolve import GpuIdentity, resolve_entries
from migagent.layout.spec import LayoutFile
from tests.unit.layout.support import DATA

DEFAULT_NAMES = DATA / "mig-parted-default-names.yaml"


@pytest.fixture(scope="module")
def default_file() -> LayoutFile:
    return load_layout_file(DEFAULT_NAMES)


def identity(model: GpuModel) -> GpuIdentity:
    return GpuIdentity(index=0, pci_device_id=model.primary_pci_device_id, subsystem_id=None,
                       profiles=model.profiles, label=f"GPU 0 ({model.key})")


def slices_of(model: GpuModel, gi_profile_id: int) -> int:
    gi = model.profiles.gi_profile(gi_profile_id)
    assert gi is not None
    return gi.slices


def test_the_file_holds_mig_parteds_81_config_names(default_file: LayoutFile) -> None:
    assert len(default_file.names) == 81
    assert default_file.names[:2] == ("all-disabled", "all-enabled")
    assert "all-1g.24gb-me" in default_file.names
    assert "all-2g.48gb.me.all" in default_file.names


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_each_all_profile_config_gives_every_model_its_profile_at_the_maximum(
    default_file: LayoutFile, model: GpuModel
) -> None:
    for gi in model.profiles.gi_profiles:
        name = config_name_for(str(gi_profile_name(gi, model.profiles)))
        (target,) = resolve_entries(default_file.configs[name], [identity(model)], config_name=name).gpus
        assert [g.profile_id for g in target.gpu_instances] == [gi.id] * gi.max_instances, name


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_all_balanced_selects_exactly_one_entry_for_every_catalog_model(
    default_file: LayoutFile, model: GpuModel
) -> None:
    entries = default_file.configs["all-balanced"]
    selecting = [e for e in entries if e.selects(gpu_index=0, pci_device_id=model.primary_pci_device_id,
                                                 subsystem_id=None)]
    assert len(selecting) == 1
    (target,) = resolve_entries(entries, [identity(model)], config_name="all-balanced").gpus
    slices = sorted(slices_of(model, g.profile_id) for g in target.gpu_instances)
    assert slices == ([1, 1, 2, 3] if model.profiles.compute_slices == 7 else [1, 1, 2])
