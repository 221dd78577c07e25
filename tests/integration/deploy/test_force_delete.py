"""`--force-delete` works with the manifests that enable it (deploy/components/force-delete) and only with them.

The fake API server enforces the rendered RBAC and admission policy; the agent drains a pod whose
PodDisruptionBudget allows no disruption, which only a plain DELETE gets past.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent.layout.strategy import MigStrategy
from migagent_sim.apiserver.access import AccessControl
from migagent_sim.cluster import GPU_OPERATOR_LABELS, SimCluster, SimClusterConfig
from tests.integration.agent.support import applied, eventually, node_when, state_of
from tests.integration.deploy.manifests import Obj, only, render, render_with_components
from tests.integration.deploy.rbac import permissions_of
from tests.integration.deploy.scenario import GUARDED_WORKLOAD, START, TARGET, deployed_flags

MIXED_TARGET = TARGET[MigStrategy.MIXED]  # the cluster below runs the plugin's default, mixed strategy


@pytest.fixture(scope="module")
def force_delete_objects() -> list[Obj]:
    """The gpu-operator overlay with the force-delete component, as an admin's overlay would add it."""
    return render_with_components("overlays/gpu-operator", "components/force-delete")


def _account(objects: list[Obj]) -> tuple[str, str]:
    metadata = only(objects, "ServiceAccount")["metadata"]
    return metadata["namespace"], metadata["name"]


def test_the_component_adds_the_flag_and_exactly_the_delete_pods_grant(force_delete_objects: list[Obj]) -> None:
    plain = render("overlays/gpu-operator")
    before = {
        (p.verb, p.group, p.resource, p.namespace) for p in permissions_of(plain, service_account=_account(plain))
    }
    after = {
        (p.verb, p.group, p.resource, p.namespace)
        for p in permissions_of(force_delete_objects, service_account=_account(force_delete_objects))
    }
    # the grant, and the marker by which the admission policy lets it delete workload pods on its own node
    assert after - before == {
        ("delete", "", "pods", None),
        ("force-delete-on-own-node", "migagent.io", "nodeagents", None),
    }
    assert before <= after
    assert deployed_flags(force_delete_objects).force_delete is True
    assert deployed_flags(plain).force_delete is False


def _drain_with_force_delete(workdir: Path, objects: list[Obj]) -> SimCluster:
    """Start a cluster enforcing `objects`, label a change whose drain needs a PDB-blocked pod deleted."""
    config = SimClusterConfig(spec="2xH100-80GB-SXM", start_layout=START, labels=dict(GPU_OPERATOR_LABELS))
    cluster = SimCluster(workdir, config, access=AccessControl(objects), agent_account=_account(objects)).start()
    namespace, name, (gpu, slot), labels = GUARDED_WORKLOAD
    cluster.kubelet.run_workload(namespace, name, mig_uuid=cluster.mig_uuid(gpu, slot), labels=labels)
    cluster.api.add_pdb(namespace, "inference-pdb", match_labels=labels, disruptions_allowed=0)
    cluster.start_agent(cluster.options(drain_timeout_s=2.0, force_delete=True))
    node_when(cluster, lambda n: state_of(n) == "success", what=f"the agent to report {START}", timeout_s=60)
    cluster.label(MIXED_TARGET)
    return cluster


def _pod_deletes(cluster: SimCluster) -> list[int]:
    return [r.status for r in cluster.api.requests if r.method == "DELETE" and r.resource == "pods"]


def test_force_delete_drains_a_pdb_guarded_pod_with_the_manifests_that_enable_it(
    tmp_path: Path, force_delete_objects: list[Obj]
) -> None:
    cluster = _drain_with_force_delete(tmp_path, force_delete_objects)
    try:
        node_when(cluster, lambda n: applied(n, MIXED_TARGET), what=f"{MIXED_TARGET} applied", timeout_s=60)
        # The drain ends before the GPUs change: the guarded pod is gone by the time of success.
        assert cluster.api.pod(GUARDED_WORKLOAD[0], GUARDED_WORKLOAD[1]) is None
        assert _pod_deletes(cluster) == [200]
        assert [r.path for r in cluster.api.requests if r.status in (401, 403)] == []
    finally:
        cluster.stop()


def test_force_delete_without_the_component_is_refused_by_the_rbac_the_manifests_render(tmp_path: Path) -> None:
    cluster = _drain_with_force_delete(tmp_path, render("overlays/gpu-operator"))
    try:
        eventually(lambda: 403 in _pod_deletes(cluster), what="the agent's DELETE to be refused", timeout_s=60)
        node_when(cluster, lambda n: state_of(n) == "failed", what="the change to fail", timeout_s=60)
        assert cluster.api.pod(GUARDED_WORKLOAD[0], GUARDED_WORKLOAD[1]) is not None
    finally:
        cluster.stop()
