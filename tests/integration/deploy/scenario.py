"""Run the agent as a rendered DaemonSet configures it, on the simulator, and return the API calls it made.

The scenario is the agent's whole repertoire on one node: start-up (read, list and watch its Node,
report the current layout), then a label change whose drain is blocked by a PodDisruptionBudget
until the drain times out (the failure path names the PDB and undoes the attempt), then the retry
that evicts the pods, restarts the device plugin the way the overlay says, waits for the new
resources, and reports success through labels, annotations, the condition and Events.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from migagent.attempt.window.post_change import CdiSettings, PostChangeSteps
from migagent.cli import build_parser
from migagent.layout.strategy import MigStrategy
from migagent_sim.apiserver.access import AccessControl
from migagent_sim.apiserver.faults import RecordedRequest
from migagent_sim.cluster import GPU_OPERATOR_LABELS, PDB_BLOCKING_FOR_NOW, SimCluster, SimClusterConfig
from migagent_sim.kubelet_plugin import PluginMode
from migagent_sim.nvidia_ctk import FakeNvidiaTools
from tests.integration.agent.support import applied, node_when, state_of
from tests.integration.deploy.manifests import Obj, agent_container, only
from tests.integration.deploy.rbac import ApiCall

START = "all-1g.10gb"
# The single strategy advertises only one profile per node (all-balanced would be refused).
TARGET = {MigStrategy.MIXED: "all-balanced", MigStrategy.SINGLE: "all-7g", MigStrategy.NONE: "all-balanced"}
PLUGIN_MODE_FOR: dict[str, PluginMode] = {
    "gpu-operator": "gpu-operator", "node-label": "node-label", "delete-pod": "daemonset", "none": "daemonset"
}
VALIDATORS = ("nvidia-cuda-validator", "nvidia-device-plugin-validator", "nvidia-operator-validator")
# Both targets destroy the 1g.10gb GPU instances at these (GPU, slot) places.
GUARDED_WORKLOAD = ("ml", "inference-0", (0, 4), {"app": "inference"})
PLAIN_WORKLOAD = ("ml", "train-0", (1, 6), {"app": "train"})


@dataclass(frozen=True)
class DeployedFlags:
    """What the rendered DaemonSet's args tell the agent about the device plugin and draining."""

    restart: str
    plugin_namespace: str
    plugin_selector: str
    force_delete: bool
    plugin_daemonset: str | None = None
    mig_strategy: MigStrategy = MigStrategy.MIXED
    mig_strategy_auto: bool = False
    restart_validators: bool = False
    cdi: bool = False


def deployed_flags(objects: list[Obj]) -> DeployedFlags:
    args = build_parser().parse_args(agent_container(objects)["args"])
    return DeployedFlags(
        args.device_plugin_restart,
        args.operator_namespace,
        args.device_plugin_selector,
        args.force_delete,
        plugin_daemonset=args.device_plugin_daemonset,
        # auto: the scenario's plugin runs the GPU Operator's default, single, and the agent finds that out.
        mig_strategy=MigStrategy.SINGLE if args.mig_strategy == "auto" else MigStrategy(args.mig_strategy),
        mig_strategy_auto=args.mig_strategy == "auto",
        restart_validators=args.restart_operator_validator,
        cdi=args.cdi,
    )


def calls_of(requests: list[RecordedRequest]) -> list[ApiCall]:
    return [
        ApiCall(r.verb, r.api_group, r.resource, r.subresource or "", r.namespace or "", r.name or "") for r in requests
    ]


@dataclass(frozen=True)
class ScenarioRecord:
    requests: list[RecordedRequest]
    """Every request the API server answered, as it answered it (a denied one is a 401 or 403)."""
    checks: list[ApiCall]
    """What the server asked RBAC on the agent's behalf: its requests and admission's authorizer checks."""


def run_agent_scenario(workdir: Path, objects: list[Obj]) -> ScenarioRecord:
    """The scenario with the rendered RBAC and admission policy enforced by the fake API server."""
    flags = deployed_flags(objects)
    operator = flags.restart == "gpu-operator"
    target = TARGET[flags.mig_strategy]
    config = SimClusterConfig(
        spec="2xH100-80GB-SXM",
        start_layout=START,
        plugin_mode=PLUGIN_MODE_FOR[flags.restart],
        labels=dict(GPU_OPERATOR_LABELS) if operator else {},
        mig_strategy=flags.mig_strategy,
        # the plugin pod where this deployment's agent is told to look
        plugin_namespace=flags.plugin_namespace,
        plugin_labels=_selector_labels(flags.plugin_selector),
        plugin_daemonset=flags.plugin_daemonset or "nvidia-device-plugin-daemonset",
    )
    account = only(objects, "ServiceAccount")["metadata"]
    access = AccessControl(objects)
    cluster = SimCluster(workdir, config, access=access, agent_account=(account["namespace"], account["name"]))
    with cluster:
        for namespace, name, (gpu, slot), labels in (GUARDED_WORKLOAD, PLAIN_WORKLOAD):
            cluster.kubelet.run_workload(namespace, name, mig_uuid=cluster.mig_uuid(gpu, slot), labels=labels)
        cluster.api.add_pdb("ml", "inference-pdb", match_labels={"app": "inference"}, disruptions_allowed=0)
        cluster.api.set_pdb_status("ml", "inference-pdb", PDB_BLOCKING_FOR_NOW)
        base = cluster.options(
            drain_timeout_s=1.0, force_delete=flags.force_delete, mig_strategy_auto=flags.mig_strategy_auto
        )
        options = replace(
            base,
            cluster_policy="cluster-policy" if flags.restart == "gpu-operator" else None,
            restart=flags.restart,
            operator_namespace=flags.plugin_namespace,
            plugin_selector=flags.plugin_selector,
            plugin_daemonset=flags.plugin_daemonset,
        )
        # The pod a rollout replaced reported the node and released its Lease: the agent under test meets
        # an existing Lease (its create answers 409; it reads the Lease and takes it), as after an upgrade.
        previous = cluster.start_agent(options)
        node_when(cluster, lambda n: state_of(n) == "success", what=f"the agent to report {START}", timeout_s=60)
        previous.stop()
        running = cluster.start_agent(options, post_change=_post_change(cluster, flags, workdir))
        try:
            cluster.label(target)
            node_when(cluster, lambda n: state_of(n) == "failed", what="the drain blocked by inference-pdb to fail",
                      timeout_s=60)
            cluster.api.set_pdb_disruptions_allowed("ml", "inference-pdb", 1)
            node_when(cluster, lambda n: applied(n, target), what=f"the retry to apply {target}", timeout_s=60)
        finally:
            running.stop()
        checks = [
            ApiCall(a.verb, a.group, a.resource, a.subresource, a.namespace, a.name)
            for user, a, allowed in access.decisions()
            if allowed and user.username.endswith(f":{account['namespace']}:{account['name']}")
        ]
        return ScenarioRecord(cluster.api.requests, checks)


def _post_change(cluster: SimCluster, flags: DeployedFlags, workdir: Path) -> PostChangeSteps | None:
    """The overlay's operator steps, on the simulator: validator pods to restart, a fake nvidia-ctk."""
    if not (flags.restart_validators or flags.cdi):
        return None
    for app in VALIDATORS:
        cluster.api.create_pod(
            node_name=cluster.config.node_name, namespace=flags.plugin_namespace, name=f"{app}-x1",
            labels={"app": app}, owner_kind="DaemonSet", owner_name=app,
        )
    return PostChangeSteps(
        api=cluster.agent_api(),
        namespace=flags.plugin_namespace,
        restart_validators=flags.restart_validators,
        cdi=CdiSettings(output=workdir / "cdi" / "management.nvidia.com-gpu.yaml") if flags.cdi else None,
        run=FakeNvidiaTools(cluster.fake),
    )


def _selector_labels(selector: str) -> dict[str, str]:
    return dict(term.split("=", 1) for term in selector.split(","))
