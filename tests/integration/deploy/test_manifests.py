from __future__ import annotations

import copy

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
from kubernetes_validate.utils import all_versions, latest_version  # type: ignore[import-untyped]

from migagent.cli import build_parser
from migagent.cli.operator import post_change_from_args
from migagent.clock import SystemClock
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from tests.integration.deploy.manifests import (
    BASE,
    KUSTOMIZATIONS,
    OVERLAYS,
    REPO,
    Obj,
    agent_container,
    flag_values,
    of_kind,
    only,
    render,
)

# The newest Kubernetes version whose schemas kubernetes-validate ships in its wheel: validation
# reads them from the installed package, so it works offline.
KUBERNETES_VERSION = latest_version()
# The oldest Kubernetes deploy/README.md supports (ValidatingAdmissionPolicy v1, the token's node claim).
OLDEST_SUPPORTED_VERSION = "1.30.0"
NODE_CLAIM = "authentication.kubernetes.io/node-name"


def validate(obj: Obj, version: str = KUBERNETES_VERSION) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


def daemonset_pod_spec(objects: list[Obj]) -> Obj:
    spec: Obj = only(objects, "DaemonSet")["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, OLDEST_SUPPORTED_VERSION])
@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_rendered_object_is_valid_against_the_bundled_kubernetes_schemas(
    kustomization: str, version: str
) -> None:
    objects = render(kustomization)
    assert {"Namespace", "ServiceAccount", "ClusterRole", "DaemonSet", "ConfigMap"} <= {o["kind"] for o in objects}
    for obj in objects:
        validate(obj, version)


def test_the_schema_check_rejects_a_misspelt_field_so_it_really_validates() -> None:
    daemonset = copy.deepcopy(only(render("base"), "DaemonSet"))
    daemonset["spec"]["template"]["spec"]["tolerationz"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(daemonset)


def test_the_schemas_used_are_those_of_a_recent_kubernetes_shipped_with_the_validator() -> None:
    assert KUBERNETES_VERSION in all_versions()
    assert OLDEST_SUPPORTED_VERSION in all_versions()
    major, minor = (int(part) for part in KUBERNETES_VERSION.split(".")[:2])
    # ValidatingAdmissionPolicy v1 and the node claim in service-account tokens need 1.30.
    assert (major, minor) >= (1, 30)


def test_the_layouts_copy_in_the_kustomize_base_matches_the_shipped_layouts() -> None:
    shipped = (REPO / "configs" / "mig-layouts" / "mig-layouts.yaml").read_text()
    copied = (BASE / "mig-layouts.yaml").read_text()
    assert copied == shipped, "deploy/base/mig-layouts.yaml is stale: run scripts/sync_deploy_layouts.sh"


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_agent_reads_the_generated_layouts_configmap_from_its_mount(kustomization: str) -> None:
    objects = render(kustomization)
    configmap = only(objects, "ConfigMap")
    assert configmap["data"]["mig-layouts.yaml"] == (BASE / "mig-layouts.yaml").read_text()
    pod = daemonset_pod_spec(objects)
    volume = next(v for v in pod["volumes"] if "configMap" in v)
    # kustomize rewrote the reference to the hashed ConfigMap name.
    assert volume["configMap"]["name"] == configmap["metadata"]["name"] != "migagent-layouts"
    mount = next(m for m in agent_container(objects)["volumeMounts"] if m["name"] == volume["name"])
    config_file = flag_values(agent_container(objects)["args"])["--config-file"]
    assert config_file == f"{mount['mountPath']}/mig-layouts.yaml"


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_daemonset_mounts_the_host_paths_the_agent_uses(kustomization: str) -> None:
    objects = render(kustomization)
    pod = daemonset_pod_spec(objects)
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    # mig-manager's mounts on GPU Operator nodes: driver root, validation markers, CDI specs, host root.
    operator = ["/", "/run/nvidia/driver", "/run/nvidia/validations", "/var/run/cdi"]
    expected = ["/var/lib/kubelet/pod-resources", "/var/lib/migagent"]
    assert sorted(host_paths.values()) == sorted(expected + (operator if "gpu-operator" in kustomization else []))
    container = agent_container(objects)
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    flags = flag_values(container["args"])
    assert flags["--podresources-socket"].rsplit("/", 1)[0] in mounts
    assert flags["--journal-dir"] in mounts


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_daemonset_runs_privileged_on_chosen_gpu_nodes_even_when_cordoned(kustomization: str) -> None:
    objects = render(kustomization)
    pod = daemonset_pod_spec(objects)
    container = agent_container(objects)
    assert container["securityContext"]["privileged"] is True
    # GFD (run by the GPU Operator) sets mig.capable; the standalone plugin chart leaves GFD off, so
    # there the admin picks the nodes with a label deploy/README.md documents.
    expected = {"migagent.io/enabled": "true"} if "standalone" in kustomization else {"nvidia.com/mig.capable": "true"}
    assert pod["nodeSelector"] == expected
    assert pod["priorityClassName"] == "system-node-critical"
    # Every taint tolerated (no key, no effect, operator Exists), as the GPU Operator's operands.
    assert pod["tolerations"] == [{"operator": "Exists"}]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert container["image"] == "ghcr.io/migagent/migagent:0.1.0"
    assert pod["serviceAccountName"] == only(objects, "ServiceAccount")["metadata"]["name"]


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_probes_ask_the_metrics_port_the_agent_listens_on(kustomization: str) -> None:
    container = agent_container(render(kustomization))
    flags = flag_values(container["args"])
    port = next(p for p in container["ports"] if p["name"] == "metrics")
    assert port["containerPort"] == int(flags["--metrics-port"])
    # The kubelet probes the pod IP, so the server must not listen on loopback only.
    assert flags["--metrics-address"] == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_picks_its_device_plugin_restart_mode(overlay: str) -> None:
    flags = flag_values(agent_container(render(f"overlays/{overlay}"))["args"])
    expected = {"gpu-operator": "gpu-operator", "standalone": "node-label"}[overlay]
    assert flags["--device-plugin-restart"] == expected


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_admission_policy_judges_whoever_holds_the_marker_granted_with_patch_nodes(kustomization: str) -> None:
    """Not a fixed username: the marker permission sits in the ClusterRole that grants `patch nodes`."""
    objects = render(kustomization)
    policies = list(of_kind(objects, "ValidatingAdmissionPolicy"))
    assert {p["metadata"]["name"] for p in policies} == {"migagent-own-node-only", "migagent-own-node-pods"}
    for policy in policies:
        (condition,) = policy["spec"]["matchConditions"]
        assert "check('restricted-to-own-node').allowed()" in condition["expression"]
        assert "serviceaccount:migagent" not in condition["expression"]
    (role,) = (r for r in of_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("migagent"))
    granted = {
        (g, res, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for res in rule["resources"]
        for v in rule["verbs"]
    }
    assert {("", "nodes", "patch"), ("migagent.io", "nodeagents", "restricted-to-own-node")} <= granted
    bindings = of_kind(objects, "ValidatingAdmissionPolicyBinding")
    assert sorted(b["spec"]["policyName"] for b in bindings) == sorted(p["metadata"]["name"] for p in policies)
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings)


def test_the_admission_policy_compares_the_token_node_claim_with_the_node_changed() -> None:
    (policy,) = (
        p["spec"]
        for p in of_kind(render("base"), "ValidatingAdmissionPolicy")
        if p["metadata"]["name"].endswith("only")
    )
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["UPDATE"]
    assert sorted(rule["resources"]) == ["nodes", "nodes/status"]
    assert f"request.userInfo.extra['{NODE_CLAIM}']" in policy["variables"][0]["expression"]
    assert any("variables.tokenNode[0] == object.metadata.name" in v["expression"] for v in policy["validations"])
    assert policy["failurePolicy"] == "Fail"


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_no_rbac_rule_uses_a_wildcard_or_escalation_verb(kustomization: str) -> None:
    for role in [*of_kind(render(kustomization), "ClusterRole"), *of_kind(render(kustomization), "Role")]:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{role['metadata']['name']}: wildcard in {field}"
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])


CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_namespaced_objects_name_their_namespace_and_cluster_scoped_ones_do_not(kustomization: str) -> None:
    for obj in render(kustomization):
        namespace = obj["metadata"].get("namespace")
        where = f"{obj['kind']} {obj['metadata']['name']}"
        if obj["kind"] in CLUSTER_SCOPED:
            assert namespace is None, f"{where} is cluster-scoped but has namespace {namespace}"
        else:
            assert namespace, f"{where} has no namespace"


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_daemonset_args_are_flags_migagent_agent_accepts(kustomization: str) -> None:
    container = agent_container(render(kustomization))
    assert container["command"] == ["migagent"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "agent"
    assert args.config_file == "/etc/migagent/mig-layouts.yaml"
    assert args.metrics_port == int(flag_values(container["args"])["--metrics-port"])


def test_the_gpu_operator_overlay_runs_with_the_nvidia_runtime_class_host_pid_and_mig_managers_mounts() -> None:
    objects = render("overlays/gpu-operator")
    pod = daemonset_pod_spec(objects)
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["hostPID"] is True
    container = agent_container(objects)
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    flags = flag_values(container["args"])
    assert flags["--driver-root"] in mounts
    assert mounts[flags["--driver-root"]].get("mountPropagation") == "HostToContainer"
    assert "/run/nvidia/validations" in mounts
    assert "/var/run/cdi" in mounts
    assert flags["--host-root"] in mounts
    for step in ("--wait-for-operator", "--cdi", "--restart-operator-validator"):
        assert step in container["args"], step
    assert flags["--mig-strategy"] == "auto"  # from the ClusterPolicy or the plugin (issue 14)


def test_the_gpu_operator_overlay_flags_wire_every_post_change_step_and_the_standalone_ones_none() -> None:
    api = KubeApi(make_api_client(kubeconfig=None, api_server="http://127.0.0.1:9"), node_name="n", clock=SystemClock())
    for overlay, wired in (("gpu-operator", True), ("standalone", False)):
        args = build_parser().parse_args(agent_container(render(f"overlays/{overlay}"))["args"])
        steps = post_change_from_args(args, api)
        assert (steps is not None) is wired, overlay
        if steps is not None:
            assert steps.stops_host_clients
            assert args.nvidia_ctk.startswith(args.host_root + "/")
