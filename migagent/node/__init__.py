"""The shared vocabulary every side of migagent speaks about a node; no `kubernetes` import.

`port.py` is `KubePort` and its typed views (NodeView, PodView, ...); `names.py` holds every label,
annotation, condition and resource name; `budgets.py` PodDisruptionBudgets, `scheduling.py` what a
pending pod asks, `selectors.py` label selectors, `owners.py` other MIG managers, `dra.py` the DRA
driver's ResourceSlices. The attempt's rules over them live in `migagent.attempt`; `migagent.kube`
implements the port over the real client.
"""
