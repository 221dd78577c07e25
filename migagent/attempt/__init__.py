"""One node attempt: from a desired layout to a converged, re-advertised node (or an undone failure).

`reconcile_node.NodeReconcile` runs it: preflight, plan and gate (gate), drain and apply inside the
change window (change_steps, change_window, post_change, services), wait for the advertisement
(advertisement), report (node_report), and the back-off after a failure (backoff, backoff_check).
`ports.py` is everything an attempt is given; `phases.py` its phase order; `listener.py` its observers.
"""
