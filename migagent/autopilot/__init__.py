"""The autopilot: an opt-in controller that turns persistent demand into layout changes, within guardrails.

Each look: the pods that have waited at least --persist for a MIG device (or `nvidia.com/gpu` on a
`single` node) are the demand; the nodes labelled for the autopilot that are not in their cool-down,
in a pool that has changes left this hour, are what may change; `demand.advise` says which changes
serve that demand for the fewest evictions; the autopilot starts them as one rollout (its budgets,
canary and halt) and drives it. Every decision, acted on or not, is an Event and a record in its
history (its state object, ConfigMap migagent-autopilot). Pure decisions (decide.py) over a port
(port.py) and a clock: kube/demand_api.py in production, an in-memory pool in the tests and bench.
"""
