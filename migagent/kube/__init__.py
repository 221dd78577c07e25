"""The Kubernetes side of migagent, and the only package (besides the simulator) that imports `kubernetes`.

adapter.KubeApi implements port.KubePort over the real client; the rest of migagent sees only the
typed values in port.py. names.py holds every label, annotation, condition and resource name.
"""
