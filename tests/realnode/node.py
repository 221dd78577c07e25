"""A real node for the tests: containerd and the kubelet (scripts/real_node.sh) against the real control
plane of tests/realkube, started on this machine and leaving nothing behind.

What it takes here (docs/testing.md, "A real node", has the messages):
- its own mount namespace: containerd is its first process, started by `unshare --mount` after a
  shell has laid overlays on /var/lib, /var/log and /run (their writes land in the work directory)
  and bound /var/lib/kubelet from it; the kubelet joins it with nsenter. The paths pods mount
  (/var/lib/kubelet/device-plugins, pod-resources, the agent's /var/lib/migagent) are the real ones,
  and the host sees none of it; the namespace goes when its last process does.
- one cgroup, `/<name>` in every hierarchy, is the kubelet's cgroupRoot; containerd and the
  kubelet are moved into `/<name>/node` before they exec, so every process of the node (shims and
  containers included) is under it and stopping kills them all, then removes the tree.
- cgroup v1: `failCgroupV1: false`; no CAP_SYS_RESOURCE: containerd's `restrict_oom_score_adj`;
  no registry: local images only, the sandbox image included (images.py); a CNI bridge with its own
  name on a /24 nothing else here routes (pod_network.py), removed at the end, and the kubelet's
  iptables chains too (firewall.py).

`reboot()` is the closest thing to a node's reboot: every process of the node killed, /run emptied,
then containerd and the kubelet started again on the same disk (the kubelet's and the agent's
directories, containerd's images).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from typing import IO, Any

import grpc
import yaml

from tests.realkube.control_plane import REPO, ControlPlane, free_port
from tests.realkube.rest import HttpError
from tests.realnode import firewall, pod_network
from tests.waiting import eventually

CGROUPS = Path("/sys/fs/cgroup")
OVERLAID = ("var/lib", "var/log", "run", "usr/local")  # /usr/local: where the GPU Operator's toolkit goes
NODE_SCRIPT = "scripts/real_node.sh"
NODE_BINARIES = ("kubelet", "pause", "busybox", "bin/containerd", "bin/containerd-shim-runc-v2", "bin/ctr", "bin/runc",
                 "cni/bridge", "cni/host-local", "cni/loopback")  # fmt: skip
JsonDict = dict[str, Any]


def node_binaries() -> Path:
    """Where scripts/real_node.sh puts the node (same default, same override; Debian's containerd unless
    MIGAGENT_CONTAINERD=source)."""
    explicit = os.environ.get("MIGAGENT_REAL_NODE_DIR")
    if explicit:
        return Path(explicit)
    kube = (REPO / "scripts/control_plane/kubernetes/go.mod").read_text(encoding="utf-8")
    version = re.search(r"^require k8s\.io/kubernetes (v[0-9.]+)$", kube, re.MULTILINE)
    assert version is not None
    runtime = "containerd-debian"
    if os.environ.get("MIGAGENT_CONTAINERD") == "source":
        pinned = (REPO / "scripts/real_node/containerd/go.mod").read_text(encoding="utf-8")
        found = re.search(r"^require github\.com/containerd/containerd/v2 (v[0-9.]+)$", pinned, re.MULTILINE)
        assert found is not None
        runtime = f"containerd-{found.group(1)}"
    return Path.home() / ".cache/migagent/real-node" / f"kubernetes-{version.group(1)}-{runtime}"


def node_binaries_missing() -> str | None:
    directory = node_binaries()
    absent = [name for name in NODE_BINARIES if not os.access(directory / name, os.X_OK)]
    if absent or not (directory / "STAMP").is_file():
        return f"the real node is not built in {directory} (no {', '.join(absent) or 'STAMP'}): run {NODE_SCRIPT}"
    return None


def cri_ready(socket: Path) -> bool:
    """Whether the CRI runtime on `socket` answers Version, the first call a kubelet makes (an empty
    request: no CRI types needed)."""
    if not socket.exists():
        return False
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        try:
            channel.unary_unary("/runtime.v1.RuntimeService/Version")(b"", timeout=5)
        except grpc.RpcError:
            return False
    return True


def node_address() -> str:
    """This machine's first global IPv4 address: pods reach the API server there (not on loopback)."""
    for link in pod_network.ip_json("addr", "show", "scope", "global"):
        for address in link.get("addr_info", []):
            return str(address["local"])
    raise RuntimeError("no global IPv4 address on this machine: a real node needs one for its pods")


class RealNode:
    def __init__(self, bin_dir: Path, plane: ControlPlane, workdir: Path, name: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = bin_dir
        self.plane = plane
        self.workdir = workdir
        self.name = name
        token = secrets.token_hex(4)
        self.cgroup = f"migagent-node-{token}"
        self.bridge = f"mg{token}"  # a link name has at most 15 characters
        self.socket = workdir / "containerd.sock"
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []
        self._chains_before = firewall.kube_chains()
        self._write_configs()

    # -- configuration ------------------------------------------------------------------------

    def _write_configs(self) -> None:
        work = self.workdir
        for sub in ("kubelet", "containerd", "cni/net.d", "cni/ipam", *(f"root/{d}/upper" for d in OVERLAID),
                    *(f"root/{d}/work" for d in OVERLAID)):  # fmt: skip
            (work / sub).mkdir(parents=True, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        (work / "containerd.toml").write_text(
            "version = 2\n"
            # its state under /run (the namespace's, emptied by a reboot), its images on disk
            f'root = "{work}/containerd/root"\nstate = "/run/containerd-node"\n'
            f'[grpc]\naddress = "{self.socket}"\n'
            # no CAP_SYS_RESOURCE for root here: runc cannot raise a container's oom_score_adj
            f'[{cri}]\nsandbox_image = "localhost/pause:1"\nrestrict_oom_score_adj = true\n'
            f'[{cri}.cni]\nbin_dir = "{self.bin_dir}/cni"\nconf_dir = "{work}/cni/net.d"\n'
            f'[{cri}.containerd.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
            f'[{cri}.containerd.runtimes.runc.options]\nBinaryName = "{self.bin_dir}/bin/runc"\n'
            # The GPU Operator's RuntimeClass `nvidia`: its toolkit registers nvidia-container-runtime
            # (runc that first injects the driver's files) under that name; here it is runc itself.
            f'[{cri}.containerd.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
            f'[{cri}.containerd.runtimes.nvidia.options]\nBinaryName = "{self.bin_dir}/bin/runc"\n',
            encoding="utf-8",
        )
        serving = self.plane.pki.issue(f"kubelet-{self.name}", self.name, server=True, ips=(self.plane.address,))
        identity = self.plane.node_identity(self.name)
        self.plane.write_kubeconfig(work / "kubelet.kubeconfig", identity)
        (work / "kubelet.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # this machine's cgroups are v1
            "failSwapOn": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{self.cgroup}",
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.plane.address,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzPort": 0,
            "tlsCertFile": str(serving.cert),
            "tlsPrivateKeyFile": str(serving.key),
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(self.plane.pki.ca)}},
            "authorization": {"mode": "AlwaysAllow"},  # any client certificate of the cluster CA (the API server)
            # Imported images have no registry to come back from: never collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "resolvConf": "",
            "nodeStatusUpdateFrequency": "2s",
            "syncFrequency": "5s",
        }), encoding="utf-8")  # fmt: skip

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> RealNode:
        try:
            self._make_cgroups()
            self._lay_pod_network()
            self._start_containerd()
            self._start_kubelet()
            eventually(self.ready, f"Node {self.name} Ready:\n{self.log_tail('kubelet')}", timeout_s=120, poll_s=0.25)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """The kubelet before containerd (else it keeps asking a gone runtime), then every process left in
        the node's cgroup (shims, containers), the bridge, the cgroups; the namespace goes with them."""
        self._terminate("kubelet")
        self._terminate("containerd")
        self._kill_cgroup_members()
        pod_network.remove_bridge(self.bridge)
        firewall.remove_new_chains(self._chains_before)
        self._remove_cgroups()
        for log in self._logs:
            log.close()
        self._logs.clear()

    def reboot(self) -> None:
        """Every process of the node killed at once (no graceful stop: a power cycle), /run emptied, and
        containerd and the kubelet started again on the same disk."""
        for name in ("kubelet", "containerd"):
            process = self._processes.pop(name, None)
            if process is not None:
                process.kill()
                process.wait()
        self._kill_cgroup_members()
        shutil.rmtree(self.workdir / "root/run")
        for sub in ("upper", "work"):
            (self.workdir / "root/run" / sub).mkdir(parents=True)
        self._start_containerd()
        self._start_kubelet()

    def _lay_pod_network(self) -> None:
        """A /24 nothing here routes yet, on a bridge made now (pod_network.py says why), and the CNI
        config that puts every pod on it."""
        subnet = pod_network.free_pod_subnet(pod_network.taken_networks())
        pod_network.make_bridge(self.bridge, subnet)
        (self.workdir / "cni/net.d/10-bridge.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0",
            "name": "migagent-realnode",
            "plugins": [{
                "type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": False,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": str(subnet)}]], "routes": [{"dst": "0.0.0.0/0"}],
                         "dataDir": str(self.workdir / "cni/ipam")},
            }],
        }), encoding="utf-8")  # fmt: skip

    def _terminate(self, name: str) -> None:
        process = self._processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("ab")
        self._logs.append(log)
        env = {**os.environ, "PATH": f"{self.bin_dir}/bin:{os.environ.get('PATH', os.defpath)}"}
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._processes[name] = process
        return process

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.workdir / f"{name}.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _enter_cgroup(self) -> str:
        """Shell that moves itself into the node's cgroup in every hierarchy (then `exec`s)."""
        return "".join(f"echo $$ > {h}/{self.cgroup}/node/cgroup.procs; " for h in _hierarchies())

    def _start_containerd(self) -> None:
        work = self.workdir
        overlays = "".join(
            f"mount -t overlay overlay -o lowerdir=/{d},upperdir={work}/root/{d}/upper,workdir={work}/root/{d}/work"
            f" /{d}; "
            for d in OVERLAID
        )
        script = (
            "set -e; mount --make-rprivate /; " + overlays
            + f"mkdir -p /var/lib/kubelet; mount --bind {work}/kubelet /var/lib/kubelet; "
            # shared within the namespace, as systemd makes / on a node: containerd refuses a
            # HostToContainer or Bidirectional hostPath whose mount is private (the gpu-operator overlay's)
            + "mount --make-rshared /; "
            + self._enter_cgroup() + f'exec containerd --config {work}/containerd.toml'
        )  # fmt: skip
        self.socket.unlink(missing_ok=True)  # a killed containerd leaves it: not a sign of the new one
        process = self._spawn("containerd", ["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
        # Its socket is up a moment before its CRI: a kubelet started in between exits at once ("validate CRI
        # v1 runtime API ...: server is not initialized yet"), and after a reboot nothing started it again.
        eventually(lambda: cri_ready(self.socket) or process.poll() is not None, "containerd's CRI", timeout_s=60)
        if process.poll() is not None:
            raise RuntimeError(f"containerd exited with {process.returncode}:\n{self.log_tail('containerd')}")

    def _start_kubelet(self) -> None:
        containerd = self._processes["containerd"]
        work = self.workdir
        script = self._enter_cgroup() + (
            f"exec {self.bin_dir}/kubelet --config={work}/kubelet.yaml --kubeconfig={work}/kubelet.kubeconfig"
            f" --hostname-override={self.name} --node-ip={self.plane.address} --v=2"
        )
        self._spawn("kubelet", ["nsenter", f"--mount=/proc/{containerd.pid}/ns/mnt", "sh", "-c", script])

    def ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        """containerd's own client, in the node's mount namespace (where its fifos and /run are)."""
        return self.run(f"{self.bin_dir}/bin/ctr", f"--address={self.socket}", "--namespace=k8s.io", *args)

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A command in the node's mount namespace: the paths as the node's pods see them."""
        enter = ["nsenter", f"--mount=/proc/{self._processes['containerd'].pid}/ns/mnt"]
        return subprocess.run([*enter, *argv], capture_output=True, text=True, check=True, timeout=300)

    # -- cgroups ------------------------------------------------------------------------------

    def _make_cgroups(self) -> None:
        for hierarchy in _hierarchies():
            for path in (hierarchy / self.cgroup, hierarchy / self.cgroup / "node"):
                path.mkdir(exist_ok=True)
                if hierarchy.name == "cpuset":  # an empty cpuset takes no process
                    for knob in ("cpuset.cpus", "cpuset.mems"):
                        (path / knob).write_text((path.parent / knob).read_text(encoding="ascii"), encoding="ascii")

    def _members(self) -> set[int]:
        found: set[int] = set()
        for hierarchy in _hierarchies():
            root = hierarchy / self.cgroup
            if root.is_dir():
                for procs in root.rglob("cgroup.procs"):
                    found.update(int(pid) for pid in procs.read_text(encoding="ascii").split())
        return found

    def _kill_cgroup_members(self) -> None:
        def gone() -> bool:
            members = self._members()
            for pid in members:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGKILL)
            return not members

        eventually(gone, f"every process in cgroup /{self.cgroup} ended", timeout_s=30, poll_s=0.1)

    def _remove_cgroups(self) -> None:
        for hierarchy in _hierarchies():
            root = hierarchy / self.cgroup
            if root.is_dir():
                for path in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    path.rmdir()
                root.rmdir()

    # -- what the API server says -------------------------------------------------------------

    def node(self) -> JsonDict:
        return self.plane.rest(self.plane.admin).get(f"/api/v1/nodes/{self.name}")

    def ready(self) -> bool:
        try:
            conditions = self.node().get("status", {}).get("conditions", [])
        except HttpError:
            return False
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def allocatable(self, prefix: str = "nvidia.com/") -> dict[str, int]:
        """The kubelet's allocatable extended resources, non-zero ones only."""
        status = self.node().get("status", {}).get("allocatable", {})
        return {k: int(v) for k, v in status.items() if k.startswith(prefix) and int(v) > 0}


def _hierarchies() -> list[Path]:
    return sorted(p for p in CGROUPS.iterdir() if p.is_dir() and (p / "cgroup.procs").exists())


