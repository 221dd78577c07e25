"""The device plugin's sharing config (api/config/v1 replicas.go, sharing.go): what it replicates and
how it names the result; what the plugin refuses is refused here, naming the field."""

from __future__ import annotations

import pytest

from migagent.layout.sharing import NO_SHARING, Advertised, SharingConfigError, parse_plugin_config

TIME_SLICING = """
version: v1
flags: {migStrategy: mixed}
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: true
    resources:
      - name: nvidia.com/mig-1g.10gb
        replicas: 2
      - name: nvidia.com/gpu
        replicas: 4
        rename: nvidia.com/gpu.ts
"""


def test_a_replicated_mig_resource_keeps_its_name_and_multiplies_by_its_replicas() -> None:
    config = parse_plugin_config(TIME_SLICING, where="test")
    assert config.advertised("nvidia.com/mig-1g.10gb") == Advertised("nvidia.com/mig-1g.10gb", 2)
    assert config.advertised("nvidia.com/mig-3g.40gb") == Advertised("nvidia.com/mig-3g.40gb", 1)


def test_a_custom_rename_is_ignored_as_the_v0_18_2_plugin_does_and_rename_by_default_appends_shared() -> None:
    """Found against NVIDIA's plugin: DisableResourceNamingInConfig drops `rename` before use."""
    assert parse_plugin_config(TIME_SLICING, where="t").advertised("nvidia.com/gpu") == Advertised("nvidia.com/gpu", 4)
    renamed = parse_plugin_config(TIME_SLICING.replace("renameByDefault: false", "renameByDefault: true"), where="t")
    assert renamed.advertised("nvidia.com/mig-1g.10gb").name == "nvidia.com/mig-1g.10gb.shared"
    assert renamed.advertised("nvidia.com/gpu").name == "nvidia.com/gpu.shared"


@pytest.mark.parametrize("devices", ["[0]", "1", "['0:1']"])
def test_a_device_subset_is_ignored_as_the_v0_18_2_plugin_does_so_every_device_is_replicated(devices: str) -> None:
    text = TIME_SLICING.replace("replicas: 2\n", f"replicas: 2\n        devices: {devices}\n", 1)
    assert parse_plugin_config(text, where="t").advertised("nvidia.com/mig-1g.10gb") == Advertised(
        "nvidia.com/mig-1g.10gb", 2
    )


def test_a_resource_named_without_its_prefix_is_the_nvidia_com_one() -> None:
    text = "sharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 3}]}}\n"
    assert parse_plugin_config(text, where="t").advertised("nvidia.com/mig-1g.10gb").replicas == 3


def test_fail_requests_greater_than_one_is_read_and_always_on_under_mps() -> None:
    assert parse_plugin_config(TIME_SLICING, where="t").fail_requests_greater_than_one
    assert not parse_plugin_config(TIME_SLICING.replace("failRequestsGreaterThanOne: true", ""), where="t") \
        .fail_requests_greater_than_one
    mps = "sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}\n"
    assert parse_plugin_config(mps, where="t").fail_requests_greater_than_one


def test_mps_replicates_like_time_slicing_but_mps_on_mig_is_not_predicted() -> None:
    text = "version: v1\nsharing:\n  mps:\n    resources:\n      - {name: nvidia.com/gpu, replicas: 3}\n" \
           "      - {name: nvidia.com/mig-1g.10gb, replicas: 2}\n"
    config = parse_plugin_config(text, where="t")
    assert config.kind == "mps"
    assert config.advertised("nvidia.com/gpu") == Advertised("nvidia.com/gpu", 3)
    assert not config.advertised("nvidia.com/mig-1g.10gb").exact


def test_a_config_without_sharing_replicates_nothing() -> None:
    assert parse_plugin_config("version: v1\nflags: {migStrategy: mixed}\n", where="t") == NO_SHARING
    assert parse_plugin_config("", where="t") == NO_SHARING


@pytest.mark.parametrize(("text", "field"), [
    ("version: v2\n", "version"),
    ("sharing: {timeSlicing: {resources: []}}\n", "sharing.timeSlicing.resources"),
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 0}]}}\n", "resources[0].replicas"),
    # found against NVIDIA's plugin: "number of replicas must be >= 2" stops it at config load
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 1}]}}\n", "resources[0].replicas"),
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2, devices: 0}]}}\n", "devices"),
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2, devices: [x]}]}}\n", "devices"),
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/GPU, replicas: 2}]}}\n", "resources[0].name"),
    ("sharing: {timeSlicing: {failRequestsGreaterThanOne: 1, resources: [{name: a, replicas: 2}]}}\n",
     "failRequestsGreaterThanOne"),
    ("sharing: {timeSlicing: {resources: [{replicas: 2}]}}\n", "resources[0].name"),
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2, devices: some}]}}\n", "devices"),
    ("sharing: {timeSlicing: {renameByDefault: yes-please, resources: [{name: a, replicas: 2}]}}\n",
     "renameByDefault"),
    ("sharing: {spacesharing: {}}\n", "sharing.spacesharing"),
])
def test_what_the_plugin_refuses_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(SharingConfigError, match=field.replace("[", r"\[").replace("]", r"\]")) as error:
        parse_plugin_config(text, where="ConfigMap gpu-operator/ts config any")
    assert str(error.value).startswith("ConfigMap gpu-operator/ts config any: ")
