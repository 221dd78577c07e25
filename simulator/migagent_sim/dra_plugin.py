"""NVIDIA's DRA driver GPU kubelet plugin, as the agent meets it: a DaemonSet pod that publishes the
node's devices in a ResourceSlice when it starts, and only then.

Modelled on k8s-dra-driver-gpu (cmd/gpu-kubelet-plugin/deviceinfo.go, driver.go), static MIG only:
- one ResourceSlice per node, driver `gpu.nvidia.com`, pool named after the node, its generation
  bumped at each publication;
- a GPU with MIG disabled is device `gpu-<index>` (`type=gpu`, `uuid`); each MIG device of a
  MIG-enabled GPU is `gpu-<index>-mig-<giProfileId>-<start>-<size>` (`type=mig`, `uuid` = the MIG
  UUID, `parentUUID`, `profile`);
- the device list is a snapshot taken at start (the reason a MIG manager must restart it); deleting
  the pod makes its DaemonSet create another (new name and UID), which publishes again after `lag_s`.
Read straight from the FakeNvml state, as the fake device plugin is, so no injected NVML fault is
consumed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from migagent.clock import Clock
from migagent.layout.profile import ci_profile_name
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import MIG_ENABLE
from migagent_sim.cluster_api import ClusterApi
from migagent_sim.kubelet_plugin import random_suffix

JsonDict = dict[str, Any]
DRA_DRIVER = "gpu.nvidia.com"
DRA_NAMESPACE = "nvidia-dra-driver-gpu"
DRA_PLUGIN_LABELS: Mapping[str, str] = {
    "app.kubernetes.io/name": "nvidia-dra-driver-gpu",
    "nvidia-dra-driver-gpu-component": "kubelet-plugin",
}
DRA_DAEMONSET = "nvidia-dra-driver-gpu-kubelet-plugin"


def _string(value: str) -> JsonDict:
    return {"string": value}


def slice_devices(fake: FakeNvml) -> list[JsonDict]:
    """The devices the plugin announces for the GPUs as they are now."""
    devices: list[JsonDict] = []
    for index, gpu in enumerate(list(fake.state.gpus)):
        if gpu.mig_current != MIG_ENABLE:
            devices.append({"name": f"gpu-{index}", "attributes": {"type": _string("gpu"), "uuid": _string(gpu.uuid)}})
            continue
        table = fake.model(index).profiles
        for gi in sorted(gpu.gpu_instances, key=lambda g: g.placement.start):
            gi_profile = table.gi_profile(gi.profile_id)
            for ci in gi.compute_instances:
                ci_profile = gi_profile.ci_profile(ci.profile_id) if gi_profile is not None else None
                if gi_profile is None or ci_profile is None:
                    continue
                name = f"gpu-{index}-mig-{gi.profile_id}-{gi.placement.start}-{gi.placement.size}"
                devices.append({
                    "name": name if len(gi.compute_instances) == 1 else f"{name}-{ci.id}",
                    "attributes": {
                        "type": _string("mig"),
                        "uuid": _string(ci.uuid),
                        "parentUUID": _string(gpu.uuid),
                        "profile": _string(str(ci_profile_name(gi_profile, ci_profile, table))),
                    },
                })
    return devices


class FakeDraKubeletPlugin:
    """Its pod on the node (recreated when deleted) and the ResourceSlice it publishes at each start."""

    def __init__(
        self,
        api: ClusterApi,
        fake_nvml: FakeNvml,
        *,
        node_name: str,
        clock: Clock,
        lock: threading.RLock,
        lag_s: float = 0.0,
        namespace: str = DRA_NAMESPACE,
    ) -> None:
        self._api = api
        self._fake = fake_nvml
        self._node = node_name
        self._clock = clock
        self._lock = lock
        self._lag_s = lag_s
        self.namespace = namespace
        self.pod: JsonDict | None = None
        self.generation = 0
        self.starts = 0
        self._cancel = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def slice_name(self) -> str:
        return f"{self._node}-{DRA_DRIVER}"

    def start(self) -> None:
        if self.pod is None:
            self._create_pod()

    def stop(self) -> None:
        self._cancel.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def pod_deleted(self, pod: JsonDict) -> bool:
        """True when `pod` was the plugin's; its DaemonSet then creates another, which publishes anew."""
        if self.pod is None or pod["metadata"].get("uid") != self.pod["metadata"].get("uid"):
            return False
        self.pod = None
        self._cancel.set()
        self._create_pod()
        return True

    def _create_pod(self) -> None:
        self.pod = self._api.create_pod(
            node_name=self._node,
            namespace=self.namespace,
            name=f"{DRA_DAEMONSET}-{random_suffix()}",
            labels=DRA_PLUGIN_LABELS,
            owner_kind="DaemonSet",
            owner_name=DRA_DAEMONSET,
        )
        uid = self.pod["metadata"]["uid"]
        self._cancel = threading.Event()
        if self._lag_s == 0:
            self._publish(uid)
            return
        cancel = self._cancel
        thread = threading.Thread(target=self._publish_later, args=(uid, cancel), name="fake-dra-plugin", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _publish_later(self, uid: str, cancel: threading.Event) -> None:
        if self._clock.wait(cancel, self._lag_s):
            return
        with self._lock:
            if not cancel.is_set():
                self._publish(uid)

    def _publish(self, uid: str) -> None:
        if self.pod is None or self.pod["metadata"]["uid"] != uid:
            return
        self.generation += 1
        self.starts += 1
        self._api.put_resource_slice({
            "metadata": {"name": self.slice_name},
            "spec": {
                "driver": DRA_DRIVER,
                "nodeName": self._node,
                "pool": {"name": self._node, "generation": self.generation, "resourceSliceCount": 1},
                "devices": slice_devices(self._fake),
            },
        })
