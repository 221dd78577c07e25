"""What Node allocatable must show under the plugin's sharing config, and where that config is learnt."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from migagent.attempt.advertise.expectation import Expectation, ResourceExpectation, expectation
from migagent.attempt.advertise.sharing_source import SharingSettings, SharingSource, SharingView, gfd_view
from migagent.layout.observed import Observation
from migagent.layout.sharing import Advertised, parse_plugin_config
from migagent.layout.strategy import MigStrategy
from migagent.node.port import NodeView
from migagent_sim.doubles.builders import mig_gpu

ONE_G_TWICE = "sharing: {timeSlicing: {renameByDefault: %s, resources: [{name: nvidia.com/mig-1g.5gb, replicas: 2}]}}"


def _view(text: str) -> SharingView:
    return SharingView(source="test", config=parse_plugin_config(text, where="test"))


def _node(labels: Mapping[str, str]) -> NodeView:
    return NodeView(name="n", uid="u", resource_version="1", labels=dict(labels))


def _exact(resource: str, instances: int, name: str, count: int) -> ResourceExpectation:
    return ResourceExpectation(resource, instances, (name,), count)


def test_seven_instances_replicated_twice_are_fourteen_under_the_plain_or_shared_name() -> None:
    entries = (_exact("nvidia.com/mig-1g.10gb", 7, "nvidia.com/mig-1g.10gb", 14),)
    assert Expectation(entries).matches({"nvidia.com/mig-1g.10gb": 14}) == (True, {})
    assert Expectation(entries).matches({"nvidia.com/mig-1g.10gb": 7}) == (
        False, {"nvidia.com/mig-1g.10gb": (7, 14)}
    )
    shared = (_exact("nvidia.com/mig-1g.10gb", 7, "nvidia.com/mig-1g.10gb.shared", 14),)
    ok, diff = Expectation(shared).matches({"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-1g.10gb.shared": 14})
    assert not ok
    assert diff == {"nvidia.com/mig-1g.10gb": (7, 0)}, "the unrenamed name must be gone"


def test_an_unknown_count_accepts_any_advertisement_of_at_least_one_per_instance_and_asks_for_stability() -> None:
    unknown = Expectation(
        (ResourceExpectation("nvidia.com/mig-1g.10gb", 7, ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb.shared"),
                             None),),
        note="replicas of nvidia.com/mig-1g.10gb not known (test)",
        stable_s=30.0,
    )
    assert not unknown.exact
    assert unknown.matches({"nvidia.com/mig-1g.10gb.shared": 21})[0]
    assert not unknown.matches({"nvidia.com/mig-1g.10gb": 3})[0]
    assert "stable for 30s" in unknown.describe()


def test_a_probe_that_is_not_satisfied_keeps_right_counts_from_matching() -> None:
    entries = (_exact("nvidia.com/mig-1g.10gb", 7, "nvidia.com/mig-1g.10gb", 7),)
    assert not Expectation(entries, probe=lambda: "slices stale").matches({"nvidia.com/mig-1g.10gb": 7})[0]
    assert Expectation(entries, probe=lambda: None).matches({"nvidia.com/mig-1g.10gb": 7})[0]


class _Maps:
    def __init__(self, data: Mapping[str, str] | None) -> None:
        self.data = data
        self.reads: list[tuple[str, str]] = []

    def read_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        self.reads.append((namespace, name))
        return self.data


def test_the_node_label_selects_the_config_of_the_plugins_config_map_else_the_default() -> None:
    maps = _Maps({"any": ONE_G_TWICE % "false", "shared": ONE_G_TWICE % "true"})
    source = SharingSource(SharingSettings(config_map="gpu-operator/ts", default_config="any"), reader=maps)
    labelled = source.view(_node({"nvidia.com/device-plugin.config": "shared"}))
    assert labelled.advertised("nvidia.com/mig-1g.5gb").name == "nvidia.com/mig-1g.5gb.shared"  # type: ignore[union-attr]
    default = source.view(_node({}))
    assert default.advertised("nvidia.com/mig-1g.5gb").name == "nvidia.com/mig-1g.5gb"  # type: ignore[union-attr]
    assert maps.reads == [("gpu-operator", "ts")] * 2


def test_a_selected_config_the_map_lacks_or_a_missing_map_is_unknown_not_unshared() -> None:
    source = SharingSource(SharingSettings(config_map="gpu-operator/ts"), reader=_Maps({"any": ONE_G_TWICE % "false"}))
    missing = source.view(_node({"nvidia.com/device-plugin.config": "other"}))
    assert missing.unknown
    assert "'other'" in missing.source
    assert "any" in missing.source
    gone = SharingSource(SharingSettings(config_map="gpu-operator/ts"), reader=_Maps(None)).view(_node({}))
    assert gone.unknown
    assert gone.advertised("nvidia.com/gpu") is None


def test_a_node_label_with_nothing_to_read_is_unknown_and_without_a_label_nothing_is_shared() -> None:
    source = SharingSource(SharingSettings(gfd_labels=False))
    assert source.view(_node({"nvidia.com/device-plugin.config": "ts"})).unknown
    assert source.view(_node({})).advertised("nvidia.com/mig-1g.10gb") is not None


def test_an_explicit_file_or_directory_of_configs_wins(tmp_path: Path) -> None:
    single = tmp_path / "plugin.yaml"
    single.write_text(ONE_G_TWICE % "true", encoding="utf-8")
    view = SharingSource(SharingSettings(config_file=single)).view(_node({"nvidia.com/device-plugin.config": "x"}))
    assert view.advertised("nvidia.com/mig-1g.5gb").name == "nvidia.com/mig-1g.5gb.shared"  # type: ignore[union-attr]
    directory = tmp_path / "configs"
    directory.mkdir()
    (directory / "two").write_text(ONE_G_TWICE % "false", encoding="utf-8")
    (directory / "none").write_text("version: v1\n", encoding="utf-8")
    source = SharingSource(SharingSettings(config_file=directory))
    assert source.view(_node({"nvidia.com/device-plugin.config": "two"})).advertised(  # type: ignore[union-attr]
        "nvidia.com/mig-1g.5gb"
    ).replicas == 2


def test_gfd_labels_give_replicas_and_a_missing_shared_suffix_means_renamed_by_default_to_dot_shared() -> None:
    """GFD and the plugin (v0.18.2) honour only renameByDefault's rename, so the name is known."""
    view = gfd_view({
        "nvidia.com/mig-1g.10gb.replicas": "2",
        "nvidia.com/mig-1g.10gb.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED",
        "nvidia.com/mig-3g.40gb.replicas": "2",
        "nvidia.com/mig-3g.40gb.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb",
    })
    assert view.advertised("nvidia.com/mig-1g.10gb") == view.labelled["nvidia.com/mig-1g.10gb"]
    assert view.labelled["nvidia.com/mig-1g.10gb"] == Advertised("nvidia.com/mig-1g.10gb", 2)
    assert view.labelled["nvidia.com/mig-3g.40gb"] == Advertised("nvidia.com/mig-3g.40gb.shared", 2)
    assert view.advertised("nvidia.com/mig-2g.20gb") is None, "unlabelled while others replicate: unknown"
    plain = gfd_view({"nvidia.com/mig-1g.10gb.replicas": "1"})
    assert plain.advertised("nvidia.com/mig-2g.20gb") is not None


def test_expectation_multiplies_observed_instances_and_notes_what_is_unknown() -> None:
    observation = Observation(gpus=(mig_gpu(0, [("1g.5gb", i) for i in range(7)]),))
    known = expectation(observation, strategy=MigStrategy.MIXED, sharing=_view(ONE_G_TWICE % "true"))
    assert known.counts() == {"nvidia.com/mig-1g.5gb.shared": 14}
    assert known.note is None
    assert known.exact
    unknown = expectation(
        observation, strategy=MigStrategy.MIXED, sharing=SharingView(source="because", unknown=True), stable_s=5
    )
    assert unknown.note == "replicas of nvidia.com/mig-1g.5gb not known (because)"
    assert unknown.stable_s == 5


def test_gfd_replicas_zero_leaves_the_resource_unknown_as_nvidia_gfd_labels_mig_enabled_gpus_without_sharing() -> None:
    """Found against NVIDIA's GFD and plugin (tests/nvidia): under `none`, MIG-enabled GPUs are labelled
    `nvidia.com/gpu.replicas=0` while the plugin replicates them as its config says."""
    view = gfd_view({"nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    assert view.advertised("nvidia.com/gpu") is None
    assert view.advertised("nvidia.com/mig-1g.10gb") == Advertised("nvidia.com/mig-1g.10gb", 1), "nothing replicates"
