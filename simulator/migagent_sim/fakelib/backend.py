"""The Python side of the fake `libnvidia-ml.so.1` (native/fake_nvml/fake_nvml.c).

The C library checks what real NVML checks before the driver sees a call (NULL pointers, struct
versions, caller-sized buffers) and calls `call(op, a0, a1, a2, a3, text)` with the GIL held.
Handles cross the boundary as the simulator's fake addresses, so a handle the C caller got back
resolves to the same FakeNvml object here. The answer is `(nvml_return, ints, text)`.

Which simulated node answers:
* a FakeNvml bound in this process with `bind()` (the test suites, through `nvml_for`), or
* the node in `MIGAGENT_FAKE_NVML_STATE` (created from `MIGAGENT_FAKE_NVML_SPEC` when the file
  does not exist yet), shared with other processes and saved after every mutating call.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import pynvml

from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.fakelib.node import NodeConfigError, StateFileNode, node_from_environment
from migagent_sim.fakelib.ops import OPS
from migagent_sim.fakelib.ops_info import INFO_OPS

LIBRARY_ENV = "MIGAGENT_TEST_NVML_LIBRARY"
"""Set (to anything but empty/0) when the test suites run GpuDriver over pynvml and the fake library."""

Answer = tuple[int, tuple[int, ...], bytes | None]

_OPS = {**OPS, **INFO_OPS}
_bound: FakeNvml | None = None
_file_node: StateFileNode | None = None


def bind(fake: FakeNvml | None) -> None:
    """Serve this process's NVML calls from `fake` (None: from the state file again)."""
    global _bound  # noqa: PLW0603 - one simulated node per process, like one driver per host
    _bound = fake


def library_selected() -> bool:
    return os.environ.get(LIBRARY_ENV, "") not in ("", "0")


def nvml_for(fake: FakeNvml) -> Any:
    """The NVML library GpuDriver should use for `fake`: the fake itself, or, when the suites run
    through the fake C library (MIGAGENT_TEST_NVML_LIBRARY, with LD_LIBRARY_PATH naming its
    directory), the real `pynvml` module answering from `fake` through libnvidia-ml.so.1."""
    if not library_selected():
        return fake
    bind(fake)
    return pynvml


def call(op: str, a0: int, a1: int, a2: int, a3: int, text: str | None) -> Answer:  # noqa: PLR0917 - C calls positionally
    """Entry point for the C library; never raises (an exception becomes NVML_ERROR_UNKNOWN)."""
    try:
        handler = _OPS[op]
        if _bound is not None:
            return _answer(handler(_bound, a0, a1, a2, a3, text))
        with _node().session(op) as fake:
            return _answer(handler(fake, a0, a1, a2, a3, text))
    except pynvml.NVMLError as exc:
        return int(exc.value), (), None
    except NodeConfigError as exc:
        print(f"fake libnvidia-ml: {exc}", file=sys.stderr)
        return int(pynvml.NVML_ERROR_DRIVER_NOT_LOADED), (), None
    except Exception:  # a bug in the simulator must not unwind through C
        traceback.print_exc()
        return int(pynvml.NVML_ERROR_UNKNOWN), (), None


def _node() -> StateFileNode:
    global _file_node  # noqa: PLW0603 - created on first use from the environment
    if _file_node is None:
        _file_node = node_from_environment()
    return _file_node


def _answer(result: tuple[tuple[int, ...], bytes | None]) -> Answer:
    ints, text = result
    return int(pynvml.NVML_SUCCESS), ints, text
