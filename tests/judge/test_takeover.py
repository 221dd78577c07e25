"""A node NVIDIA's mig-parted configured is taken over by migagent: a different layout is applied
keeping every GPU instance it can (its MIG devices keep their UUIDs), and both tools then assert it.
Where mig-parted made a 1g double-memory GI's CI with another profile number of the same size
(CI profile 0 where migagent makes 7), the GI is kept as it is, not recreated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from migagent.catalog import model_by_key
from migagent.layout.profile import gi_profile_name
from migagent.sim.state import SimNodeState
from migagent_sim.gpu_node.session import NodeSession
from tests.judge.commands import Commands

H100 = model_by_key("H100-80GB-SXM")
LAYOUTS = {
    "balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "more-1g": {"1g.10gb": 4, "3g.40gb": 1},
    "all-1g.20gb": {"1g.20gb": 4},
    "two-1g.20gb": {"1g.20gb": 2, "3g.40gb": 1},
}
# GI name -> MIG device UUIDs, per GPU
Instances = list[dict[str, set[str]]]


@pytest.fixture
def node(tmp_path: Path, nvidia_tools: Path, fake_library: Path) -> Iterator[tuple[Commands, Path, Path]]:
    config = tmp_path / "layouts.yaml"
    entries = {
        name: [{"devices": "all", "mig-enabled": True, "mig-devices": devices}] for name, devices in LAYOUTS.items()
    }
    config.write_text(yaml.safe_dump({"version": "v1", "mig-configs": entries}), encoding="utf-8")
    state = tmp_path / "node.json"
    with NodeSession(state, spec=f"2x{H100.key}", library=fake_library) as session:
        yield Commands(session, nvidia_tools, tmp_path), state, config


def instances(state: Path) -> Instances:
    """Each GPU's GPU instances by name (with their placement), each with its MIG device UUIDs."""
    found: Instances = []
    for gpu in SimNodeState.load(state).gpus:
        table = model_by_key(gpu.model_key).profiles
        by_name: dict[str, set[str]] = {}
        for gi in gpu.gpu_instances:
            profile = table.gi_profile(gi.profile_id)
            assert profile is not None
            name = f"{gi_profile_name(profile, table)}@{gi.placement}"
            by_name[name] = {ci.uuid for ci in gi.compute_instances}
        found.append(by_name)
    return found


def kept(before: Instances, after: Instances) -> list[list[str]]:
    """Per GPU, the GIs (name@placement) of `before` whose MIG devices all still exist in `after`."""
    return [sorted(n for n, uuids in b.items() if a.get(n) == uuids) for b, a in zip(before, after, strict=True)]


def test_a_node_mig_parted_made_is_taken_over_keeping_every_instance_the_new_layout_has(
    node: tuple[Commands, Path, Path],
) -> None:
    commands, state, config = node
    assert commands.apply("mig-parted", state, config, "balanced")[0] == 0
    before = instances(state)
    applied = commands.apply("migagent", state, config, "more-1g")
    assert applied[0] == 0, applied[1]
    after = instances(state)
    for gpu_before, names in zip(before, kept(before, after), strict=True):
        # The 3g.40gb and both 1g.10gb stay wherever mig-parted put them; only the 2g.20gb goes.
        assert sorted(n.split("@")[0] for n in names) == ["1g.10gb", "1g.10gb", "3g.40gb"], gpu_before
    assert commands.check("mig-parted", state, config, "more-1g")[0] == 0
    assert commands.check("migagent", state, config, "more-1g")[0] == 0


def test_1g_20gb_instances_mig_parted_made_with_ci_profile_0_are_kept_not_recreated(
    node: tuple[Commands, Path, Path],
) -> None:
    commands, state, config = node
    assert commands.apply("mig-parted", state, config, "all-1g.20gb")[0] == 0
    made = SimNodeState.load(state)
    assert {ci.profile_id for gi in made.gpus[0].gpu_instances for ci in gi.compute_instances} == {0}
    before = instances(state)
    same = commands.apply("migagent", state, config, "all-1g.20gb")
    assert same[0] == 0, same[1]
    assert instances(state) == before, "the layout mig-parted made is the layout: nothing recreated"
    applied = commands.apply("migagent", state, config, "two-1g.20gb")
    assert applied[0] == 0, applied[1]
    assert [len(names) for names in kept(before, instances(state))] == [2, 2], "two 1g.20gb stay beside the 3g.40gb"
    assert commands.check("mig-parted", state, config, "two-1g.20gb")[0] == 0


def test_mig_parted_cannot_make_1g_20gb_where_the_driver_offers_only_ci_profile_7_uncertain(
    node: tuple[Commands, Path, Path],
) -> None:
    """Whether the driver offers CI profile 0 beside 7 in a 1g.20gb GI was never captured
    (SimNodeState.one_slice_ci_beside_rev1). Where it does not, mig-parted (which asks for profile 0)
    cannot make the layout at all, while migagent (the driver's default, 7) can."""
    commands, state, config = node
    node_state = SimNodeState.load(state)
    node_state.one_slice_ci_beside_rev1 = False
    node_state.save(state)
    refused = commands.apply("mig-parted", state, config, "all-1g.20gb")
    assert refused[0] != 0
    assert "compute instance profile info for '1g.20gb': error_not_supported" in refused[1].lower()
    fresh = state.with_name("fresh.json")
    node_state.save(fresh)
    assert commands.apply("migagent", fresh, config, "all-1g.20gb")[0] == 0
    assert commands.check("mig-parted", fresh, config, "all-1g.20gb")[0] == 0
