"""A simulated GPU node for any NVML client: NVIDIA's own tools included.

`python -m migagent_sim.gpu_node run --spec 8xH100-80GB-SXM --state node.json -- nvidia-mig-parted export`
runs a command with the fake libnvidia-ml.so.1 and nvidia-smi first on its library and program
paths, the node's state file named for them, and the files a driver provides beside NVML (the PCI
tree, /proc/modules, the MIG capability files and device nodes) at their fixed paths in a private
mount namespace. See docs/verification.md. (Kept free of imports: mounts.py runs under it.)
"""
