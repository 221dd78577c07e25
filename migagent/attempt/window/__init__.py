"""The change window: every disturbance of the node outside the GPUs and its undo (change_window):
the cordon, the paused device plugin and operands, the operator's steps and host GPU clients."""
