"""migagent's Kubernetes simulator, a distribution of its own (`migagent-sim`).

A fake kube-apiserver speaking real HTTP (`apiserver`), a fake kubelet with PodResources and a
device plugin that re-advertises from FakeNvml (`kubelet*`), the simulated cluster that runs the real
agent against them (`cluster`), and `migagent demo`. The product (`migagent`) never imports this
package (an import-linter contract keeps it so); this package depends on the product of the same
version, as canonical/operator's `ops-scenario` depends on `ops`.
"""

import os

# gRPC's C core logs a peer's GOAWAY (a simulated kubelet or plugin stopping) at INFO straight to stderr,
# under the demos' output: only its errors are worth showing. Read when grpc starts, so set before it is imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
