"""migagent: a node-level MIG partition manager for NVIDIA GPUs."""

__version__ = "0.1.0"
