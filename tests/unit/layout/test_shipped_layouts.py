"""configs/mig-layouts/mig-layouts.yaml: current with its generator, and usable on every model it targets."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from migagent.catalog import GpuModel, all_models, model_by_key
from migagent.layout.generate import config_name_for, render_layout_file
from migagent.layout.parse import load_layout_file
from migagent.layout.profile import gi_profile_name
from migagent.layout.resolve import GpuIdentity, resolve_entries
from migagent.layout.spec import ALL_DEVICES, LayoutEntry, LayoutFile
from migagent.planning.validation import ConfigStatus, validate_layout

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "configs" / "mig-layouts" / "mig-layouts.yaml"
GENERATOR = REPO / "configs" / "generate_layouts.py"


@pytest.fixture(scope="module")
def shipped() -> LayoutFile:
    return load_layout_file(SHIPPED)


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_layouts", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def identity(model: GpuModel, pci: int, index: int = 0) -> GpuIdentity:
    return GpuIdentity(index=index, pci_device_id=pci, subsystem_id=None, profiles=model.profiles,
                       label=f"GPU {index} ({model.key})")


def models_targeted_by(entry: LayoutEntry) -> list[GpuModel]:
    return [m for m in all_models() if any(entry.may_match_pci(pci) for pci in m.pci_device_ids)]


def test_the_shipped_file_is_what_the_generator_writes_now() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == render_layout_file(all_models()), (
        "configs/mig-layouts/mig-layouts.yaml is stale; run: python configs/generate_layouts.py"
    )


def test_the_generator_script_checks_and_writes_the_same_text(tmp_path: Path) -> None:
    generator = load_generator()
    assert generator.main(["--check"]) == 0
    out = tmp_path / "layouts.yaml"
    assert generator.main(["--check", "--output", str(out)]) == 1
    assert generator.main(["--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")


def test_the_standard_names_are_present(shipped: LayoutFile) -> None:
    assert shipped.names[:2] == ("all-disabled", "all-enabled")
    assert "all-balanced" in shipped.names
    assert shipped.configs["all-disabled"][0].mig_enabled is False
    assert shipped.configs["all-enabled"][0].mig_devices == ()


def test_filters_are_written_the_way_mig_parted_writes_them() -> None:
    written = re.findall(r'"(0x[0-9A-Fa-f]+)"', SHIPPED.read_text(encoding="utf-8"))
    assert written
    assert all(re.fullmatch(r"0x[0-9A-F]{8}", pci) for pci in written)


def test_every_entry_targets_at_least_one_catalog_model(shipped: LayoutFile) -> None:
    for name, entries in shipped.configs.items():
        for entry in entries:
            assert models_targeted_by(entry), f"{name}[{entry.index}] selects no catalog model"


def test_every_config_resolves_on_every_pci_id_of_every_model_it_targets(shipped: LayoutFile) -> None:
    for name, entries in shipped.configs.items():
        (report,) = validate_layout(shipped, config=name, models=None)
        assert report.status is ConfigStatus.VALID, name
        assert not report.misfits, name
        for model in {m.key: m for e in entries for m in models_targeted_by(e)}.values():
            for pci in model.pci_device_ids:
                desired = resolve_entries(entries, [identity(model, pci)], config_name=name)
                assert len(desired.gpus) == 1, f"{name} does not select {model.key} ({pci:#x})"


def test_every_all_profile_config_asks_for_that_profile_at_its_maximum(shipped: LayoutFile) -> None:
    for name, entries in shipped.configs.items():
        if name in ("all-disabled", "all-enabled", "all-balanced"):
            continue
        for entry in entries:
            assert entry.devices == ALL_DEVICES
            ((profile, count),) = entry.mig_devices
            assert config_name_for(str(profile)) == name
            for model in models_targeted_by(entry):
                gi = next(gi for gi in model.profiles.gi_profiles if gi_profile_name(gi, model.profiles) == profile)
                assert count == gi.max_instances, f"{name} on {model.key}"


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_every_gi_profile_of_every_model_has_its_all_config(shipped: LayoutFile, model: GpuModel) -> None:
    for gi in model.profiles.gi_profiles:
        profile = gi_profile_name(gi, model.profiles)
        entries = shipped.configs[config_name_for(str(profile))]
        desired = resolve_entries(entries, [identity(model, model.primary_pci_device_id)], config_name="x")
        (target,) = desired.gpus
        assert len(target.gpu_instances) == gi.max_instances
        assert {d.profile_id for d in target.gpu_instances} == {gi.id}


def test_names_keep_me_and_write_plus_as_a_dot() -> None:
    assert config_name_for("1g.5gb+me") == "all-1g.5gb.me"
    assert config_name_for("1g.24gb+me.all") == "all-1g.24gb.me.all"
    assert config_name_for("1g.24gb-me") == "all-1g.24gb-me"


def test_all_1g_10gb_is_four_on_a100_40gb_and_seven_on_80gb_parts(shipped: LayoutFile) -> None:
    entries = shipped.configs["all-1g.10gb"]
    for key, count in [("A100-40GB", 4), ("A100-80GB", 7), ("H100-80GB-SXM", 7), ("H100-80GB-PCIe", 7)]:
        model = model_by_key(key)
        pci = next(pci for pci in model.pci_device_ids if any(e.may_match_pci(pci) for e in entries))
        (target,) = resolve_entries(entries, [identity(model, pci)], config_name="all-1g.10gb").gpus
        assert len(target.gpu_instances) == count, model.key


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_all_balanced_is_two_1g_one_2g_and_one_3g_or_no_3g_on_four_slice_models(
    shipped: LayoutFile, model: GpuModel
) -> None:
    entries = [e for e in shipped.configs["all-balanced"] if model in models_targeted_by(e)]
    assert len(entries) == 1
    sizes = sorted(profile.g for profile, count in entries[0].mig_devices for _ in range(count))
    assert sizes == ([1, 1, 2, 3] if model.profiles.compute_slices == 7 else [1, 1, 2])
    assert all(profile.media.value == "" for profile, _ in entries[0].mig_devices)
    offered = {str(gi_profile_name(gi, model.profiles)) for gi in model.profiles.gi_profiles}
    assert {str(profile) for profile, _ in entries[0].mig_devices} <= offered
