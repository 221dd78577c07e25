"""NVIDIA's mig-manager and migagent, side by side on the same simulated node, pods and label changes.

Both run as processes against the real control plane of tests/realkube (etcd, kube-apiserver,
kube-controller-manager), each under its own service account and RBAC, on a simulated 8x H100 node
whose GPUs both reach through the fake libnvidia-ml.so.1. `python -m bench.head_to_head` runs the
scenarios (bench/head_to_head/scenarios.py) and prints the tables; see bench/README.md.
"""
