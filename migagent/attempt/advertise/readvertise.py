"""Whether the device plugin advertises what the GPUs hold: before a change (is a restart needed at
all?) and after it (wait until Node allocatable shows the new devices).

A plugin only starting (node boot, pod recreated) gets the settle period before anything is
cordoned or restarted; after an interrupted or failed attempt it is known to be behind and gets none.
After a change, every poll of the Node is a safe point (a label change supersedes the layout).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from migagent.attempt.advertise.wait import AdvertisementTimeoutError, wait_for_advertisement
from migagent.attempt.ports import AgentPorts, AgentSettings
from migagent.attempt.report.status import StatusReporter
from migagent.attempt.undo import StopRequested
from migagent.layout.observed import Observation
from migagent.node.names import MIG_CONFIG_STATE_LABEL, ConditionReason, MigConfigState
from migagent.node.port import NodeView

log = structlog.get_logger(__name__)


class Advertisement:
    def __init__(
        self, ports: AgentPorts, settings: AgentSettings, status: StatusReporter, *, stop: threading.Event | None
    ) -> None:
        self._p = ports
        self._settings = settings
        self._status = status
        self._stop = stop

    def use(self, settings: AgentSettings) -> None:
        """The settings of this attempt once resolved (--mig-strategy auto reads the strategy first)."""
        self._settings = settings

    def current(self, node: NodeView, observation: Observation, *, known_behind: bool) -> NodeView | None:
        """The node once it advertises what the GPUs hold; None: the plugin needs a restart."""
        expected = self._p.advertisement.expected(observation, strategy=self._settings.mig_strategy, node=node)
        if expected.matches(node.allocatable)[0]:
            return node
        if known_behind or node.labels.get(MIG_CONFIG_STATE_LABEL) not in (None, MigConfigState.SUCCESS):
            return None
        log.info("waiting_for_device_plugin_to_settle", settle_s=self._settings.plugin_settle_s)
        try:
            return wait_for_advertisement(
                self._p.api.get_node, expected, timeout_s=self._settings.plugin_settle_s, clock=self._p.clock,
                poll_interval_s=self._settings.readvertise_poll_s, stop=self._stop,
            )
        except AdvertisementTimeoutError:
            if self._stop is not None and self._stop.is_set():
                raise StopRequested("stop requested while waiting for the device plugin to settle") from None
            return None

    def after_change(self, name: str, checkpoint: Callable[[], None]) -> Observation:
        """Wait until Node allocatable shows what the GPUs now hold; returns that observation."""
        after = self._p.driver.observe()
        # The newest Node the agent's watch holds (no request) tells the plugin's config label; else read.
        updates = self._p.node_updates
        _, watched = updates.node_after(-1, 0.0) if updates is not None else (0, None)
        expected = self._p.advertisement.expected(after, strategy=self._settings.mig_strategy, node=watched)
        self._status.progress(
            ConditionReason.WAITING_FOR_DEVICE_PLUGIN,
            f"layout {name} is on the GPUs; waiting for the device plugin to advertise {expected.describe()}",
        )
        started = self._p.clock.monotonic()
        wait_for_advertisement(
            self._p.api.get_node,
            expected,
            timeout_s=self._settings.readvertise_timeout_s,
            clock=self._p.clock,
            poll_interval_s=self._settings.readvertise_poll_s,
            stop=self._stop,
            updates=self._p.node_updates,
            checkpoint=checkpoint,
        )
        self._p.listener.readvertise_wait(self._p.clock.monotonic() - started)
        return after
