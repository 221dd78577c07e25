"""The two MIG managers as processes on the simulated node, each deployed as its makers ship it.

NVIDIA's `nvidia-mig-manager` v0.10.0 runs as the GPU Operator runs it on a node whose driver is the
operator's driver container (the `-hopper` example DaemonSet's environment): NODE_NAME, CONFIG_FILE,
WITH_REBOOT=false, WITH_SHUTDOWN_HOST_GPU_CLIENTS=false (what the operator's entrypoint exports when
the driver is not preinstalled on the host), GPU_CLIENTS_FILE (the operator's default list; unused
when host clients are not shut down), HOST_ROOT_MOUNT, DEFAULT_GPU_CLIENTS_NAMESPACE=gpu-operator,
and RECONFIGURE_SCRIPT, its own `reconfigure-mig.sh` (v0.10.0 still runs the script, which calls
`kubectl` and `nvidia-mig-parted` from PATH). It authenticates as the `nvidia-mig-manager` service
account with the operator's grants (`mig_manager_rbac`). Host services: with
WITH_SHUTDOWN_HOST_GPU_CLIENTS=false the script stops none, and `HOST_ROOT_MOUNT` is an empty
directory, so no systemd override file exists to persist the layout into (the script skips that
step when the file is absent, as on a node without the host-side service). CDI is off (v0.10.0's
default).

migagent runs `python -m migagent agent` with the gpu-operator overlay's flags that apply here
(`--device-plugin-restart=gpu-operator`, `--operator-namespace=gpu-operator`,
`--restart-operator-validator`), as the overlay's service account under its RBAC and admission
policies; everything else at its defaults but `--drain-timeout` (the bench's, given in the table).

Both reach the GPUs only through the fake libnvidia-ml.so.1 (and the fake nvidia-smi) on the node
in MIGAGENT_FAKE_NVML_STATE, each started by the same `GpuHost` launcher.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from bench.head_to_head.node import OPERATOR_NAMESPACE, SimulatedNode
from tests.realkube.control_plane import IDENTITY_POD_LABEL, ControlPlane, Identity
from tests.realkube.deployment import GPU_OPERATOR, Deployer

JsonDict = dict[str, Any]
MIG_MANAGER_ACCOUNT = "nvidia-mig-manager"
GPU_CLIENTS = (
    "nvsm.service", "nvsm-mqtt.service", "nvsm-core.service", "nvsm-api-gateway.service",
    "nvsm-notifier.service", "nv_peer_mem.service", "nvidia-dcgm.service", "dcgm.service", "dcgm-exporter.service",
)  # fmt: skip
"""The GPU Operator's default-gpu-clients list (docs/mig-parted.md §8)."""


@dataclass(frozen=True)
class GpuHost:
    """How a manager's processes reach the simulated GPUs: `python -m migagent_sim.gpu_node run`, which
    puts the fake libnvidia-ml.so.1 and nvidia-smi first on LD_LIBRARY_PATH and PATH, names the node's
    state file, and mounts the driver's files NVIDIA's tools read (/proc/modules, the PCI tree, the
    MIG capability files) in a private mount namespace."""

    fake_nvml_dir: Path
    """libnvidia-ml.so.1 and nvidia-smi, as scripts/build_fake_nvml.sh builds them."""
    nvidia_tools_dir: Path
    """nvidia-mig-manager, nvidia-mig-parted and reconfigure-mig.sh (scripts/nvidia_tools.sh)."""

    def command(self, state: Path, argv: list[str]) -> list[str]:
        """`argv` on the simulated node whose state file is `state`."""
        run = [sys.executable, "-m", "migagent_sim.gpu_node", "run", f"--state={state}"]
        return [*run, f"--lib={self.fake_nvml_dir}", "--", *argv]

    def env(self, *, path_first: tuple[Path, ...] = ()) -> dict[str, str]:
        return {
            "PATH": os.pathsep.join([*(str(d) for d in path_first), os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": os.environ.get("HOME", "/root"),
        }


class ManagerProcess:
    """One manager's process group (a container: killing it kills everything it started)."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self._log: IO[bytes] = log_path.open("ab")
        self.log_path = log_path
        self._process = subprocess.Popen(
            argv, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def kill(self) -> None:
        """SIGKILL, as a container runtime kills a container whose pod is deleted with grace 0."""
        self._signal(signal.SIGKILL)
        self._process.wait()
        self._log.close()

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace_s`, as a pod deletion does."""
        self._signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._process.wait()
        self._log.close()

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, sig)


class Manager(Protocol):
    name: str

    def install(self, plane: ControlPlane) -> None:
        """Its RBAC (and policies) on the control plane; once per control plane."""
        ...

    def start(self, node: SimulatedNode, workdir: Path) -> ManagerProcess:
        """A new process on `node` (as a restarted container: `workdir` keeps what its host paths keep)."""
        ...

    def before_change(self, node: SimulatedNode) -> str | None:
        """What the admin does before writing the first label; why the change is given up, or None."""
        ...

    def after_change(self, node: SimulatedNode) -> None:
        """What the admin does once the node has settled."""
        ...


class LabelOnly:
    """The admin only writes the label: what both managers are made for."""

    def before_change(self, node: SimulatedNode) -> str | None:
        return None

    def after_change(self, node: SimulatedNode) -> None:
        return None


def mig_manager_rbac() -> list[JsonDict]:
    """The GPU Operator's grants to mig-manager (assets/state-mig-manager 0100-0310)."""
    namespace = OPERATOR_NAMESPACE
    subject = {"kind": "ServiceAccount", "name": MIG_MANAGER_ACCOUNT, "namespace": namespace}
    role_rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list", "update", "patch"]},
    ]
    cluster_rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]
    meta = {"name": MIG_MANAGER_ACCOUNT}
    rbac = "rbac.authorization.k8s.io/v1"
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "name": MIG_MANAGER_ACCOUNT}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "namespace": namespace}},
        {"apiVersion": rbac, "kind": "Role", "metadata": {**meta, "namespace": namespace}, "rules": role_rules},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": meta, "rules": cluster_rules},
        {
            "apiVersion": rbac, "kind": "RoleBinding", "metadata": {**meta, "namespace": namespace},
            "roleRef": {**role_ref, "kind": "Role"}, "subjects": [subject],
        },
        {
            "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": meta,
            "roleRef": {**role_ref, "kind": "ClusterRole"}, "subjects": [subject],
        },
    ]  # fmt: skip


def _kubeconfig(plane: ControlPlane, path: Path, *, namespace: str, account: str, node: str) -> Path:
    """A kubeconfig with a token for `account` bound to its pod on `node`, as a pod's projected token."""
    token = plane.bound_token(namespace=namespace, service_account=account, node=node)
    return plane.write_kubeconfig(path, Identity(f"system:serviceaccount:{namespace}:{account}", token=token))


class NvidiaMigManager(LabelOnly):
    name = "mig-manager"

    def __init__(self, host: GpuHost) -> None:
        self.host = host

    def install(self, plane: ControlPlane) -> None:
        plane.apply(mig_manager_rbac())

    def start(self, node: SimulatedNode, workdir: Path) -> ManagerProcess:
        workdir.mkdir(parents=True, exist_ok=True)
        host_root = workdir / "host"
        host_root.mkdir(exist_ok=True)
        script = workdir / "reconfigure-mig.sh"
        script.write_bytes((self.host.nvidia_tools_dir / "reconfigure-mig.sh").read_bytes())
        script.chmod(0o755)
        clients = workdir / "clients.yaml"
        clients.write_text("version: v1\nsystemd-services:\n" + "".join(f"  - {s}\n" for s in GPU_CLIENTS))
        kubeconfig = _kubeconfig(
            node.plane,
            workdir / "kubeconfig",
            namespace=OPERATOR_NAMESPACE,
            account=MIG_MANAGER_ACCOUNT,
            node=node.name,
        )
        env = {
            **self.host.env(path_first=(self.host.nvidia_tools_dir,)),
            "KUBECONFIG": str(kubeconfig),
            "NODE_NAME": node.name,
            "CONFIG_FILE": str(node.layout_file),
            "RECONFIGURE_SCRIPT": str(script),
            "GPU_CLIENTS_FILE": str(clients),
            "HOST_ROOT_MOUNT": str(host_root),
            "DEFAULT_GPU_CLIENTS_NAMESPACE": OPERATOR_NAMESPACE,
            "WITH_REBOOT": "false",
            "WITH_SHUTDOWN_HOST_GPU_CLIENTS": "false",
        }
        argv = self.host.command(node.state_path, [str(self.host.nvidia_tools_dir / "nvidia-mig-manager")])
        return ManagerProcess(argv, env, workdir / f"{self.name}.log")


class DrainedMigManager(NvidiaMigManager):
    """mig-manager with the procedure NVIDIA gives admins (gpu-operator#262): cordon and drain the node,
    write the label, wait for `success`, uncordon. The drain is `kubectl drain --ignore-daemonsets`
    (evictions, so budgets hold) with the same timeout as migagent's drain; when it times out the admin
    uncordons and does not write the label."""

    name = "mig-manager+drain"

    def __init__(self, host: GpuHost, *, drain_timeout_s: float) -> None:
        super().__init__(host)
        self.drain_timeout_s = drain_timeout_s

    def before_change(self, node: SimulatedNode) -> str | None:
        done = node.plane.kubectl(
            "drain", node.name, "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={self.drain_timeout_s:g}s",
            f"--pod-selector=app.kubernetes.io/name!={IDENTITY_POD_LABEL}", check=False,
        )  # fmt: skip
        if done.returncode == 0:
            return None
        node.plane.kubectl("uncordon", node.name)
        return (done.stderr.strip().splitlines() or ["kubectl drain failed"])[-1]

    def after_change(self, node: SimulatedNode) -> None:
        node.plane.kubectl("uncordon", node.name)


class Migagent(LabelOnly):
    name = "migagent"

    def __init__(self, host: GpuHost, *, drain_timeout_s: float, deployer: Deployer | None = None) -> None:
        self.host = host
        self.drain_timeout_s = drain_timeout_s
        self._deployer = deployer
        self._account: tuple[str, str] | None = None

    def install(self, plane: ControlPlane) -> None:
        objects = (self._deployer or Deployer(plane)).install(GPU_OPERATOR)
        metadata = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]
        self._account = (metadata["namespace"], metadata["name"])

    def start(self, node: SimulatedNode, workdir: Path) -> ManagerProcess:
        assert self._account is not None, "install() first"
        namespace, account = self._account
        workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = _kubeconfig(
            node.plane, workdir / "kubeconfig", namespace=namespace, account=account, node=node.name
        )
        env = {
            **self.host.env(),
            "KUBECONFIG": str(kubeconfig),
            "NODE_NAME": node.name,
            "CONFIG_FILE": str(node.layout_file),
            # The pod's name and namespace (downward API): the node Lease's holder and namespace, the same
            # after a container restart, so a restarted agent takes its Lease back at once.
            "POD_NAME": f"{account}-{node.name}",
            "POD_NAMESPACE": namespace,
        }
        argv = [
            sys.executable, "-m", "migagent", "agent",
            f"--journal-dir={workdir / 'journal'}",
            f"--podresources-socket={node.socket_path}",
            "--device-plugin-restart=gpu-operator",
            f"--operator-namespace={OPERATOR_NAMESPACE}",
            "--restart-operator-validator",
            f"--drain-timeout={self.drain_timeout_s:g}",
        ]  # fmt: skip
        return ManagerProcess(self.host.command(node.state_path, argv), env, workdir / f"{self.name}.log")


def nvml_client_start_s(host: GpuHost, state: Path, *, runs: int = 3) -> float:
    """Median seconds of one `nvidia-mig-parted export` on the node in `state`: mostly what starting the simulator in a
    Go process costs here (the fake library starts a Python interpreter and imports the simulator), where
    a real driver's NVML starts in milliseconds. mig-manager pays it for each of its mig-parted runs."""
    mig_parted = host.nvidia_tools_dir / "nvidia-mig-parted"
    loop = f"TIMEFORMAT=%R; for i in $(seq {runs}); do time {mig_parted} export >/dev/null; done"
    done = subprocess.run(
        host.command(state, ["bash", "-c", loop]), env=host.env(), capture_output=True, text=True, check=True
    )
    times = sorted(float(line) for line in done.stderr.split() if line.replace(".", "", 1).isdigit())
    if len(times) != runs:
        raise RuntimeError(f"timing nvidia-mig-parted export failed: {done.stderr.strip()[-500:]}")
    return times[len(times) // 2]
