"""The rendered ValidatingAdmissionPolicy's CEL, evaluated on sample requests.

The API server evaluates CEL with cel-go; here cel-python evaluates the same expressions, which
checks the policy's logic (who it judges, what it allows) but not cel-go's type checker: the test
names say so. The expressions use only core CEL (map `in`, indexing, size, ternary, +).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import celpy
import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

from tests.integration.deploy.manifests import KUSTOMIZATIONS, Obj, only, render

NODE_CLAIM = "authentication.kubernetes.io/node-name"
AGENT = "system:serviceaccount:migagent:migagent"


@dataclass(frozen=True)
class Decision:
    judged: bool
    allowed: bool
    messages: tuple[str, ...]


def decide(policy: Obj, *, username: str, extra: dict[str, list[str]], node: str) -> Decision:
    """What the policy decides for an UPDATE of Node `node` by `username` with user-info `extra`."""
    env = celpy.Environment()

    def evaluate(expression: str, activation: dict[str, Any]) -> Any:
        return env.program(env.compile(expression)).evaluate(activation)

    spec = policy["spec"]
    activation: dict[str, Any] = {
        "request": json_to_cel({"operation": "UPDATE", "userInfo": {"username": username, "extra": extra}}),
        "object": json_to_cel({"metadata": {"name": node}}),
    }
    if not all(evaluate(c["expression"], activation) for c in spec["matchConditions"]):
        return Decision(judged=False, allowed=True, messages=())
    variables: dict[celtypes.StringType, Any] = {}
    for variable in spec["variables"]:
        activation["variables"] = celtypes.MapType(variables)
        variables[celtypes.StringType(variable["name"])] = evaluate(variable["expression"], activation)
    activation["variables"] = celtypes.MapType(variables)
    messages = []
    for validation in spec["validations"]:
        if not evaluate(validation["expression"], activation):
            if "messageExpression" in validation:
                messages.append(str(evaluate(validation["messageExpression"], activation)))
            else:
                messages.append(" ".join(validation["message"].split()))
    return Decision(judged=True, allowed=not messages, messages=tuple(messages))


@pytest.fixture(params=KUSTOMIZATIONS)
def policy(request: pytest.FixtureRequest) -> Obj:
    return only(render(request.param), "ValidatingAdmissionPolicy")


def test_the_agent_may_change_the_node_its_token_is_bound_to_as_cel_python_evaluates_it(policy: Obj) -> None:
    decision = decide(policy, username=AGENT, extra={NODE_CLAIM: ["gpu-1"]}, node="gpu-1")
    assert decision == Decision(judged=True, allowed=True, messages=())


def test_the_agent_may_not_change_another_node_as_cel_python_evaluates_it(policy: Obj) -> None:
    decision = decide(policy, username=AGENT, extra={NODE_CLAIM: ["gpu-1"]}, node="gpu-2")
    assert not decision.allowed
    assert decision.messages == ("migagent running on node gpu-1 may not change node gpu-2",)


def test_a_token_without_the_node_claim_is_refused_with_the_reason_as_cel_python_evaluates_it(policy: Obj) -> None:
    decision = decide(policy, username=AGENT, extra={}, node="gpu-1")
    assert not decision.allowed
    (message,) = decision.messages
    assert NODE_CLAIM in message


def test_other_users_are_not_judged_by_the_policy_as_cel_python_evaluates_it(policy: Obj) -> None:
    for username in ("system:node:gpu-1", "system:serviceaccount:gpu-operator:nvidia-mig-manager", "admin"):
        assert not decide(policy, username=username, extra={}, node="gpu-2").judged
