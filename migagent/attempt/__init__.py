"""One node attempt: from a desired layout to a converged, re-advertised node (or an undone failure).

`reconcile_node.NodeReconcile` runs it: preflight, then one package per concern, each holding the
attempt's side (the phase) and the rules it applies: `drain` (scope, gate, evictions), `window` (cordon,
paused operands, host clients, their undo), `advertise` (what Node allocatable must show, the wait),
`report` (status writes); `apply` runs the engine, `backoff`/`backoff_check` hold a failed node.
`ports.py` is everything an attempt is given; `phases.py` its phase order; `listener.py` its observers.
"""
