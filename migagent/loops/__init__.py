"""The long-running loops around attempts: the agent (node label -> attempts), the host mode (file and
boot), the node's ownership (Lease + state lock), waiting for the GPU Operator, reporting an agent
that cannot work at all.
"""
