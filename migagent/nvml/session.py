"""NVML held only while a unit of work runs: `NvmlSession`, refcounted, one library init at a time.

An NVML client that stays initialised holds every GPU it attached: `nvidia-smi -r` by anyone else
is refused, and a driver unload (a GPU Operator driver upgrade) is blocked. mig-manager holds NVML
only inside short runs; so does migagent. Every `GpuDriver` method opens a session; an observe, an
apply or a doctor run opens one around all of its calls, so nested sessions are one `nvmlInit`
(depth counted here, never by NVML's own reference count, so a release around a reset is one
`nvmlShutdown`). Between units of work an idle agent holds NVML on no device.

A lock guards the depth and the init/shutdown calls only, not the session's body: a session may be
opened on one thread and used on another (tests enter a driver on the main thread and run the host
loop on a second one). A reset releases NVML for the whole process; migagent runs its NVML units of
work on one thread at a time, so no other session is pulled from under a caller.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from migagent.errors import MigAgentError
from migagent.nvml.errors import nvml_call

_NODE = "node"


class _Lifetime(Protocol):
    def nvmlInit(self) -> object: ...  # noqa: N802
    def nvmlShutdown(self) -> object: ...  # noqa: N802


class NvmlSession:
    """`with session.open():` around a unit of work; NVML is initialised at the outermost open only."""

    def __init__(self, lib: _Lifetime) -> None:
        self._lib = lib
        self._lock = threading.Lock()
        self._depth = 0
        self._initialised = False

    @property
    def depth(self) -> int:
        """How many opens are in progress (0: NVML is not held by this process's migagent)."""
        return self._depth

    @property
    def held(self) -> bool:
        return self._initialised

    @contextmanager
    def open(self) -> Iterator[None]:
        self.acquire()
        failed = True
        try:
            yield
            failed = False
        finally:
            self.release(quiet=failed)

    def acquire(self) -> None:
        """Open a session without a block (`GpuDriver.__enter__`); `release` ends it.

        Not a generator kept suspended: one collected as garbage would end the session at random."""
        with self._lock:
            if self._depth == 0:
                with nvml_call("nvmlInit", _NODE):
                    self._lib.nvmlInit()
                self._initialised = True
            self._depth += 1

    def release(self, *, quiet: bool = False) -> None:
        """End a session; `quiet`: a failed nvmlShutdown is not raised (an error is already leaving)."""
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._close(quiet=quiet)

    def _close(self, *, quiet: bool) -> None:
        if not self._initialised:
            return  # released around a reset and not initialised again
        self._initialised = False
        try:
            with nvml_call("nvmlShutdown", _NODE):
                self._lib.nvmlShutdown()
        except MigAgentError:
            # An error already leaving the block says what went wrong; a failed shutdown must not hide it.
            if not quiet:
                raise

    @contextmanager
    def released(self, gpu_label: str) -> Iterator[None]:
        """NVML shut down for the block (a GPU reset by nvidia-smi), then initialised again if a
        session is open. Handles taken before are stale after it."""
        with self._lock:
            if self._initialised:
                with nvml_call("nvmlShutdown (before the GPU reset)", gpu_label):
                    self._lib.nvmlShutdown()
                self._initialised = False
        try:
            yield
        finally:
            with self._lock:
                if self._depth > 0:
                    # Initialised again whatever the reset did: the driver stays usable for the session.
                    with nvml_call("nvmlInit (after the GPU reset)", gpu_label):
                        self._lib.nvmlInit()
                    self._initialised = True
