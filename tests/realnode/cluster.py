"""What runs on the real node: the agent as it ships and NVIDIA's device plugin, both as DaemonSet pods,
on a simulated GPU that reaches their containers the way a driver does, and the GPU workloads.

The agent: `kubectl apply --server-side -k` of a kustomization written here whose only resource is
deploy/overlays/standalone, changing what a user changes (the image's name, the layouts file) and
adding the simulated driver (`simulated_driver`): the fake libnvidia-ml.so.1 bound where the driver's
library would be (/usr/lib/x86_64-linux-gnu), and the GPU state file's directory, the Python
environment the fake library runs the simulator in, and the checkout, each a read-only hostPath at
its host path (the image holds no simulator); `KUBERNETES_SERVICE_HOST/PORT` name the API server,
which pods cannot reach at the `kubernetes` Service without kube-proxy.

The device plugin: a DaemonSet as the plugin's chart makes it (namespace nvidia-device-plugin, release
nvdp, privileged for MIG), its affinity then patched with deploy/overlays/standalone/
device-plugin-affinity.json as deploy/README.md tells an admin; its container runs the plugin in the
simulated driver's files (`migagent_sim.gpu_node run`, the mount namespace a driver's files would be in).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from migagent.podresources.client import PodResourcesClient
from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.cluster import apply_directly
from migagent_sim.gpu_node.library import library_dir
from migagent_sim.gpu_node.nvidia_tools import tools_dir
from tests.realkube.control_plane import CONTROLLERS, REPO, ControlPlane, binaries_dir
from tests.realkube.deployment import ensure_namespace, ensure_owner
from tests.realkube.rest import MERGE, HttpError
from tests.realnode.images import import_images
from tests.realnode.node import RealNode, node_address, node_binaries
from tests.waiting import eventually

JsonDict = dict[str, Any]
IMAGE_ENV = "MIGAGENT_IMAGE_ARCHIVE"
SPEC = "2xH100-80GB-SXM"
LAYOUTS = """\
version: v1
mig-configs:
  # GPU 0: a 4g.40gb (slots 0-3), a 2g.20gb (4-5), a 1g.10gb (6); GPU 1: one 7g.80gb.
  start:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
  # GPU 0 keeps its 4g.40gb, the 2g.20gb and 1g.10gb become a 3g.40gb; GPU 1 is left alone. Each
  # profile is on one GPU instance only: a pod asking for it gets that instance, whichever device the
  # kubelet picks (it picks at random among equals).
  target:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"4g.40gb": 1, "3g.40gb": 1}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
"""
START_RESOURCES = {"nvidia.com/mig-4g.40gb": 1, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-1g.10gb": 1,
                   "nvidia.com/mig-7g.80gb": 1}  # fmt: skip
TARGET_RESOURCES = {"nvidia.com/mig-4g.40gb": 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-7g.80gb": 1}
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
AGENT_NS, AGENT_LABEL = "migagent", "app.kubernetes.io/name=migagent"
PLUGIN_NS, PLUGIN_DS = "nvidia-device-plugin", "nvdp-nvidia-device-plugin"
PLUGIN_LABELS = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"}
WORKLOAD_NS = "ml"
APP = {"app": "inference"}
DRIVER_LIBRARY = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"


@dataclass(frozen=True)
class SimulatedDriver:
    """The host paths a container needs for the fake NVML: (name, path, type) hostPath volumes, mounted at
    the same path, read-only but for the GPU state's `sim-gpu`; the state file; the library's directory."""

    volumes: tuple[tuple[str, str, str], ...]
    state: Path
    library: Path


def simulated_driver(gpu_dir: Path) -> SimulatedDriver:
    if Path(sys.base_prefix).resolve() in (Path("/"), Path("/usr")):
        # bound at its own path, it would cover the image's /usr
        raise RuntimeError(f"the fake NVML's Python must live outside /usr to reach a container: {sys.base_prefix}")
    library = library_dir()
    candidates = sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), REPO, library})
    outermost = [p for p in candidates if not any(q != p and q in p.parents for q in candidates)]
    volumes = tuple((f"sim-{i}", str(p), "Directory") for i, p in enumerate(outermost))
    return SimulatedDriver((*volumes, ("sim-gpu", str(gpu_dir), "Directory")), gpu_dir / "node.json", library)


class Cluster:
    def __init__(self, plane: ControlPlane, node: RealNode, workdir: Path, image: Path, tools: Path) -> None:
        self.plane = plane
        self.node = node
        self.workdir = workdir
        self.image_archive = image
        self.tools = tools
        self.admin = plane.rest(plane.admin)
        gpu_dir = workdir / "gpu"
        gpu_dir.mkdir(exist_ok=True)
        self.driver = simulated_driver(gpu_dir)
        self.images: dict[str, str] = {}

    # -- installing ---------------------------------------------------------------------------

    def install(self) -> None:
        plugin_tag = (self.tools / "STAMP").read_text(encoding="utf-8").split()[-1]
        self.images = import_images(self.node, self.image_archive, self.tools / "nvidia-device-plugin", plugin_tag)
        self.lay_out_gpus("start")
        self.label({"migagent.io/enabled": "true", "nvidia.com/gpu.present": "true", MIG_CONFIG: "start"})
        for namespace in (PLUGIN_NS, WORKLOAD_NS):
            ensure_namespace(self.plane, namespace)
        self.plane.apply([self.plugin_daemonset()])
        patch = REPO / "deploy/overlays/standalone/device-plugin-affinity.json"
        self.plane.kubectl("patch", "daemonset", PLUGIN_DS, "-n", PLUGIN_NS, "--type=json", f"--patch-file={patch}")
        # What an admin may tune: give up on a plugin that does not come back within a minute (not 5).
        self.plane.kubectl("apply", "--server-side", "--force-conflicts", "-k",
                           str(self.write_kustomization(("--readvertise-timeout=60", "--drain-timeout=60"))))
        self.wait_settled("start", START_RESOURCES)

    def lay_out_gpus(self, layout: str) -> None:
        """The GPUs in `layout`, written straight into the state file (as a node set up beforehand)."""
        layouts = self.workdir / "layouts.yaml"
        layouts.write_text(LAYOUTS, encoding="utf-8")
        fake = FakeNvml.from_spec(SPEC)
        apply_directly(fake, layouts, layout)
        fake.save(self.driver.state)

    def write_kustomization(self, extra_args: tuple[str, ...] = ()) -> Path:
        directory = self.workdir / "deploy"
        directory.mkdir(exist_ok=True)
        (directory / "mig-layouts.yaml").write_text(LAYOUTS, encoding="utf-8")
        name, tag = self.images["agent"].rsplit(":", 1)
        container = "/spec/template/spec/containers/0"
        ops: list[JsonDict] = [
            {"op": "add", "path": f"{container}/env/-", "value": {"name": n, "value": v}}
            for n, v in (
                ("MIGAGENT_FAKE_NVML_STATE", str(self.driver.state)),
                ("KUBERNETES_SERVICE_HOST", self.plane.address),
                ("KUBERNETES_SERVICE_PORT", str(self.plane.port)),
            )
        ]
        ops += [{"op": "add", "path": f"{container}/args/-", "value": arg} for arg in extra_args]
        library = ("fake-nvml", str(self.driver.library / "libnvidia-ml.so.1"), "File")
        for volume, path, kind in (*self.driver.volumes, library):
            ops.append({"op": "add", "path": "/spec/template/spec/volumes/-",
                        "value": {"name": volume, "hostPath": {"path": path, "type": kind}}})  # fmt: skip
            target = DRIVER_LIBRARY if volume == "fake-nvml" else path
            ops.append({"op": "add", "path": f"{container}/volumeMounts/-",
                        "value": {"name": volume, "mountPath": target, "readOnly": volume != "sim-gpu"}})  # fmt: skip
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(REPO / "deploy/overlays/standalone", directory)],
            "images": [{"name": "ghcr.io/migagent/migagent", "newName": name, "newTag": tag}],
            "configMapGenerator": [{"name": "migagent-layouts", "namespace": AGENT_NS, "behavior": "replace",
                                    "files": ["mig-layouts.yaml"]}],
            "patches": [{"target": {"kind": "DaemonSet", "name": "migagent"}, "patch": yaml.safe_dump(ops)}],
        }
        (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
        return directory

    def plugin_daemonset(self, image: str | None = None) -> JsonDict:
        driver = self.driver
        command = [sys.executable, "-m", "migagent_sim.gpu_node", "run", "--state", str(driver.state),
                   "--lib", str(driver.library), "--", "nvidia-device-plugin"]  # fmt: skip
        env = {"MIG_STRATEGY": "mixed", "FAIL_ON_INIT_ERROR": "true", "DEVICE_LIST_STRATEGY": "envvar",
               "DEVICE_ID_STRATEGY": "uuid", "NVIDIA_MIG_MONITOR_DEVICES": "all",
               "DP_DISABLE_HEALTHCHECKS": "all"}  # as the simulated plugin pod has them (NVML events)
        volumes = [*driver.volumes, ("device-plugin", "/var/lib/kubelet/device-plugins", "Directory")]
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": PLUGIN_DS, "namespace": PLUGIN_NS, "labels": PLUGIN_LABELS},
            "spec": {
                "selector": {"matchLabels": PLUGIN_LABELS},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": PLUGIN_LABELS},
                    "spec": {
                        "priorityClassName": "system-node-critical",
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                        # the chart's default affinity; device-plugin-affinity.json adds the pause condition
                        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}
                                for k, v in (("feature.node.kubernetes.io/pci-10de.present", "true"),
                                             ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                                             ("nvidia.com/gpu.present", "true"))
                            ]}}},
                        "terminationGracePeriodSeconds": 5,
                        "containers": [{
                            "name": "nvidia-device-plugin-ctr",
                            "image": image or self.images["device-plugin"],
                            "imagePullPolicy": "Never",
                            "command": command,
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                            "securityContext": {"privileged": True},
                            "volumeMounts": [
                                {"name": n, "mountPath": p, "readOnly": n.startswith("sim-") and n != "sim-gpu"}
                                for n, p, _ in volumes
                            ],
                        }],
                        "volumes": [{"name": n, "hostPath": {"path": p, "type": t}} for n, p, t in volumes],
                    },
                },
            },
        }

    # -- the admin's view ---------------------------------------------------------------------

    def label(self, labels: dict[str, str | None]) -> None:
        self.admin.patch(f"/api/v1/nodes/{self.node.name}", {"metadata": {"labels": labels}}, content_type=MERGE)

    def labels(self) -> dict[str, str]:
        found: dict[str, str] = self.node.node()["metadata"].get("labels", {})
        return found

    def state(self) -> tuple[str | None, str | None]:
        labels = self.labels()
        return labels.get(MIG_CONFIG), labels.get(MIG_STATE)

    def wait_settled(self, layout: str, resources: dict[str, int], timeout_s: float = 180) -> None:
        """Until the agent reports `success` for `layout` and the kubelet's allocatable is `resources`."""

        def settled() -> bool:
            return self.state() == (layout, "success") and self.node.allocatable() == resources

        try:
            eventually(settled, f"{layout} success and allocatable {resources}", timeout_s=timeout_s, poll_s=0.2)
        except AssertionError as error:
            now = f"now {self.state()}, {self.node.allocatable()}"
            raise AssertionError(f"{error}; {now}\n{self.diagnosis()}") from None

    def diagnosis(self) -> str:
        """What an admin would look at: the pods, the recent events, the agent's log."""
        pods = self.plane.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        events = self.plane.kubectl("get", "events", "-A", "--sort-by=.lastTimestamp", check=False).stdout
        return f"{pods}\n{chr(10).join(events.splitlines()[-25:])}\n{self.agent_log()}"

    def pods(self, namespace: str, selector: str | None = None) -> list[JsonDict]:
        query = {"labelSelector": selector} if selector else {}
        items: list[JsonDict] = self.admin.get(f"/api/v1/namespaces/{namespace}/pods", **query)["items"]
        return items

    def agent_pod(self) -> JsonDict:
        pods = self.pods(AGENT_NS, AGENT_LABEL)
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
        return pods[0]

    def agent_log(self, lines: int = 30) -> str:
        try:
            name = self.agent_pod()["metadata"]["name"]
        except (AssertionError, HttpError):
            return "(no agent pod)"
        done = self.plane.kubectl("logs", "-n", AGENT_NS, name, f"--tail={lines}", check=False)
        return done.stdout + done.stderr

    # -- workloads ----------------------------------------------------------------------------

    def run_workload(self, name: str, resource: str | None, *, labels: dict[str, str] | None = None,
                     owner: JsonDict | None = None) -> JsonDict:  # fmt: skip
        """A pod on the node asking for one `resource` (None: no GPU), Running and Ready."""
        container: JsonDict = {
            "name": "main",
            "image": self.images["workload"],
            "imagePullPolicy": "Never",
            # PID 1 ignores SIGTERM unless it handles it: exit at once when evicted.
            "command": ["sh", "-c", 'trap "exit 0" TERM; echo "devices=$NVIDIA_VISIBLE_DEVICES";'
                        " while :; do sleep 1 & wait $!; done"],
            "readinessProbe": {"exec": {"command": ["sh", "-c", "exit 0"]}, "periodSeconds": 1},
        }
        if resource is not None:
            container["resources"] = {"limits": {resource: "1"}}
        metadata: JsonDict = {"name": name, "namespace": WORKLOAD_NS, "labels": labels or {}}
        if owner is not None:
            metadata["ownerReferences"] = [owner]
        spec = {"nodeName": self.node.name, "terminationGracePeriodSeconds": 5, "containers": [container]}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        created = self.admin.create(f"/api/v1/namespaces/{WORKLOAD_NS}/pods", pod)
        eventually(lambda: _ready(self.pod(WORKLOAD_NS, name)), f"pod {name} Ready", timeout_s=60, poll_s=0.2)
        return created

    def devices(self) -> dict[str, tuple[str, ...]]:
        """Pod name -> the MIG devices the real kubelet's PodResources says it holds (workloads only)."""
        client = PodResourcesClient(str(self.node.workdir / "kubelet/pod-resources/kubelet.sock"))
        return {e.name: e.device_ids for e in client.list() if e.namespace == WORKLOAD_NS}

    def pod(self, namespace: str, name: str) -> JsonDict | None:
        return self.admin.find(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def container_ids(self, namespace: str = WORKLOAD_NS) -> dict[str, str]:
        """Pod name -> its container's ID (containerd's): the same ID is the same process kept running."""
        return {
            p["metadata"]["name"]: p["status"]["containerStatuses"][0].get("containerID", "")
            for p in self.pods(namespace)
            if p["metadata"].get("deletionTimestamp") is None and p.get("status", {}).get("containerStatuses")
        }

    def clear_workloads(self) -> None:
        """The workloads, their budgets and their ReplicaSets: an owner left behind keeps its replica count,
        which the disruption controller reads (a budget then allowed nothing the next test expected)."""
        for collection in ("/api/v1", "/apis/policy/v1", "/apis/apps/v1"):
            kind = {"/api/v1": "pods", "/apis/policy/v1": "poddisruptionbudgets"}.get(collection, "replicasets")
            self.admin.request("DELETE", f"{collection}/namespaces/{WORKLOAD_NS}/{kind}")
        eventually(lambda: not self.pods(WORKLOAD_NS), "the workloads gone", timeout_s=60, poll_s=0.2)

    def reset(self) -> None:
        self.clear_workloads()
        if self.state() != ("start", "success") or self.node.allocatable() != START_RESOURCES:
            self.label({MIG_CONFIG: "start"})
            self.wait_settled("start", START_RESOURCES)


def _ready(pod: JsonDict | None) -> bool:
    conditions = (pod or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def mig_devices(state: Path) -> set[str]:
    """The MIG devices (compute instance UUIDs) the simulated GPUs have now."""
    fake = FakeNvml.load(state)
    return {ci.uuid for gpu in fake.state.gpus for gi in gpu.gpu_instances for ci in gi.compute_instances}


@contextmanager
def started_cluster(image: Path) -> Iterator[Cluster]:
    """The control plane bound to this machine's address (with the DaemonSet and node-lifecycle
    controllers and the scheduler), the node, and the agent and the plugin installed; all stopped after."""
    workdir = Path(tempfile.mkdtemp(prefix="migagent-realnode-"))
    (workdir / "plane").mkdir()
    controllers = (*CONTROLLERS, "daemonset", "nodelifecycle", "root-ca-cert-publisher")
    plane = ControlPlane(binaries_dir(), workdir / "plane", address=node_address(), controllers=controllers)
    node: RealNode | None = None
    try:
        plane.start()
        plane.start_scheduler()
        node = RealNode(node_binaries(), plane, workdir / "node", "gpu-node-1").start()
        cluster = Cluster(plane, node, workdir, image, tools_dir())
        cluster.install()
        yield cluster
    finally:
        if node is not None:
            node.stop()
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def replica_set(cluster: Cluster, name: str, *, replicas: int) -> JsonDict:
    """An owner reference to an (inert) ReplicaSet of `replicas`: the agent evicts only a pod whose
    controller brings it back elsewhere (a bare pod it refuses to delete for good)."""
    uid = ensure_owner(cluster.plane, "ReplicaSet", WORKLOAD_NS, name, replicas=replicas)
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": uid, "controller": True}


def gpu_pods(cluster: Cluster) -> None:
    """Pods on the GPU instance the change keeps, the one it destroys, and the GPU it leaves alone."""
    owner = replica_set(cluster, "inference", replicas=3)
    for name, resource in (("train-kept", "mig-4g.40gb"), ("infer-changed", "mig-2g.20gb"),
                           ("infer-untouched", "mig-7g.80gb")):  # fmt: skip
        cluster.run_workload(name, f"nvidia.com/{resource}", labels=APP, owner=owner)


def guarded_pod(cluster: Cluster, *, replicas: int) -> JsonDict:
    """inference-0 on the instance the change destroys, one of `replicas` of an (inert) ReplicaSet; the
    owner reference, for its other replicas."""
    owner = replica_set(cluster, "inference", replicas=replicas)
    cluster.run_workload("inference-0", "nvidia.com/mig-2g.20gb", labels=APP, owner=owner)
    return owner


def budget(cluster: Cluster, max_unavailable: int) -> None:
    """A PodDisruptionBudget over the inference pods, once the disruption controller computed it."""
    path = f"/apis/policy/v1/namespaces/{WORKLOAD_NS}/poddisruptionbudgets"
    cluster.admin.create(path, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "inference"},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": APP}},
    })  # fmt: skip
    eventually(lambda: cluster.admin.get(f"{path}/inference").get("status", {}).get("observedGeneration") == 1,
               "the disruption controller computed the budget", timeout_s=60, poll_s=0.2)  # fmt: skip


def when_gpus_change(cluster: Cluster, before: set[str]) -> None:
    eventually(lambda: mig_devices(cluster.driver.state) != before, "the GPUs changing", timeout_s=120, poll_s=0.02)


def kill_agent(cluster: Cluster) -> None:
    """SIGKILL to the agent's container (containerd's task): the kubelet restarts it in the same pod."""
    container = cluster.agent_pod()["status"]["containerStatuses"][0]["containerID"]
    cluster.node.ctr("tasks", "kill", "--signal", "SIGKILL", container.split("://", 1)[1])
