"""The fake device plugin under each MIG strategy (docs/device-plugin.md §1)."""

from __future__ import annotations

from collections.abc import Callable

from migagent.layout.strategy import MigStrategy
from migagent.podresources import PodResourcesClient
from migagent.sim import FakeNvml
from migagent_sim.kubelet import FakeKubelet
from tests.integration.kubelet.support import lay_out


def test_single_strategy_advertises_each_mig_device_as_nvidia_com_gpu_with_its_mig_uuid(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], socket_path: str
) -> None:
    uuids = lay_out(fake, 0, [("3g.40gb", 0), ("3g.40gb", 4)]) + lay_out(fake, 1, [("3g.40gb", 0), ("3g.40gb", 4)])

    kubelet = make_kubelet(mig_strategy=MigStrategy.SINGLE)
    kubelet.run_workload("ml", "job", profile="3g.40gb")

    assert kubelet.plugin_error is None
    assert kubelet.plugin_resources() == {"nvidia.com/gpu": 4}
    assert kubelet.advertised() == {}
    holdings = PodResourcesClient(socket_path).list()
    assert [(h.resource_name, h.device_ids[0] in uuids) for h in holdings] == [("nvidia.com/gpu", True)]


def test_single_strategy_plugin_exits_on_a_node_with_two_mig_device_types(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    lay_out(fake, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    lay_out(fake, 1, [("7g.80gb", 0)])

    kubelet = make_kubelet(mig_strategy=MigStrategy.SINGLE)

    assert kubelet.plugin_error is not None
    assert "more than one MIG device type" in kubelet.plugin_error
    assert all(count == 0 for count in kubelet.plugin_resources().values())


def test_single_strategy_plugin_exits_when_a_mig_enabled_gpu_has_no_devices(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    lay_out(fake, 0, [("7g.80gb", 0)])

    kubelet = make_kubelet(mig_strategy=MigStrategy.SINGLE)

    assert kubelet.plugin_error is not None
    assert "GPU 1 has MIG enabled but no MIG devices" in kubelet.plugin_error


def test_none_strategy_advertises_whole_gpus_and_ignores_mig_devices(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    lay_out(fake, 0, [("1g.10gb", start) for start in range(7)])
    lay_out(fake, 1, [("2g.20gb", 0)], ci_slices=1)  # C < G: fatal under mixed, ignored under none

    kubelet = make_kubelet(mig_strategy=MigStrategy.NONE)

    assert kubelet.plugin_error is None
    assert kubelet.plugin_resources() == {"nvidia.com/gpu": 2}
