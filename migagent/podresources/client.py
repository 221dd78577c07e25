"""`PodResourcesClient`: the agent's read of which pod holds which device, from the kubelet socket.

gRPC and the generated stubs (`wire`) are imported at the first call, not with this module: an idle
agent never calls (it lists pods only for a change), and they are about a sixth of its memory."""

from __future__ import annotations

from migagent.podresources.model import PodDevices

DEFAULT_SOCKET_PATH = "/var/lib/kubelet/pod-resources/kubelet.sock"


class PodResourcesClient:
    """`PodResourcesClient("/var/lib/kubelet/pod-resources/kubelet.sock").list()`.

    Each call opens its own channel: the kubelet recreates the socket when it restarts, and a
    channel per call always dials the current one. Every failure is a TransientError naming the socket.
    """

    def __init__(self, socket_path: str, *, timeout_s: float = 10) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.socket_path = socket_path
        self.timeout_s = timeout_s

    @property
    def target(self) -> str:
        return f"unix://{self.socket_path}"

    def list(self) -> tuple[PodDevices, ...]:
        """Every device the kubelet has assigned to a container of an active pod on this node.

        Device ids are physical ids (a time-slicing replica suffix `::N` is removed).
        """
        from migagent.podresources import wire  # noqa: PLC0415 - gRPC at the first call (module docstring)

        return wire.list_pods(self.socket_path, self.timeout_s)

    def get(self, namespace: str, name: str) -> tuple[PodDevices, ...]:
        """The devices of one pod; empty when the kubelet does not know the pod.

        `Get` needs Kubernetes >= 1.34 or the KubeletPodResourcesGet gate; `list` works everywhere.
        """
        from migagent.podresources import wire  # noqa: PLC0415 - gRPC at the first call (module docstring)

        return wire.get_pod(self.socket_path, self.timeout_s, namespace, name)

    def allocatable(self) -> dict[str, tuple[str, ...]]:
        """Resource name -> every device id the kubelet can hand out (held or free)."""
        from migagent.podresources import wire  # noqa: PLC0415 - gRPC at the first call (module docstring)

        return wire.allocatable(self.socket_path, self.timeout_s)
