"""Error classes, by what the caller should do about them.

Errors are classified where they enter (the NVML driver, the Kubernetes adapter, the layout
parser) and raised `from` their cause, so the state machine branches on a type, not a string.
"""

from __future__ import annotations


class MigAgentError(Exception):
    """Base of every error migagent raises on purpose."""


class PermanentError(MigAgentError):
    """Retrying the same operation will not help; the attempt fails with this reason."""


class TransientError(MigAgentError):
    """Worth retrying after a delay (seconds)."""

    def __init__(self, message: str, *, delay: float = 1.0) -> None:
        super().__init__(message)
        self.delay = delay


class InUseError(PermanentError):
    """A GPU, GI or CI is held by a process or client; it must be freed before retrying."""


class InsufficientResourcesError(PermanentError):
    """NVML found no room for an instance: the plan does not match the GPU; re-observe and re-plan."""


class ResetRequiredError(PermanentError):
    """A MIG mode change needs a GPU reset (or a reboot where reset is not supported)."""


class NoPermissionError(PermanentError):
    """NVML answered NO_PERMISSION: not root, or without the mig/config capability."""


class NotSupportedError(PermanentError):
    """The GPU or driver does not support the operation."""


class InvalidLayoutError(PermanentError):
    """A layout file or selection that cannot be used; the message names file, config, entry and field."""


class LayoutSelectsNoGpuError(InvalidLayoutError):
    """A config none of whose entries selects a GPU of this node: applying it would change nothing
    and report success, hiding a typo'd node label, filter or index. The message names the config
    and the node's GPUs."""


class LayoutDoesNotFitError(PermanentError):
    """A well-formed layout that cannot be realised on a GPU; the message names the GPU and what fails."""


class DrainBlockedError(PermanentError):
    """Pods that had to leave did not within the drain timeout; `pods` names them (namespace/name)."""

    def __init__(self, message: str, *, pods: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.pods = pods


class UsageError(MigAgentError):
    """A command-line flag or environment variable that cannot be used; the message names the flag
    (or variable), the value and what would be valid. Not a layout problem: nothing was read yet."""


class StorageError(PermanentError):
    """A file migagent must write (the journal, a simulated node's state) cannot be written: a full
    or read-only disk, a permission, a file-size limit, a path that is a directory. The message is
    one line naming the path and the errno; `path` and `errno` carry them for callers."""

    def __init__(self, message: str, *, path: str, errno: int | None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno
