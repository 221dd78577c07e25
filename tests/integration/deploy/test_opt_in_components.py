"""The opt-in components of issue 20 and issue 17 item 4 add their flags and exactly their grants.

device-plugin-config (GPU Operator) and device-plugin-config-standalone (the plugin chart as the
standalone overlay expects it): `get` on the plugin's one ConfigMap (resourceNames) in the plugin's
namespace; deploy/examples/standalone-time-slicing points it at another install with one patch.
dra-driver: `list` on resourceslices cluster-wide (cluster-scoped objects: RBAC cannot narrow a list to
one node's slices), `delete` on pods in the DRA driver's namespace and the admission marker that
limits those deletes to its kubelet plugin pod on the agent's own node. Their use by the agent is
exercised under this RBAC in tests/integration/agent/test_time_slicing.py and test_dra_driver.py."""

from __future__ import annotations

import pytest

from migagent.cli import build_parser
from tests.integration.deploy.manifests import OVERLAYS, Obj, agent_container, only, render, render_with_components
from tests.integration.deploy.rbac import permissions_of

Grant = tuple[str, str, str, str | None, tuple[str, ...]]


def _grants(objects: list[Obj]) -> set[Grant]:
    metadata = only(objects, "ServiceAccount")["metadata"]
    account = (metadata["namespace"], metadata["name"])
    return {
        (p.verb, p.group, p.resource, p.namespace, tuple(p.resource_names))
        for p in permissions_of(objects, service_account=account)
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize(("component", "added"), [
    ("device-plugin-config", {("get", "", "configmaps", "gpu-operator", ("time-slicing-config",))}),
    ("dra-driver", {
        # (list resourceslices is in the base already: the sole-owner check reads them for DynamicMIG)
        ("delete", "", "pods", "nvidia-dra-driver-gpu", ()),
        # the marker by which the pod-delete admission policy lets it delete that plugin's pod, on its node
        ("restart-dra-plugin-on-own-node", "migagent.io", "nodeagents", None, ()),
    }),
])
def test_each_opt_in_component_adds_exactly_its_grants(overlay: str, component: str, added: set[Grant]) -> None:
    plain = render(f"overlays/{overlay}")
    with_component = render_with_components(f"overlays/{overlay}", f"components/{component}")
    assert _grants(with_component) - _grants(plain) == added
    assert _grants(plain) <= _grants(with_component)


def test_the_components_flags_point_the_agent_at_what_they_grant() -> None:
    objects = render_with_components(
        "overlays/gpu-operator", "components/device-plugin-config", "components/dra-driver"
    )
    args = build_parser().parse_args(agent_container(objects)["args"])
    assert args.device_plugin_config_map == "gpu-operator/time-slicing-config"
    assert args.device_plugin_config_default == "any"
    assert args.dra_driver is True
    assert args.dra_namespace == "nvidia-dra-driver-gpu"


def test_the_standalone_component_grants_the_charts_configmap_and_points_the_agent_at_it() -> None:
    plain = render("overlays/standalone")
    objects = render_with_components("overlays/standalone", "components/device-plugin-config-standalone")
    assert _grants(objects) - _grants(plain) == {
        ("get", "", "configmaps", "nvidia-device-plugin", ("nvdp-nvidia-device-plugin-configs",))
    }
    args = build_parser().parse_args(agent_container(objects)["args"])
    assert args.device_plugin_config_map == "nvidia-device-plugin/nvdp-nvidia-device-plugin-configs"


def test_the_example_for_another_plugin_install_moves_the_grant_and_the_flags_together() -> None:
    plain = render("overlays/standalone")
    objects = render("examples/standalone-time-slicing")
    assert _grants(objects) - _grants(plain) == {("get", "", "configmaps", "gpu-sharing", ("plugin-sharing",))}
    args = build_parser().parse_args(agent_container(objects)["args"])
    assert args.device_plugin_config_map == "gpu-sharing/plugin-sharing"
    assert args.device_plugin_config_default == "any"
    assert args.operator_namespace == "gpu-sharing"
    assert args.device_plugin_daemonset == "gpu-nvidia-device-plugin"
