"""Keep a simulated node on disk the way real GPUs keep their state: after every change.

`persist_after_each_mutation` saves the node atomically (tmp + fsync + rename) after each successful
mutating NVML call, so a process killed at any instant leaves the GPUs as real ones would be: with
every call that returned done, whatever its journal says. Used by the CLI's `--state` and by
anything else that backs NVML with the simulator (a fake libnvidia-ml.so included).

`signal_after_mutations` is fault injection for tests: the process signals itself right after the
Nth mutating call has been persisted, before its caller learns that the call returned: SIGKILL is a
crash, SIGINT the user's Ctrl-C.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from migagent.sim.fake_nvml import FakeNvml


def persist_after_each_mutation(fake: FakeNvml, path: Path) -> None:
    """Save `fake` to `path` after every successful mutating call from now on."""

    def save(_name: str) -> None:
        fake.save(path)

    fake.sim_after_each_mutation(save)


def signal_after_mutations(fake: FakeNvml, count: int, signum: signal.Signals) -> None:
    """Send this process `signum` right after the `count`th mutating call from now on (1 = the first):
    SIGKILL is a crash; SIGINT or SIGTERM is the user's Ctrl-C or systemd's stop, mid-apply."""
    if count < 1:
        raise ValueError(f"the mutation to be signalled after must be 1 or more, got {count}")
    seen = 0

    def send(_name: str) -> None:
        nonlocal seen
        seen += 1
        if seen == count:
            os.kill(os.getpid(), signum)

    fake.sim_after_each_mutation(send)
