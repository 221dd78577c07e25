"""The driver's character devices: their majors, and `/proc/devices` listing them. (Light on purpose:
mounts.py imports it in the short-lived process that sets the namespace up.)"""

from __future__ import annotations

NVIDIA_MAJOR = 195  # fixed by the driver: /dev/nvidiaN, /dev/nvidiactl (255), /dev/nvidia-modeset (254)
# nvidia-caps and nvidia-uvm majors are dynamic on a real host; these are the node's.
DEVICE_MAJORS = {"nvidia-frontend": NVIDIA_MAJOR, "nvidia-caps": 508, "nvidia-uvm": 509}


def proc_devices(host: str) -> str:
    """The host's `/proc/devices` with the driver's character devices added."""
    lines = host.splitlines()
    at = lines.index("Character devices:") + 1 if "Character devices:" in lines else 0
    added = [f"{major:3d} {name}" for name, major in DEVICE_MAJORS.items()]
    return "\n".join([*lines[:at], *added, *lines[at:]]) + "\n"
