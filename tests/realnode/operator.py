"""deploy/overlays/gpu-operator on the real node: what the NVIDIA GPU Operator puts around the agent, each
where and as the operator does it, and the agent deployed by `kubectl apply -k` of that overlay.

- RuntimeClass `nvidia` (handler `nvidia`), as the operator creates it. containerd's `nvidia` runtime
  is runc itself (node.py), where the operator's toolkit registers nvidia-container-runtime, runc that
  first injects the driver's files: the test kustomization binds those (the library, nvidia-smi).
- The ClusterPolicy `cluster-policy` (its CRD with an open schema): MIG strategy mixed, mig-manager off,
  which the agent reads for `--mig-strategy=auto` and its sole-owner check.
- The driver's root at /run/nvidia/driver, where the operator's driver container mounts its own: the
  simulated driver's files (migagent_sim.gpu_node), the library under its versioned name.
- The toolkit at /usr/local/nvidia/toolkit: NVIDIA's nvidia-ctk (scripts/nvidia_ctk.sh) behind the
  wrapper script the toolkit's installer writes there. Its `nvidia-ctk.real` runs the binary inside
  the simulated driver's /proc and /dev (`migagent_sim.gpu_node run`): `nvidia-ctk system
  create-device-nodes` reads the driver's device majors from /proc/devices, which only the kernel
  module fills (without it: `failed to create devices info: no NVIDIA devices found`).
- The operator validator: a DaemonSet on nodes labelled `nvidia.com/gpu.deploy.operator-validator=true`
  whose init containers write the driver-ready and toolkit-ready markers in /run/nvidia/validations,
  as the validator's do once the driver and the toolkit work; the agent restarts it after a change.
- NVIDIA's device plugin as the operator deploys it: DaemonSet nvidia-device-plugin-daemonset in
  gpu-operator, on nodes labelled `nvidia.com/gpu.deploy.device-plugin=true`, runtime class nvidia,
  an init container waiting for toolkit-ready. The agent pauses it with that label and the real
  DaemonSet controller removes and recreates its pod.
- The node's labels: the operator's deploy labels (an admin's `dcgm-exporter=false` among them) and
  GFD's `nvidia.com/mig.capable`, the overlay's node selector (GFD itself does not run here).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from migagent_sim.fakelib.node import StateFileNode
from migagent_sim.gpu_node.files import DRIVER_VERSION, LIBRARY_DIR, write_tree
from migagent_sim.gpu_node.node_gpus import gpu_facts
from tests.realkube.control_plane import REPO
from tests.realkube.deployment import ensure_namespace
from tests.realnode.cluster import Cluster, JsonDict
from tests.waiting import eventually

NVIDIA_CTK_SCRIPT = "scripts/nvidia_ctk.sh"
OPERATOR_NS = "gpu-operator"
PLUGIN_DS = "nvidia-device-plugin-daemonset"
PLUGIN_SELECTOR = f"app={PLUGIN_DS}"
VALIDATOR_DS = "nvidia-operator-validator"
VALIDATOR_SELECTOR = f"app={VALIDATOR_DS}"
DEPLOY = "nvidia.com/gpu.deploy."
PAUSED = "paused-for-mig-change"
OPERATOR_LABELS = {
    "nvidia.com/mig.capable": "true",  # GFD's: the overlay's node selector
    f"{DEPLOY}driver": "true",
    f"{DEPLOY}container-toolkit": "true",
    f"{DEPLOY}operator-validator": "true",
    f"{DEPLOY}device-plugin": "true",
    f"{DEPLOY}gpu-feature-discovery": "true",
    f"{DEPLOY}dcgm": "true",
    f"{DEPLOY}dcgm-exporter": "false",  # an admin's: no exporter on this node
    f"{DEPLOY}mig-manager": "true",  # on every MIG-capable node; the ClusterPolicy turns it off
}
PAUSED_DURING_CHANGE = (f"{DEPLOY}device-plugin", f"{DEPLOY}gpu-feature-discovery", f"{DEPLOY}dcgm")
DRIVER_ROOT = "/run/nvidia/driver"
VALIDATIONS = "/run/nvidia/validations"
TOOLKIT = "/usr/local/nvidia/toolkit"
CDI_SPEC = "/var/run/cdi/management.nvidia.com-gpu.yaml"
# The toolkit installer's wrapper (nvidia-container-toolkit cmd/nvidia-ctk-installer/toolkit/installer),
# as it renders it for nvidia-ctk in the default toolkit directory.
CTK_WRAPPER = f'#! /bin/sh\nPATH={TOOLKIT}:$PATH \\\n\t{TOOLKIT}/nvidia-ctk.real \\\n\t\t"$@"\n'


def nvidia_ctk_dir() -> Path:
    """Where scripts/nvidia_ctk.sh puts NVIDIA's nvidia-ctk (its default, the same override)."""
    explicit = os.environ.get("MIGAGENT_NVIDIA_CTK_DIR")
    if explicit:
        return Path(explicit)
    script = (REPO / NVIDIA_CTK_SCRIPT).read_text(encoding="utf-8")
    version = re.search(r"^version=\$\{NVIDIA_CTK_VERSION:-(v[0-9.]+)\}$", script, re.MULTILINE)
    assert version is not None
    return Path.home() / ".cache/migagent/nvidia-ctk" / f"nvidia-container-toolkit-{version.group(1)}"


def nvidia_ctk_missing() -> str | None:
    if not os.access(nvidia_ctk_dir() / "nvidia-ctk", os.X_OK):
        return f"NVIDIA's nvidia-ctk is not built in {nvidia_ctk_dir()}: run {NVIDIA_CTK_SCRIPT}"
    return None


class GpuOperator:
    name = "gpu-operator"

    def __init__(self) -> None:
        self.waiting_message = ""
        """What the agent's Node condition said while the validator's markers were missing."""

    def install(self, cluster: Cluster) -> None:
        self._lay_out_driver_and_toolkit(cluster)
        ensure_namespace(cluster.plane, OPERATOR_NS)
        runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                         "handler": "nvidia"}  # fmt: skip
        cluster.plane.apply([runtime_class, _cluster_policy_crd()])
        policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                  "spec": {"mig": {"strategy": "mixed"}, "migManager": {"enabled": False}}}  # fmt: skip
        eventually(lambda: _applied(cluster, policy), "the ClusterPolicy created (its CRD established)", timeout_s=60)
        cluster.label(OPERATOR_LABELS)
        cluster.plane.apply([self._plugin_daemonset(cluster)])
        cluster.deploy_agent(self.name, [])
        # No markers yet: the agent says in its Node condition what it waits for, then the validator runs.
        eventually(lambda: self._waiting(cluster), "the agent waiting for the operator's markers", timeout_s=180)
        cluster.plane.apply([_validator_daemonset(cluster.images["workload"])])

    def remove(self, cluster: Cluster) -> None:
        cluster.remove_daemonset(OPERATOR_NS, VALIDATOR_DS, VALIDATOR_SELECTOR)
        cluster.remove_daemonset(OPERATOR_NS, PLUGIN_DS, PLUGIN_SELECTOR)
        rbac = REPO / "deploy/overlays/gpu-operator/operator-rbac.yaml"
        cluster.plane.kubectl("delete", "--ignore-not-found", "-f", str(rbac))
        cluster.label(dict.fromkeys(OPERATOR_LABELS))
        cluster.node.run("rm", "-rf", VALIDATIONS)

    def _waiting(self, cluster: Cluster) -> bool:
        conditions = cluster.node.node().get("status", {}).get("conditions", [])
        for condition in conditions:
            if condition["type"] == "MigConfigReady" and condition.get("reason") == "WaitingForDriver":
                self.waiting_message = condition.get("message", "")
                return True
        return False

    def _lay_out_driver_and_toolkit(self, cluster: Cluster) -> None:
        """The driver's root and the toolkit's directory on the node (bound there from the work directory,
        as the driver container mounts its root), written once per session."""
        driver, toolkit = cluster.workdir / "driver-root", cluster.workdir / "toolkit-root"
        if not driver.exists():
            write_tree(driver, gpu_facts(StateFileNode(cluster.driver.state, spec=None).current_state()),
                       library_dir=cluster.driver.library)  # fmt: skip
            # As the driver installs it: the versioned file, the soname a link to it (nvidia-ctk finds
            # the driver's libraries by the version the link resolves to, else `failed to get libcuda.so
            # parent directory: unexpected version detected: 580.65.06 != 1`).
            libraries = driver / LIBRARY_DIR
            versioned = libraries / f"libnvidia-ml.so.{DRIVER_VERSION}"
            shutil.copy2(cluster.driver.library / "libnvidia-ml.so.1", versioned)
            (libraries / "libnvidia-ml.so.1").unlink()
            (libraries / "libnvidia-ml.so.1").symlink_to(versioned.name)
            directory = toolkit / "toolkit"
            directory.mkdir(parents=True)
            shutil.copy2(nvidia_ctk_dir() / "nvidia-ctk", directory / "nvidia-ctk.bin")
            node_run = [sys.executable, "-m", "migagent_sim.gpu_node", "run", "--state", str(cluster.driver.state),
                        "--lib", str(cluster.driver.library), "--"]  # fmt: skip
            scripts = {
                "nvidia-ctk": CTK_WRAPPER,
                "nvidia-ctk.real": "#!/bin/sh\n# NVIDIA's nvidia-ctk, in the simulated driver's /proc and /dev\n"
                f'exec {" ".join(node_run)} "$(dirname "$0")/nvidia-ctk.bin" "$@"\n',
            }
            for name, text in scripts.items():
                (directory / name).write_text(text, encoding="utf-8")
                (directory / name).chmod(0o755)
        binds = ((driver, DRIVER_ROOT), (toolkit, "/usr/local/nvidia"))
        script = " && ".join(f"mkdir -p {at} && {{ mountpoint -q {at} || mount --bind {source} {at}; }}"
                             for source, at in binds)  # fmt: skip
        cluster.node.run("sh", "-c", script)

    def _plugin_daemonset(self, cluster: Cluster) -> JsonDict:
        """The standalone plugin's pod spec (the plugin in the simulated driver's files), deployed as the
        operator does: its name, labels and namespace, its node selector, runtime class and init container."""
        daemonset = cluster.plugin_daemonset()
        labels = {"app": PLUGIN_DS}
        daemonset["metadata"] = {"name": PLUGIN_DS, "namespace": OPERATOR_NS, "labels": labels}
        daemonset["spec"]["selector"] = {"matchLabels": labels}
        pod = daemonset["spec"]["template"]
        pod["metadata"] = {"labels": labels}
        spec = pod["spec"]
        del spec["affinity"]
        spec["nodeSelector"] = {f"{DEPLOY}device-plugin": "true"}
        spec["runtimeClassName"] = "nvidia"
        wait = f"until [ -f {VALIDATIONS}/toolkit-ready ]; do echo waiting for the toolkit; sleep 1; done"
        spec["initContainers"] = [_busybox("toolkit-validation", cluster.images["workload"], wait, ("validations",))]
        spec["volumes"].append(_host_path("validations", VALIDATIONS))
        return daemonset


GPU_OPERATOR = GpuOperator()


def _applied(cluster: Cluster, obj: JsonDict) -> bool:
    try:
        cluster.plane.apply([obj])
    except AssertionError:
        return False
    return True


def _host_path(name: str, path: str) -> JsonDict:
    return {"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}


def _busybox(name: str, image: str, script: str, mounts: tuple[str, ...]) -> JsonDict:
    paths = {"validations": VALIDATIONS, "driver": DRIVER_ROOT, "toolkit": TOOLKIT}
    return {
        "name": name, "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", script],
        "volumeMounts": [{"name": m, "mountPath": paths[m], "readOnly": m != "validations",
                          **({"mountPropagation": "HostToContainer"} if m == "driver" else {})} for m in mounts],
    }  # fmt: skip


def _validator_daemonset(image: str) -> JsonDict:
    """The operator validator: its init containers check the driver and the toolkit and write their markers."""
    labels = {"app": VALIDATOR_DS}
    driver = f"[ -e {DRIVER_ROOT}/{LIBRARY_DIR}/libnvidia-ml.so.1 ] && : > {VALIDATIONS}/driver-ready"
    toolkit = f"[ -x {TOOLKIT}/nvidia-ctk ] && : > {VALIDATIONS}/toolkit-ready"
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": VALIDATOR_DS, "namespace": OPERATOR_NS, "labels": labels},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {f"{DEPLOY}operator-validator": "true"},
            "runtimeClassName": "nvidia",
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 5,
            "initContainers": [_busybox("driver-validation", image, driver, ("driver", "validations")),
                               _busybox("toolkit-validation", image, toolkit, ("toolkit", "validations"))],
            "containers": [_busybox("nvidia-operator-validator", image, 'echo all validations are successful;'
                                    ' trap "exit 0" TERM; while :; do sleep 1 & wait $!; done', ())],
            "volumes": [_host_path("validations", VALIDATIONS), _host_path("driver", DRIVER_ROOT),
                        _host_path("toolkit", TOOLKIT)],
        }}},
    }  # fmt: skip


def _cluster_policy_crd() -> JsonDict:
    names = {"plural": "clusterpolicies", "singular": "clusterpolicy", "kind": "ClusterPolicy",
             "listKind": "ClusterPolicyList"}  # fmt: skip
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterpolicies.nvidia.com"},
        "spec": {"group": "nvidia.com", "scope": "Cluster", "names": names,
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}]},
    }  # fmt: skip


def operator_pod_uids(cluster: Cluster, selector: str) -> set[str]:
    pods = cluster.pods(OPERATOR_NS, selector)
    return {p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def cdi_spec(cluster: Cluster) -> str | None:
    """The management CDI spec on the node, as the agent's nvidia-ctk wrote it; None when absent."""
    try:
        return cluster.node.run("cat", CDI_SPEC).stdout
    except subprocess.CalledProcessError:
        return None
