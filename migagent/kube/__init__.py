"""The Kubernetes client adapter: the only package (besides the simulator) that imports `kubernetes`.

`adapter.KubeApi` implements `migagent.node.port.KubePort` over the real client; each resource has
its module (nodes, pods, pdbs, lease, events, owners, cluster_reads, rollout_api), `classify` turns
API errors into transient/permanent ones, `convert` turns client models into the port's typed views.
What the agent does with those views (drain scope, status, advertisement) lives in `migagent.node`.
"""
