from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from migagent.errors import TransientError
from migagent.podresources import PodDevices, PodResourcesClient
from migagent.podresources.generated import api_pb2
from migagent_sim.podresources_server import PodResourcesServer, serve_pod_resources

TRAIN = PodDevices("ml", "train-0", "main", "nvidia.com/mig-3g.40gb", ("MIG-11111111-2222-5333-8444-555555555555",))
INFER = PodDevices("ml", "infer-0", "main", "nvidia.com/mig-1g.10gb", ("MIG-a", "MIG-b"))


@contextmanager
def serving(
    socket_path: str,
    provider: Callable[[], Sequence[PodDevices]],
    allocatable: Callable[[], Mapping[str, Sequence[str]]] | None = None,
) -> Iterator[PodResourcesServer]:
    server = serve_pod_resources(socket_path, provider, allocatable=allocatable)
    try:
        yield server
    finally:
        server.stop(None)


def test_list_returns_what_the_server_provides(socket_path: str) -> None:
    with serving(socket_path, lambda: [TRAIN, INFER]):
        assert PodResourcesClient(socket_path).list() == (TRAIN, INFER)


def test_list_reflects_the_provider_at_each_call(socket_path: str) -> None:
    held = [TRAIN]
    with serving(socket_path, lambda: list(held)):
        client = PodResourcesClient(socket_path)
        assert client.list() == (TRAIN,)
        held.clear()
        assert client.list() == ()


def test_get_returns_one_pod_and_nothing_for_an_unknown_pod(socket_path: str) -> None:
    with serving(socket_path, lambda: [TRAIN, INFER]):
        client = PodResourcesClient(socket_path)
        assert client.get("ml", "infer-0") == (INFER,)
        assert client.get("ml", "no-such-pod") == ()


def test_allocatable_groups_device_ids_by_resource(socket_path: str) -> None:
    devices = {"nvidia.com/mig-1g.10gb": ["MIG-a", "MIG-b", "MIG-c"], "nvidia.com/mig-3g.40gb": ["MIG-d"]}
    with serving(socket_path, list, allocatable=lambda: devices):
        assert PodResourcesClient(socket_path).allocatable() == {
            "nvidia.com/mig-1g.10gb": ("MIG-a", "MIG-b", "MIG-c"),
            "nvidia.com/mig-3g.40gb": ("MIG-d",),
        }


def test_the_wire_uses_the_kubelets_service_path(socket_path: str) -> None:
    """A stub built from the generated module (what any other client uses) talks to our server."""
    with serving(socket_path, lambda: [TRAIN]), grpc.insecure_channel(f"unix://{socket_path}") as channel:
        call = channel.unary_unary(
            "/v1.PodResourcesLister/List",
            request_serializer=api_pb2.ListPodResourcesRequest.SerializeToString,
            response_deserializer=api_pb2.ListPodResourcesResponse.FromString,
        )
        response = call(api_pb2.ListPodResourcesRequest(), timeout=5)
    assert [(p.namespace, p.name) for p in response.pod_resources] == [("ml", "train-0")]


def test_a_missing_socket_is_a_transient_error_naming_the_socket(socket_path: str) -> None:
    with pytest.raises(TransientError, match=f"socket {socket_path} does not exist"):
        PodResourcesClient(socket_path).list()


def test_a_socket_nobody_listens_on_is_a_transient_error_naming_the_target(socket_path: str) -> None:
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(socket_path)
        with pytest.raises(TransientError, match=rf"List on unix://{socket_path} failed: UNAVAILABLE"):
            PodResourcesClient(socket_path, timeout_s=2).list()


def test_a_failing_server_is_a_transient_error(socket_path: str) -> None:
    def broken() -> Sequence[PodDevices]:
        raise RuntimeError("kubelet lost its checkpoint")

    with serving(socket_path, broken), pytest.raises(TransientError, match=r"List on unix://.* failed: UNKNOWN"):
        PodResourcesClient(socket_path).list()


def test_stopping_the_server_removes_its_socket(socket_path: str) -> None:
    with serving(socket_path, lambda: [TRAIN]):
        assert Path(socket_path).is_socket()
    assert not Path(socket_path).exists()
    with pytest.raises(TransientError, match="does not exist"):
        PodResourcesClient(socket_path).list()


def test_a_stale_socket_file_is_replaced_on_start(socket_path: str) -> None:
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(socket_path)
    with serving(socket_path, lambda: [INFER]):
        assert PodResourcesClient(socket_path).list() == (INFER,)


def test_a_regular_file_at_the_socket_path_is_refused(socket_path: str) -> None:
    Path(socket_path).write_text("not a socket")
    with pytest.raises(FileExistsError, match="is not a socket"):
        serve_pod_resources(socket_path, list)


def test_a_socket_path_too_long_for_af_unix_is_refused_with_the_limit() -> None:
    with pytest.raises(ValueError, match="allow at most 107"):
        serve_pod_resources("/tmp/" + "d" * 120 + "/kubelet.sock", list)


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        PodResourcesClient("/run/kubelet.sock", timeout_s=0)
