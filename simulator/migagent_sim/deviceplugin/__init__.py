"""The kubelet's device plugin API (v1beta1, stubs generated from the real proto) on both sides.

The kubelet side (`DeviceManager`, its `RegistrationServer` and its client of each plugin) is the
one path every plugin takes to the Node's advertisement: the simulated NVIDIA plugin
(`SimulatedPluginServer`, driven by migagent_sim.kubelet_plugin) and NVIDIA's real plugin binary alike.
"""

from migagent_sim.deviceplugin.manager import (
    HEALTHY,
    UNHEALTHY,
    AllocationError,
    DeviceManager,
    PodDeviceEntry,
    RegistrationError,
)
from migagent_sim.deviceplugin.plugin_server import SimulatedPluginServer, plugin_socket_name
from migagent_sim.deviceplugin.registration import (
    DEVICE_PLUGIN_PATH,
    KUBELET_SOCKET,
    RegistrationServer,
    is_extended_resource_name,
)

__all__ = [
    "DEVICE_PLUGIN_PATH",
    "HEALTHY",
    "KUBELET_SOCKET",
    "UNHEALTHY",
    "AllocationError",
    "DeviceManager",
    "PodDeviceEntry",
    "RegistrationError",
    "RegistrationServer",
    "SimulatedPluginServer",
    "is_extended_resource_name",
    "plugin_socket_name",
]
