"""Reading, for one attempt, whether the last failure's back-off still holds (attempt.backoff).

The digest is taken the same way at a failed attempt's start (before its first write) and at every
later check, so equal digests mean nothing the attempt depended on changed. It takes what the attempt
read (`AttemptReads`: the layout bytes, the observation, the pods), never reading them again. The pods
count only for a layout that resolves: a refused layout is not asked about who uses the GPUs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import structlog

from migagent.attempt.advertise.expected import check_advertisable
from migagent.attempt.backoff import RetryHold, depends_on
from migagent.attempt.blockers import Blocker
from migagent.attempt.ports import AgentPorts, AgentSettings
from migagent.attempt.reads import AttemptReads
from migagent.errors import InvalidLayoutError, StorageError
from migagent.node.port import NodeView, PodView

log = structlog.get_logger(__name__)


class BackoffCheck:
    def __init__(self, ports: AgentPorts, settings: AgentSettings) -> None:
        self._p = ports
        self._settings = settings

    def digest(self, node: NodeView, reads: AttemptReads) -> str:
        """What an attempt applying `reads.name` depends on, from what the attempt read (or reads now)."""
        observation = reads.observation()
        try:
            desired = reads.desired()
            check_advertisable(desired, observation, self._settings.mig_strategy)
            listed: Sequence[PodView] = reads.pods()
        except InvalidLayoutError:  # NotAdvertisableError and LayoutSelectsNoGpuError included
            listed = []
        found = depends_on(
            layout_text=reads.layout_bytes, observation=observation, gpu_pods=listed, allocatable=node.allocatable
        )
        return f"{found}:{self._own_state()}"

    def _own_state(self) -> str:
        """The agent's side of what an attempt depends on: its settings that decide a refusal (a restarted
        agent with --delete-emptydir-data or another --mig-strategy is a change) and whether its journal
        directory can be written (fixed storage is a change)."""
        try:
            self._p.engine.check_storage(None)
            storage = "writable"
        except StorageError as exc:
            storage = f"unwritable:{exc.errno}"
        settings = self._settings
        own = repr((settings.mig_strategy, getattr(settings, "gate", None), settings.force_delete, storage))
        return hashlib.sha256(own.encode()).hexdigest()[:16]

    def holds(self, hold: RetryHold | None, node: NodeView, reads: AttemptReads) -> bool:
        """True while the retry time has not come, the label is the same and nothing else changed."""
        name = reads.name
        if hold is None or hold.due(now=self._p.clock.wall(), label=name):
            return False
        try:
            changed = hold.depends is not None and self.digest(node, reads) != hold.depends
        except Exception as exc:  # what cannot be read now would fail the attempt too: keep holding
            log.info("held_dependencies_unreadable", error=str(exc))
            changed = False
        if changed:
            log.info("back_off_lifted", reason="something the failed attempt depended on changed")
            return False
        log.info("held_by_back_off", layout=name, retry_in_s=round(hold.at - self._p.clock.wall(), 3))
        return True

    def after_failure(
        self, node: NodeView | None, reads: AttemptReads | None, *, depends: str | None, failures: int,
        blockers: tuple[Blocker, ...] = (),
    ) -> RetryHold:
        """The hold a failed attempt leaves. `depends`: its digest taken before its first write; None
        when it failed before disturbing anything, so the node is as it found it: digested from what
        the attempt read (what it could not read is read now). `blockers`: what it met after its
        cordon, for the next attempt to look for first."""
        label = reads.name if reads is not None else None
        if depends is None and node is not None and reads is not None:
            try:
                depends = self.digest(node, reads)
            except Exception:  # unreadable now: then only the time and the label hold
                depends = None
        delay = self._settings.retry.failure_delay(failures)
        return RetryHold(self._p.clock.wall() + delay, label, depends, failures=failures, blockers=blockers)
