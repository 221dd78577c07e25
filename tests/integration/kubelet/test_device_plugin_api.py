"""The kubelet's device plugin API (v1beta1) as the simulated kubelet serves it, over real gRPC on unix
sockets: what it refuses at registration, and how each plugin event shows in capacity and allocatable
(k8s.io/kubernetes v1.37.2 pkg/kubelet/cm/devicemanager)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from migagent.clock import FakeClock
from migagent_sim.deviceplugin import AllocationError, DeviceManager, RegistrationServer, SimulatedPluginServer
from migagent_sim.deviceplugin.generated.v1beta1 import api_pb2, api_pb2_grpc
from migagent_sim.unix_grpc import unix_channel

MIG = "nvidia.com/mig-1g.10gb"
Plugins = Callable[..., SimulatedPluginServer]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manager(clock: FakeClock) -> DeviceManager:
    return DeviceManager(clock=clock)


@pytest.fixture
def socket_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="dp-") as directory:
        yield directory


@pytest.fixture
def kubelet(socket_dir: str, manager: DeviceManager) -> Iterator[RegistrationServer]:
    server = RegistrationServer(socket_dir, manager)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def plugins(kubelet: RegistrationServer, socket_dir: str, manager: DeviceManager) -> Iterator[Plugins]:
    started: list[SimulatedPluginServer] = []

    def start(resource: str, ids: list[str], **options: bool) -> SimulatedPluginServer:
        before = manager.listed(resource)
        plugin = SimulatedPluginServer(resource, ids, socket_dir=socket_dir, **options)
        plugin.start()
        started.append(plugin)
        assert manager.wait_until(lambda: manager.listed(resource) > before, 5)
        return plugin

    yield start
    for plugin in started:
        plugin.stop()


def _register(socket_dir: str, request: api_pb2.RegisterRequest) -> None:
    with unix_channel(str(Path(socket_dir) / "kubelet.sock")) as channel:
        api_pb2_grpc.RegistrationStub(channel).Register(request, timeout=5)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(("version", "resource", "error"), [
    ("v1alpha", MIG, "requested device plugin version v1alpha is not supported"),
    ("v1beta1", "gpu", "invalid name of device plugin socket: gpu"),
    ("v1beta1", "kubernetes.io/gpu", "invalid name of device plugin socket"),
    ("v1beta1", "nvidia.com/mig-1g.10gb+me", "invalid name of device plugin socket"),
])
def test_registration_refuses_another_version_and_a_name_that_is_no_extended_resource(
    kubelet: RegistrationServer, socket_dir: str, version: str, resource: str, error: str
) -> None:
    request = api_pb2.RegisterRequest(version=version, endpoint="nvidia-x.sock", resource_name=resource)
    with pytest.raises(grpc.RpcError) as refused:
        _register(socket_dir, request)
    assert error in refused.value.details()
    assert kubelet.registrations == []


def test_registration_refuses_an_endpoint_it_cannot_dial(manager: DeviceManager, socket_dir: str) -> None:
    kubelet = RegistrationServer(socket_dir, manager, dial_timeout_s=0.2)
    kubelet.start()
    request = api_pb2.RegisterRequest(version="v1beta1", endpoint="nobody.sock", resource_name=MIG)
    with pytest.raises(grpc.RpcError) as refused:
        _register(socket_dir, request)
    kubelet.stop()
    assert "failed to dial device plugin" in refused.value.details()


def test_each_list_replaces_the_devices_wholesale_and_an_unhealthy_one_leaves_allocatable_not_capacity(
    manager: DeviceManager, plugins: Plugins
) -> None:
    plugin = plugins(MIG, ["MIG-a", "MIG-b", "MIG-c"])
    assert manager.capacity() == ({MIG: 3}, {MIG: 3}, [])

    plugin.set_health("MIG-b", healthy=False)

    assert manager.wait_until(lambda: manager.listed(MIG) == 2, 5)
    assert manager.capacity() == ({MIG: 3}, {MIG: 2}, [])
    assert manager.healthy_devices() == {MIG: ("MIG-a", "MIG-c")}


def test_a_stopped_plugin_keeps_its_capacity_with_zero_allocatable_until_the_grace_period_ends(
    manager: DeviceManager, plugins: Plugins, clock: FakeClock
) -> None:
    plugins(MIG, ["MIG-a", "MIG-b"]).stop()
    assert manager.wait_until(lambda: not manager.connected_sockets(MIG), 5)
    assert manager.capacity() == ({MIG: 2}, {MIG: 0}, [])

    clock.advance(300.5)

    assert manager.capacity() == ({}, {}, [MIG]), "past endpointStopGracePeriod the resource is reported deleted"
    assert manager.capacity() == ({}, {}, []), "once"


def test_a_restarted_plugin_replaces_its_devices_and_its_stop_time(
    manager: DeviceManager, plugins: Plugins, clock: FakeClock
) -> None:
    plugins(MIG, ["MIG-a", "MIG-b"]).stop()
    assert manager.wait_until(lambda: not manager.connected_sockets(MIG), 5)
    clock.advance(200)

    plugins(MIG, ["MIG-c"])
    clock.advance(200)

    assert manager.capacity() == ({MIG: 1}, {MIG: 1}, [])


def test_a_second_registration_from_a_socket_still_connected_is_refused(
    manager: DeviceManager, plugins: Plugins, socket_dir: str
) -> None:
    plugin = plugins(MIG, ["MIG-a"])
    request = api_pb2.RegisterRequest(version="v1beta1", endpoint=Path(plugin.socket_path).name, resource_name=MIG)
    with pytest.raises(grpc.RpcError) as refused:
        _register(socket_dir, request)
    assert "device plugin already connected" in refused.value.details()
    assert manager.capacity() == ({MIG: 1}, {MIG: 1}, [])


def test_a_plugin_socket_deleted_under_a_live_connection_changes_nothing_in_kubelet_v1_37(
    manager: DeviceManager, plugins: Plugins
) -> None:
    """Kubelets since 1.26 no longer watch the plugin's socket file: only the stream ending counts."""
    plugin = plugins(MIG, ["MIG-a"])

    Path(plugin.socket_path).unlink()
    plugin.set_health("MIG-a", healthy=True)  # one more list over the same connection

    assert manager.wait_until(lambda: manager.listed(MIG) == 2, 5)
    assert manager.capacity() == ({MIG: 1}, {MIG: 1}, [])
    assert manager.connected_sockets(MIG) == (plugin.socket_path,)


def test_allocate_takes_the_plugins_preferred_devices_and_skips_those_held(
    manager: DeviceManager, plugins: Plugins
) -> None:
    plugin = plugins(MIG, ["MIG-a", "MIG-b", "MIG-c"])

    first = manager.allocate("pod-1", "main", MIG, 1)
    second = manager.allocate("pod-2", "main", MIG, 2)

    assert first.device_ids == ("MIG-a",)
    assert set(second.device_ids) == {"MIG-b", "MIG-c"}
    assert second.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(second.device_ids)
    assert plugin.allocations == [("MIG-a",), second.device_ids]
    with pytest.raises(AllocationError, match="Requested: 1, Available: 0"):
        manager.allocate("pod-3", "main", MIG, 1)
    manager.release("pod-1")
    assert manager.allocate("pod-3", "main", MIG, 1).device_ids == ("MIG-a",)


def test_fail_requests_greater_than_one_refuses_two_replicas_in_allocate_but_not_one(
    manager: DeviceManager, plugins: Plugins
) -> None:
    plugins(MIG, ["MIG-a::0", "MIG-a::1", "MIG-b::0", "MIG-b::1"], fail_requests_greater_than_one=True)

    with pytest.raises(AllocationError, match="maximum request size for shared resources is 1; found 2"):
        manager.allocate("pod-1", "main", MIG, 2)
    assert manager.allocate("pod-1", "main", MIG, 1).envs == {"NVIDIA_VISIBLE_DEVICES": "MIG-a"}


def test_a_resource_without_a_running_plugin_cannot_be_allocated(manager: DeviceManager, plugins: Plugins) -> None:
    with pytest.raises(AllocationError, match="cannot allocate unregistered device"):
        manager.allocate("pod-1", "main", MIG, 1)
    plugins(MIG, ["MIG-a"]).stop()
    assert manager.wait_until(lambda: not manager.connected_sockets(MIG), 5)
    with pytest.raises(AllocationError, match="unregistered"):
        manager.allocate("pod-1", "main", MIG, 1)


def test_a_restarted_kubelet_removes_the_sockets_left_and_reads_zero_until_plugins_register_again(
    manager: DeviceManager, plugins: Plugins, kubelet: RegistrationServer
) -> None:
    plugin = plugins(MIG, ["MIG-a"])
    kubelet.stop()
    manager.restored(manager.known_resources())

    kubelet.start()

    assert not Path(plugin.socket_path).exists()
    assert manager.capacity() == ({MIG: 0}, {MIG: 0}, [])
    plugins(MIG, ["MIG-a", "MIG-b"])
    assert manager.capacity() == ({MIG: 2}, {MIG: 2}, [])
