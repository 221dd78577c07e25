"""ValidatingAdmissionPolicy evaluation (admissionregistration.k8s.io/v1) with cel-python.

The API server evaluates a policy's CEL with cel-go; this evaluates the same expressions with
cel-python (a test dependency: import this module only where admission is wanted). What is
reproduced: matchConstraints (resource rules with operations), matchConditions, variables (each may
use the ones before), validations with message/messageExpression, failurePolicy (an evaluation
error denies under Fail and is ignored under Ignore), bindings with validationActions Deny, and the
`authorizer` library (`authorizer.group(g).resource(r)[.subresource(s)][.namespace(n)][.name(x)]
.check(verb).allowed()`) answered by the same RBAC authorizer that guards requests. Not reproduced:
cel-go's type checker, params, auditAnnotations, namespace/object selectors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from migagent_sim.apiserver.errors import ApiError, qualified
from migagent_sim.apiserver.rbac import Attributes, UserInfo

JsonDict = dict[str, Any]
Authorize = Callable[[UserInfo, Attributes], bool]


@dataclass(frozen=True)
class AdmissionRequest:
    """What a policy sees of one write: `object` after the patch and strategy, `old_object` as stored."""

    operation: str  # CREATE | UPDATE | DELETE
    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user: UserInfo
    object: JsonDict | None
    old_object: JsonDict | None

    def as_cel(self) -> JsonDict:
        kind = {"group": self.group, "version": self.version, "resource": self.resource}
        return {
            "operation": self.operation,
            "resource": kind,
            "subResource": self.subresource,
            "namespace": self.namespace,
            "name": self.name,
            "userInfo": self.user.as_admission(),
        }


class _AuthorizerCheck(celtypes.MapType):
    """The value `authorizer.group(...)...` builds up; a map so cel-python passes it through untouched.

    It carries the request's user and the authorizer, so the CEL functions (and the programs built
    with them) need not be made per request."""

    def __init__(self, attributes: Attributes, user: UserInfo, authorize: Authorize) -> None:
        super().__init__({})
        self.attributes = attributes
        self.user = user
        self.authorize = authorize


def _setter(attribute: str) -> Callable[[_AuthorizerCheck, Any], _AuthorizerCheck]:
    """The CEL method that sets one attribute of the check being built (`.group(...)`, `.check(verb)`, ...)."""

    def set_attribute(check: _AuthorizerCheck, value: Any) -> _AuthorizerCheck:
        return _AuthorizerCheck(replace(check.attributes, **{attribute: str(value)}), check.user, check.authorize)

    return set_attribute


def authorizer_allowed(check: _AuthorizerCheck) -> celtypes.BoolType:
    return celtypes.BoolType(check.authorize(check.user, check.attributes))


# CEL method name -> the authorization attribute it sets (`check` names the verb).
_ATTRIBUTE_OF_METHOD = {
    "group": "group", "resource": "resource", "subresource": "subresource",
    "namespace": "namespace", "name": "name", "check": "verb",
}  # fmt: skip
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{method: _setter(attribute) for method, attribute in _ATTRIBUTE_OF_METHOD.items()},
    "allowed": authorizer_allowed,
}
# Parsed once per expression. (cel-python 0.5's CompiledRunner would be faster than its interpreter,
# ~0.3 s per Node write here, but it mis-transpiles ternaries and runs in shared module globals.)
_ENVIRONMENT = celpy.Environment()
_PROGRAMS: dict[str, celpy.Runner] = {}


def _program(expression: str) -> celpy.Runner:
    found = _PROGRAMS.get(expression)
    if found is None:
        found = _PROGRAMS[expression] = _ENVIRONMENT.program(_ENVIRONMENT.compile(expression), functions=_FUNCTIONS)
    return found


class _Evaluation:
    def __init__(self, request: AdmissionRequest, authorize: Authorize) -> None:
        self.activation: dict[str, Any] = {
            "request": json_to_cel(request.as_cel()),
            "object": json_to_cel(request.object) if request.object is not None else None,
            "oldObject": json_to_cel(request.old_object) if request.old_object is not None else None,
            "authorizer": _AuthorizerCheck(Attributes(verb="", group="", resource=""), request.user, authorize),
            "variables": celtypes.MapType({}),
        }

    def evaluate(self, expression: str) -> Any:
        result = _program(expression).evaluate(self.activation)
        if isinstance(result, CELEvalError):
            raise result
        return result


class PolicyEvaluationError(Exception):
    """A CEL expression could not be compiled or evaluated; `expression`: the validation or condition it was."""

    def __init__(self, message: str, *, expression: str = "") -> None:
        super().__init__(message)
        self.expression = expression


@dataclass(frozen=True)
class Verdict:
    judged: bool
    allowed: bool
    messages: tuple[str, ...]


def evaluate_policy(policy: JsonDict, request: AdmissionRequest, authorize: Authorize) -> Verdict:
    """One policy's verdict on `request`; an expression that fails raises PolicyEvaluationError."""
    spec = policy.get("spec") or {}
    if not _matches_constraints(spec.get("matchConstraints") or {}, request):
        return Verdict(judged=False, allowed=True, messages=())
    evaluation = _Evaluation(request, authorize)
    expression = ""
    try:
        for condition in spec.get("matchConditions") or []:
            expression = condition["expression"]
            if not _true(evaluation.evaluate(expression)):
                return Verdict(judged=False, allowed=True, messages=())
        failed = _variables(evaluation, spec.get("variables") or [])
        messages = []
        for validation in spec.get("validations") or []:
            expression = validation["expression"]
            # As cel-go's lazy variables: only an expression that uses a failed variable fails with it.
            used = next((name for name in failed if f"variables.{name}" in expression), None)
            if used is not None:
                raise PolicyEvaluationError(failed[used], expression=expression)
            if not _true(evaluation.evaluate(expression)):
                messages.append(_message(evaluation, validation))
    except (CELParseError, CELEvalError, KeyError, TypeError) as error:
        raise PolicyEvaluationError(f"{type(error).__name__}: {error}", expression=expression) from error
    return Verdict(judged=True, allowed=not messages, messages=tuple(messages))


def _variables(evaluation: _Evaluation, variables: list[JsonDict]) -> dict[str, str]:
    """Evaluate the policy's variables in order into the activation; those that fail, with why."""
    values: dict[celtypes.StringType, Any] = {}
    failed: dict[str, str] = {}
    for variable in variables:
        name = variable["name"]
        if any(f"variables.{other}" in variable["expression"] for other in failed):
            failed[name] = f'composited variable "{name}" fails to evaluate: a variable it uses failed'
            continue
        try:
            values[celtypes.StringType(name)] = evaluation.evaluate(variable["expression"])
        except (CELEvalError, KeyError, TypeError) as error:
            failed[name] = f'composited variable "{name}" fails to evaluate: {error}'
            continue
        evaluation.activation["variables"] = celtypes.MapType(dict(values))
    return failed


def _true(value: Any) -> bool:
    if not isinstance(value, celtypes.BoolType):
        raise PolicyEvaluationError(f"expression evaluated to {type(value).__name__}, not bool")
    return bool(value)


def _message(evaluation: _Evaluation, validation: JsonDict) -> str:
    if "messageExpression" in validation:
        return str(evaluation.evaluate(validation["messageExpression"]))
    if "message" in validation:
        return " ".join(str(validation["message"]).split())
    return f"failed expression: {validation['expression']}"


def _matches_constraints(constraints: JsonDict, request: AdmissionRequest) -> bool:
    resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    for rule in constraints.get("resourceRules") or []:
        if (
            _listed(request.operation, rule.get("operations"))
            and _listed(request.group, rule.get("apiGroups"))
            and _listed(request.version, rule.get("apiVersions"))
            and _listed(resource, rule.get("resources"))
        ):
            return True
    return False


def _listed(value: str, allowed: list[str] | None) -> bool:
    return bool(allowed) and ("*" in allowed or value in allowed)  # type: ignore[operator]


class AdmissionChain:
    """The policies and bindings in force; `admit` raises the API server's 403 (or 500) when one denies."""

    def __init__(self, objects: Iterable[JsonDict], authorize: Authorize) -> None:
        objects = list(objects)
        self._policies = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "ValidatingAdmissionPolicy"}
        self._bindings = [o for o in objects if o.get("kind") == "ValidatingAdmissionPolicyBinding"]
        self._authorize = authorize

    def admit(self, request: AdmissionRequest) -> None:
        for binding in self._bindings:
            spec = binding.get("spec") or {}
            policy = self._policies.get(spec.get("policyName", ""))
            if policy is None or "Deny" not in (spec.get("validationActions") or []):
                continue
            self._admit_one(policy, binding, request)

    def _admit_one(self, policy: JsonDict, binding: JsonDict, request: AdmissionRequest) -> None:
        names = f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding '{binding['metadata']['name']}'"
        subject = f'{qualified(request.resource, request.group)} "{request.name}"'
        try:
            verdict = evaluate_policy(policy, request, self._authorize)
        except PolicyEvaluationError as error:
            if (policy.get("spec") or {}).get("failurePolicy", "Fail") == "Ignore":
                return
            # The real server answers an expression that fails to evaluate with 422, naming it.
            message = (
                f"{subject} is forbidden: {names} denied request: expression '{error.expression}' resulted in"
                f" error: {error}"
            )
            raise ApiError(422, message, name=request.name, kind=request.resource, group=request.group) from error
        if not verdict.allowed:
            denied = f"{names} denied request: {verdict.messages[0]}"
            # The admission plugin's Status names the denial once more as its one cause (a message, no reason).
            raise ApiError(
                403,
                f"{subject} is forbidden: {denied}",
                name=request.name,
                kind=request.resource,
                group=request.group,
                causes=[{"message": denied}],
            )
