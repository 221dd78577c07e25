"""Process plumbing: health state and its HTTP endpoints, Prometheus metrics, logging setup and
progress lines, systemd notify. None of it decides anything about the node.
"""
