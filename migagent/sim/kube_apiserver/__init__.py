"""A fake kube-apiserver speaking real HTTP/1.1 to the real `kubernetes` client (reference/kubernetes.md §2-§3)."""

from __future__ import annotations

from migagent.sim.kube_apiserver.faults import RecordedRequest
from migagent.sim.kube_apiserver.objects import daemonset_object, pod_object
from migagent.sim.kube_apiserver.server import FakeApiServer

__all__ = ["FakeApiServer", "RecordedRequest", "daemonset_object", "pod_object"]
