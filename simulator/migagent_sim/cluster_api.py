"""What the simulated node's parts need from an API server, as one typed interface.

The fake kubelet, its device plugins (the simulated one, the DRA driver's) and the simulated cluster
reach Kubernetes only through `ClusterApi`. `apiserver.FakeApiServer` serves it in-process;
`tests/realkube/world.py`'s `RealKubeApi` serves it from a real kube-apiserver, each call under the
identity that makes it on a cluster. mypy checks both against this Protocol, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, Unpack

from migagent_sim.apiserver.objects import PodArgs
from migagent_sim.apiserver.rbac import UserInfo

JsonDict = dict[str, Any]
Listener = Callable[[JsonDict], None]


class ClusterApi(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def access(self) -> object | None:
        """None: requests carry no credentials (the fake without access control)."""
        ...

    def start(self) -> str: ...

    def stop(self) -> None: ...

    def issue_token(self, user: UserInfo) -> str: ...

    # -- nodes ----------------------------------------------------------------------------------------

    def add_node(self, name: str, *, labels: Mapping[str, str] | None = None) -> JsonDict: ...

    def node(self, name: str) -> JsonDict: ...

    def update_node(self, name: str, fn: Callable[[JsonDict], None]) -> JsonDict: ...

    def on_node_changed(self, callback: Listener) -> None: ...

    # -- pods -----------------------------------------------------------------------------------------

    def pods(self, node_name: str | None = None) -> list[JsonDict]: ...

    def pod(self, namespace: str, name: str) -> JsonDict | None: ...

    def create_pod(self, **pod: Unpack[PodArgs]) -> JsonDict: ...

    def update_pod(self, namespace: str, name: str, fn: Callable[[JsonDict], None]) -> JsonDict: ...

    def delete_pod(self, namespace: str, name: str) -> JsonDict: ...

    def on_pod_deleted(self, callback: Listener) -> None: ...

    # -- what the node's plugins read and publish -----------------------------------------------------

    def put_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> JsonDict: ...

    def config_map(self, namespace: str, name: str) -> JsonDict | None: ...

    def put_resource_slice(self, resource_slice: JsonDict) -> JsonDict: ...
