"""Demand: which layouts would serve the GPU pods that wait, and what changing to them costs.

Pure, like rollout/: the pending pods (their MIG or GPU requests, node selectors, required node
affinity, tolerations and priority), the pods running on each GPU instance (from the agents'
`migagent.io/observed` reports), the PodDisruptionBudgets and the layout file go in; advice comes
out: per node a layout change priced by the rollout's own prediction (`rollout.impact.predict`),
per pending pod where it would run, and what stays unserved and why. The cluster is reached only
through a port (kube/demand_api.py in production; an in-memory one in the tests and the bench).
"""
