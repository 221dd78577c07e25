"""A real Kubernetes control plane on loopback for the tests: etcd, kube-apiserver, kube-controller-manager,
and, for the tests that ask for it (`start_scheduler`, the demand scenarios), kube-scheduler.

The binaries come from scripts/control_plane.sh (built from Go modules at pinned versions, cached
outside the repository). The API server runs as a cluster's does where it matters to the agent:
- authentication by client certificate (the admin, each kubelet as `system:node:<name>`) and by
  service-account tokens signed by the server, with the pod-bound claims: a token from the
  TokenRequest API bound to a Pod carries `authentication.kubernetes.io/node-name` of the pod's node;
- authorization `Node,RBAC`; admission with NodeRestriction and ValidatingAdmissionPolicy;
- kube-controller-manager with the controllers the scenarios meet: `disruption` (PodDisruptionBudget
  status, which decides a 429 on eviction), `garbage-collector` (dependents of a deleted owner),
  `namespace` (deleting a namespace deletes its content), `serviceaccount` (each namespace's
  `default` account, without which the ServiceAccount admission plugin refuses pods) and
  `validatingadmissionpolicy-status` (type-checks each policy against the schemas and reports
  warnings in its status).
  Not started, on purpose: `daemonset` (its pods would be bound to nodes where no kubelet runs them;
  the simulated kubelet plays the device plugin DaemonSet's part, creating its pod when the node's
  deploy label lets it, as the fast suite's simulator does), `node-lifecycle` (with no real kubelet
  heartbeat it would taint every node unreachable and then evict the pods, the agent's own pod
  among them, which would invalidate its bound token). kube-scheduler runs only once a test asks
  for it (`start_scheduler`): the other scenarios bind pods to their node themselves, as
  `spec.nodeName`, and the demand scenarios let the scheduler decide. It runs with the admin's
  kubeconfig, leader election off, and a back-off of one second for pods it could not place, so a
  pod is placed soon after a node starts offering what it asks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml
from kubernetes import client

from migagent_sim.deadline import Deadline
from tests.realkube.certs import CertPair, Pki
from tests.realkube.rest import HttpError, Rest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "scripts/control_plane.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ISSUER = "https://kubernetes.default.svc.cluster.local"
IDENTITY_POD_LABEL = "migagent-test-identity"
"""The label of the pods the agents' tokens are bound to (the harness's, not a scenario's)."""
CONTROLLERS = (
    "disruption",
    "garbage-collector-controller",
    "namespace",
    "serviceaccount",
    "validatingadmissionpolicy-status-controller",
)
JsonDict = dict[str, Any]


def pinned_versions() -> tuple[str, str]:
    """(Kubernetes, etcd) versions pinned in scripts/control_plane/*/go.mod, as the script reads them."""
    kube = (REPO / "scripts/control_plane/kubernetes/go.mod").read_text(encoding="utf-8")
    etcd = (REPO / "scripts/control_plane/etcd/go.mod").read_text(encoding="utf-8")
    k8s_version = re.search(r"^require k8s\.io/kubernetes (v[0-9.]+)$", kube, re.MULTILINE)
    etcd_version = re.search(r"^require go\.etcd\.io/etcd/server/v3 (v[0-9.]+)$", etcd, re.MULTILINE)
    if k8s_version is None or etcd_version is None:
        raise RuntimeError("cannot read the pinned versions from scripts/control_plane/*/go.mod")
    return k8s_version.group(1), etcd_version.group(1)


def binaries_dir() -> Path:
    """Where scripts/control_plane.sh puts the binaries (same default, same override)."""
    explicit = os.environ.get("MIGAGENT_CONTROL_PLANE_DIR")
    if explicit:
        return Path(explicit)
    kube, etcd = pinned_versions()
    return Path.home() / ".cache/migagent/control-plane" / f"kubernetes-{kube}-etcd-{etcd}"


def binaries_built(directory: Path) -> bool:
    kube, etcd = pinned_versions()
    stamp = directory / "STAMP"
    return (
        stamp.is_file()
        and stamp.read_text(encoding="utf-8").strip() == f"kubernetes {kube} etcd {etcd}"
        and all(os.access(directory / name, os.X_OK) for name in BINARIES)
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Identity:
    """How a client authenticates: a client certificate, or a bearer token; `impersonate`: the user (and
    groups) it acts as (Impersonate-User/-Group headers), whose user info then has no `extra` at all."""

    name: str
    cert: CertPair | None = None
    token: str | None = None
    impersonate: tuple[str, tuple[str, ...]] | None = None


AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
"""Every request once (at ResponseStarted for a watch, ResponseComplete otherwise), with its user."""


class ControlPlane:
    def __init__(
        self, bin_dir: Path, workdir: Path, *, audit_log: Path | None = None, address: str = "127.0.0.1",
        controllers: tuple[str, ...] = CONTROLLERS,
    ) -> None:
        """`audit_log`: where kube-apiserver writes its audit log (JSON lines, one per request; None: none).
        `address`: where kube-apiserver listens and what it advertises (a real node's pods reach it
        there: tests/realnode binds it to the node's own address); `controllers`: which
        kube-controller-manager runs."""
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.audit_log = audit_log
        self.address = address
        self.controllers = controllers
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._logs: list[IO[bytes]] = []
        self.pki = Pki(workdir / "pki")
        self.port = free_port()
        self.url = f"https://{address}:{self.port}"
        self.admin = Identity(
            "kubernetes-admin", self.pki.issue("admin", "kubernetes-admin", organizations=("system:masters",))
        )
        self.admin_kubeconfig = self.write_kubeconfig(workdir / "admin.kubeconfig", self.admin)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        try:
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for _, process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for _, process in reversed(self._processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("wb")
        self._logs.append(log)
        process = subprocess.Popen([str(self.bin_dir / name), *args], stdout=log, stderr=subprocess.STDOUT)
        self._processes.append((name, process))
        return process

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait(self, name: str, process: subprocess.Popen[bytes], ready: Any, timeout_s: float) -> None:
        deadline = Deadline(timeout_s)
        while not ready():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{self.log_tail(name)}")
            if deadline.passed():
                raise RuntimeError(f"{name} not ready within {timeout_s:g}s:\n{self.log_tail(name)}")
            time.sleep(0.25)

    def _start_etcd(self) -> None:
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        process = self._spawn(
            "etcd",
            [
                "--name=test",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=test=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as response:
                    return bool(json.loads(response.read()).get("health") == "true")
            except (OSError, ValueError):
                return False

        self._wait("etcd", process, ready, 60)

    def _start_apiserver(self) -> None:
        serving = self.pki.issue("apiserver", "kube-apiserver", server=True, ips=(self.address,))
        sa = self.pki.service_account_keys()
        # What it shows a kubelet (logs, exec); the kubelets trust the cluster CA's client certificates.
        kubelet_client = self.pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                        organizations=("system:masters",))
        process = self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--kubelet-client-certificate={kubelet_client.cert}",
                f"--kubelet-client-key={kubelet_client.key}",
                "--kubelet-preferred-address-types=InternalIP",
                f"--secure-port={self.port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.pki.ca}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction,ValidatingAdmissionPolicy",
                f"--service-account-issuer={ISSUER}",
                f"--service-account-key-file={sa.cert}",
                f"--service-account-signing-key-file={sa.key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                "--v=1",
                *self._audit_args(),
            ],
        )
        context = self.ssl_context(self.admin)

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=5, context=context) as response:
                    return bool(response.status == 200)
            except (OSError, urllib.error.URLError):
                return False

        self._wait("kube-apiserver", process, ready, 180)
        self.sa_keys = sa

    def _audit_args(self) -> list[str]:
        if self.audit_log is None:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY), encoding="utf-8")
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json"]

    def _start_controller_manager(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--controllers={','.join(self.controllers)}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--root-ca-file={self.pki.ca}",
                f"--service-account-private-key-file={self.sa_keys.key}",
                "--use-service-account-credentials=false",
                "--concurrent-gc-syncs=2",
                "--v=1",
            ],
        )
        # The serviceaccount controller's first act is `default` in every namespace: wait for it.
        admin = self.rest(self.admin)
        deadline = Deadline(120)
        while True:
            try:
                admin.get("/api/v1/namespaces/default/serviceaccounts/default")
                return
            except HttpError as error:
                if error.status != 404:
                    raise
            _, process = self._processes[-1]
            if process.poll() is not None:
                raise RuntimeError(f"kube-controller-manager exited:\n{self.log_tail('kube-controller-manager')}")
            if deadline.passed():
                raise RuntimeError(f"kube-controller-manager not working:\n{self.log_tail('kube-controller-manager')}")
            time.sleep(0.5)

    def start_scheduler(self) -> None:
        """kube-scheduler, once; returns when its health endpoint answers (it then watches pods and nodes)."""
        if any(name == "kube-scheduler" for name, _ in self._processes):
            return
        port = free_port()
        config = self.workdir / "kube-scheduler.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.admin_kubeconfig)},
            "leaderElection": {"leaderElect": False},
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": 1,
        }), encoding="utf-8")
        process = self._spawn(
            "kube-scheduler",
            [
                f"--config={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                f"--authentication-kubeconfig={self.admin_kubeconfig}",
                f"--authorization-kubeconfig={self.admin_kubeconfig}",
                "--v=1",
            ],
        )
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed, made at start

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=5, context=context) as answer:
                    return bool(answer.status == 200)
            except (OSError, urllib.error.URLError):
                return False

        self._wait("kube-scheduler", process, ready, 120)

    # -- clients --------------------------------------------------------------------------------

    def ssl_context(self, identity: Identity) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        if identity.cert is not None:
            context.load_cert_chain(str(identity.cert.cert), str(identity.cert.key))
        return context

    def configuration(self, identity: Identity) -> client.Configuration:
        config = client.Configuration(host=self.url)
        config.ssl_ca_cert = str(self.pki.ca)
        if identity.cert is not None:
            config.cert_file = str(identity.cert.cert)
            config.key_file = str(identity.cert.key)
        if identity.token is not None:
            config.api_key = {"authorization": identity.token}
            config.api_key_prefix = {"authorization": "Bearer"}
        return config

    def api_client(self, identity: Identity) -> client.ApiClient:
        """A kubernetes client as `identity` (what the agent under test gets)."""
        return client.ApiClient(self.configuration(identity))

    def rest(self, identity: Identity) -> Rest:
        """Plain JSON requests as `identity` (what the harness sends)."""
        return Rest(self.url, self.ssl_context(identity), token=identity.token, impersonate=identity.impersonate)

    def node_identity(self, node: str) -> Identity:
        """The kubelet of `node`: `system:node:<node>` in `system:nodes`, by client certificate."""
        cert = self.pki.issue(f"node-{node}", f"system:node:{node}", organizations=("system:nodes",))
        return Identity(f"system:node:{node}", cert)

    def write_kubeconfig(self, path: Path, identity: Identity) -> Path:
        user: JsonDict = {}
        if identity.cert is not None:
            user = {"client-certificate": str(identity.cert.cert), "client-key": str(identity.cert.key)}
        if identity.token is not None:
            user = {"token": identity.token}
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca)}}],
            "users": [{"name": identity.name, "user": user}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": identity.name}}],
            "current-context": "test",
        }
        path.write_text(yaml.safe_dump(kubeconfig), encoding="utf-8")
        return path

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        kubectl = shutil.which("kubectl")
        assert kubectl is not None, "kubectl is not on PATH"
        return subprocess.run(
            [kubectl, f"--kubeconfig={self.admin_kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def apply(self, objects: list[JsonDict]) -> None:
        """`kubectl apply --server-side` as the admin: the server's own schema validation (strict fields)."""
        manifest = yaml.safe_dump_all(objects)
        done = self.kubectl(
            "apply", "--server-side", "--force-conflicts", "--validate=strict", "-f", "-", stdin=manifest, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"kubectl apply failed:\n{done.stderr}")

    # -- identities a cluster gives the agent ---------------------------------------------------

    def ensure_node(self, name: str, *, labels: Mapping[str, str] | None = None) -> JsonDict:
        admin = self.rest(self.admin)
        try:
            return admin.get(f"/api/v1/nodes/{name}")
        except HttpError as error:
            if error.status != 404:
                raise
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}}
        return admin.create("/api/v1/nodes", node)

    def bound_token(self, *, namespace: str, service_account: str, node: str, expiration_s: int = 3600) -> str:
        """A token for `service_account` from the TokenRequest API, bound to a Pod on `node` (created here),
        so the server puts `authentication.kubernetes.io/node-name: <node>` in the token's user info."""
        admin = self.rest(self.admin)
        pod_name = f"{service_account}-{node}"
        pods = f"/api/v1/namespaces/{namespace}/pods"
        try:
            pod = admin.get(f"{pods}/{pod_name}")
        except HttpError as error:
            if error.status != 404:
                raise
            pod = admin.create(
                pods,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": pod_name, "labels": {"app.kubernetes.io/name": IDENTITY_POD_LABEL}},
                    "spec": {
                        "nodeName": node,
                        "serviceAccountName": service_account,
                        "automountServiceAccountToken": False,
                        "containers": [{"name": "agent", "image": "migagent:test"}],
                    },
                },
            )
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": expiration_s,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod["metadata"]["uid"]},
            },
        }
        answer = admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token", request)
        token: str = answer["status"]["token"]
        return token

    def agent_identity(self, *, namespace: str, service_account: str, node: str) -> Identity:
        token = self.bound_token(namespace=namespace, service_account=service_account, node=node)
        return Identity(f"system:serviceaccount:{namespace}:{service_account}", token=token)

    def whoami(self, identity: Identity) -> JsonDict:
        """The user info the server derives from `identity` (SelfSubjectReview)."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        answer = self.rest(identity).create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        user: JsonDict = answer["status"]["userInfo"]
        return user


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="migagent-realkube-"))
