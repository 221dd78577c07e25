"""The node's rules, written over the typed port; no `kubernetes` import.

`port.py` is `KubePort` and its typed views (NodeView, PodView, ...); `names.py` holds every label,
annotation, condition and resource name. The rest decide what to do with those views: which pods a
change disturbs (drain_scope, drain), what the node should advertise (expected, advertisement,
deviceplugin, dra), status writes (status, reasons), cordon, PDBs (budgets), other MIG managers
(owners), time-slicing (sharing_source). `migagent.kube` implements the port over the real client.
"""
