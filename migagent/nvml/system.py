"""The production NVML library: the `pynvml` module from nvidia-ml-py, imported only when a real node is used."""

from __future__ import annotations

from typing import cast

from migagent.nvml.lib import NvmlLib


def system_nvml() -> NvmlLib:
    import pynvml  # noqa: PLC0415 - loading NVML is deferred until a real GPU node is asked for

    return cast(NvmlLib, pynvml)
