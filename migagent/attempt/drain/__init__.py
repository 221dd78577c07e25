"""The drain: which pods a plan disturbs (scope), whether they may go (gate, gpu_processes), and
moving them through the Eviction API (drainer)."""
