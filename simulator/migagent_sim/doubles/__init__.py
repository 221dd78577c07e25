"""The test doubles' home: what tests put in place of Kubernetes, the kubelet and the GPU driver.

The simulator distribution (`migagent_sim`) holds every fake migagent is tested against; the ones the
demo also runs sit beside the simulation, the ones only tests use sit here:

- `migagent_sim.apiserver.FakeApiServer`: the Kubernetes REST API over real HTTP (the demo's too);
  `migagent_sim.cluster_api.ClusterApi` is the interface it and tests/realkube's real one share.
- `migagent_sim.kubelet.FakeKubelet`: the node's kubelet (PodResources, device plugins, workloads),
  built the one way by `migagent_sim.cluster_config.make_kubelet`.
- `doubles.memory_kube.MemoryKube`: the in-memory `KubePort` (no HTTP, no threads), refusing what the
  API server refuses (409 on a stale resourceVersion, 404 for a missing node).
- `doubles.state_objects.StateObjects`: the rollout's and the autopilot's state objects (409 on a stale
  resourceVersion), under the model pool and the rollout's unit tests alike.
- `doubles.memory_node.MemoryNode`: NodeReconcile's whole world in memory: FakeNvml behind the real
  GpuDriver and engine, MemoryKube, an in-memory PodResources, a FakeClock.
- `doubles.notifier.RecordingNotifier`: what a host agent tells systemd, kept in memory.
- `doubles.unlisted`: a GPU model with a GI profile newer than the installed pynvml knows.
- `doubles.intercept`: seams around the GPU driver (callbacks around each NVML mutation, crashes).
- `doubles.builders`: observations, plans, holdings and pods as tests build them, named the way users write
  profiles (JSON pods for the API server: `apiserver.objects.pod_object`).

FakeNvml itself is the product's (`migagent.sim`, behind `--simulate`).
"""
