"""A fake kube-apiserver speaking real HTTP/1.1 to the real `kubernetes` client (docs/kubernetes.md §1-§3)."""

from __future__ import annotations

from migagent_sim.apiserver.faults import RecordedRequest
from migagent_sim.apiserver.objects import daemonset_object, pod_object
from migagent_sim.apiserver.server import FakeApiServer

__all__ = ["FakeApiServer", "RecordedRequest", "daemonset_object", "pod_object"]
