from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.deploy.manifests import OVERLAYS, Obj, only, render
from tests.integration.deploy.rbac import ApiCall, Permission, permissions_of
from tests.integration.deploy.scenario import ScenarioRecord, calls_of, run_agent_scenario

Scenario = tuple[list[Permission], list[ApiCall], ScenarioRecord]


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay_scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """The overlay's grants and the calls its agent made in the representative scenario (run once)."""
    overlay: str = request.param
    objects = render(f"overlays/{overlay}")
    granted = permissions_of(objects, service_account=_service_account(objects))
    workdir: Path = tmp_path_factory.mktemp(f"rbac-{overlay}")
    record = run_agent_scenario(workdir, objects)
    return granted, calls_of(record.requests), record


def _service_account(objects: list[Obj]) -> tuple[str, str]:
    metadata = only(objects, "ServiceAccount")["metadata"]
    return metadata["namespace"], metadata["name"]


def test_the_fake_api_server_enforcing_the_overlays_rbac_and_admission_refused_none_of_the_agents_calls(
    overlay_scenario: Scenario,
) -> None:
    _, _, record = overlay_scenario
    refused = sorted({f"{r.method} {r.path} -> {r.status}" for r in record.requests if r.status in (401, 403)})
    assert refused == []
    assert record.checks, "the server authorized nothing: access control was not on"


def test_every_call_the_deployed_agent_makes_is_allowed_by_its_rbac(overlay_scenario: Scenario) -> None:
    granted, calls, _ = overlay_scenario
    denied = sorted({str(call) for call in calls if not any(p.allows(call) for p in granted)})
    assert denied == [], f"the agent made calls its RBAC does not allow: {denied}"


def test_every_rbac_permission_is_used_by_some_call_of_the_deployed_agent(overlay_scenario: Scenario) -> None:
    """Used by a request, or by the admission policy's authorizer check (the marker permission)."""
    granted, calls, record = overlay_scenario
    used = [*calls, *record.checks]
    unused = sorted(str(p) for p in granted if not any(p.allows(call) for call in used))
    assert unused == [], f"permissions the agent never used (remove them): {unused}"


def test_the_scenario_covers_a_drain_through_a_pdb_the_plugin_restart_events_and_the_condition(
    overlay_scenario: Scenario,
) -> None:
    _, calls, _ = overlay_scenario
    made = {(c.verb, c.group, c.rbac_resource) for c in calls}
    assert {
        ("watch", "", "nodes"),
        ("create", "", "pods/eviction"),
        ("patch", "", "nodes/status"),
        ("create", "", "events"),
    } <= made


def test_only_the_gpu_operator_agent_deletes_pods_and_only_in_the_operator_namespace() -> None:
    # Its validators (mig-manager restarts them); the standalone plugin is paused by a node label.
    for overlay in OVERLAYS:
        objects = render(f"overlays/{overlay}")
        granted = permissions_of(objects, service_account=_service_account(objects))
        deletes = {(p.resource, p.namespace) for p in granted if p.verb == "delete"}
        expected = {("pods", "gpu-operator")} if overlay == "gpu-operator" else set()
        assert deletes == expected, overlay


# The list and nothing more: get, watch and patch Nodes and their status, list pods, create
# evictions, create events (only where Events about a Node live), and (issue 9, decide before
# disturbing) list PodDisruptionBudgets, read-only, to refuse a change no eviction can satisfy before
# the node is cordoned. No `get pods`: the agent finds one pod by listing.
LEAST_PRIVILEGE = {
    ("get", "", "nodes", "cluster-wide"),
    ("watch", "", "nodes", "cluster-wide"),
    ("patch", "", "nodes", "cluster-wide"),
    ("patch", "", "nodes/status", "cluster-wide"),
    ("list", "", "pods", "cluster-wide"),
    ("create", "", "pods/eviction", "cluster-wide"),
    ("list", "policy", "poddisruptionbudgets", "cluster-wide"),
    ("create", "", "events", "default"),
    # Issue 14, one MIG manager per node: the node's Lease in the agent's namespace, and ResourceSlices
    # (a DRA driver with DynamicMIG on this node makes the agent refuse).
    ("get", "coordination.k8s.io", "leases", "migagent"),
    ("create", "coordination.k8s.io", "leases", "migagent"),
    ("update", "coordination.k8s.io", "leases", "migagent"),
    ("list", "resource.k8s.io", "resourceslices", "cluster-wide"),
    # Not an API call: the marker by which the admission policy recognises whom it judges.
    ("restricted-to-own-node", "migagent.io", "nodeagents", "cluster-wide"),
}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_grants_exactly_the_listed_permissions_and_events_only_where_node_events_live(
    overlay: str,
) -> None:
    objects = render(f"overlays/{overlay}")
    granted = {
        (p.verb, p.group, p.resource, "cluster-wide" if p.namespace is None else p.namespace)
        for p in permissions_of(objects, service_account=_service_account(objects))
    }
    validator_restart = {("delete", "", "pods", "gpu-operator")} if overlay == "gpu-operator" else set()
    # Not an API call: the marker by which the admission policy lets the standalone agent pause an
    # absent device-plugin label.
    marker = ("pause-absent-device-plugin", "migagent.io", "nodeagents", "cluster-wide")
    pause_absent = {marker} if overlay == "standalone" else set()
    # --mig-strategy auto and the sole-owner check read the ClusterPolicy (only the one named cluster-policy).
    policy = {("get", "nvidia.com", "clusterpolicies", "cluster-wide")} if overlay == "gpu-operator" else set()
    expected = LEAST_PRIVILEGE | validator_restart | pause_absent | policy
    assert granted == expected
