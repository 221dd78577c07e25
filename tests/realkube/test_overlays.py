"""Every overlay's rendered manifests, applied to the real API server as an admin applies them.

`kubectl apply --server-side --validate=strict` makes the server check each object against its own
schema (unknown or duplicate fields are errors). The ValidatingAdmissionPolicies are then type-checked
by the server against the Node and Pod schemas (cel-go's checker, which the fast suite's cel-python
lacks); a warning there means an expression that refers to a field wrongly, which under
failurePolicy: Fail would deny the agent's every request.
"""

from __future__ import annotations

import time

import pytest

from migagent_sim.deadline import Deadline
from tests.realkube.control_plane import ControlPlane
from tests.realkube.deployment import VARIANTS, Deployer, Variant

JsonDict = dict[str, object]


def _type_checked(plane: ControlPlane, name: str, timeout_s: float = 60) -> dict[str, object]:
    admin = plane.rest(plane.admin)
    deadline = Deadline(timeout_s)
    while True:
        policy = admin.get(f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}")
        status = policy.get("status") or {}
        if status.get("observedGeneration") == policy["metadata"]["generation"]:
            result: dict[str, object] = status
            return result
        assert not deadline.passed(), f"policy {name} was never type-checked: {status}"
        time.sleep(0.2)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_each_overlay_applies_with_the_servers_strict_schema_validation_and_its_policies_type_check(
    control_plane: ControlPlane, deployer: Deployer, variant: Variant
) -> None:
    objects = deployer.install(variant)
    for obj in objects:
        metadata = obj["metadata"]
        args = ["get", str(obj["kind"]).lower(), metadata["name"], "-o", "name"]
        if metadata.get("namespace"):
            args += ["-n", metadata["namespace"]]
        assert control_plane.kubectl(*args).stdout.strip(), f"{obj['kind']} {metadata['name']} not stored"
    for policy in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"):
        status = _type_checked(control_plane, policy["metadata"]["name"])
        warnings = (status.get("typeChecking") or {}).get("expressionWarnings")  # type: ignore[attr-defined]
        assert not warnings, f"{policy['metadata']['name']}: {warnings}"
        assert not status.get("conditions") or all(
            c.get("status") != "False"
            for c in status["conditions"]  # type: ignore[attr-defined]
        )


def test_a_manifest_with_an_unknown_field_is_refused_by_the_servers_validation(control_plane: ControlPlane) -> None:
    bad = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "migagent-typo"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verb": ["get"]}],
    }
    with pytest.raises(AssertionError, match="verb"):
        control_plane.apply([bad])
