"""Reading an eviction's 429: the server's words and the PodDisruptionBudgets it names."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from migagent.kube.pods import eviction_refusal
from migagent.node.port import EvictionStatus

REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def _too_many_requests(body: str | None, *, retry_after: str | None = None) -> ApiException:
    error = ApiException(status=429, reason="Too Many Requests")
    error.body = body
    error.headers = {"Retry-After": retry_after} if retry_after else {}
    return error


def _status(*causes: dict[str, Any]) -> str:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": REFUSED,
            "reason": "TooManyRequests",
            "details": {"causes": list(causes)},
            "code": 429,
        }
    )


def _budget_cause(message: str) -> dict[str, str]:
    return {"reason": "DisruptionBudget", "message": message}


def test_the_budget_named_by_the_disruption_budget_cause_is_taken_with_the_full_message() -> None:
    cause = _budget_cause("The disruption budget strict needs 2 healthy pods and has 2 currently")
    outcome = eviction_refusal(_too_many_requests(_status(cause)))
    assert outcome.status is EvictionStatus.BLOCKED
    assert outcome.budgets == ("strict",)
    assert outcome.message == f"{REFUSED} The disruption budget strict needs 2 healthy pods and has 2 currently"
    assert outcome.retry_after_s is None


def test_a_budget_still_being_processed_is_named_and_its_retry_after_kept() -> None:
    cause = _budget_cause("The disruption budget web-pdb is still being processed by the server.")
    outcome = eviction_refusal(_too_many_requests(_status(cause), retry_after="10"))
    assert outcome.budgets == ("web-pdb",)
    assert outcome.retry_after_s == 10.0


def test_each_named_budget_appears_once_in_the_order_the_server_gave() -> None:
    causes = [
        _budget_cause("The disruption budget b needs 1 healthy pods and has 1 currently"),
        _budget_cause("The disruption budget a needs 1 healthy pods and has 1 currently"),
        _budget_cause("The disruption budget b is still being processed by the server."),
    ]
    assert eviction_refusal(_too_many_requests(_status(*causes))).budgets == ("b", "a")


def test_causes_of_another_kind_are_reported_but_name_no_budget() -> None:
    other = {"reason": "FieldValueInvalid", "message": "The disruption budget x needs nothing", "field": "spec"}
    outcome = eviction_refusal(_too_many_requests(_status(other)))
    assert outcome.budgets == ()
    assert "The disruption budget x needs nothing" in outcome.message


def test_a_429_without_a_status_body_names_no_budget_and_keeps_the_http_reason() -> None:
    for body in (None, "", "rate limited", json.dumps({"kind": "Status", "details": {"causes": "oops"}})):
        outcome = eviction_refusal(_too_many_requests(body))
        assert outcome.status is EvictionStatus.BLOCKED
        assert outcome.budgets == ()
        assert outcome.message
