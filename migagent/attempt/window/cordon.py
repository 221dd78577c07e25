"""Cordon the node for a change, and uncordon only a cordon migagent itself made.

The annotation `migagent.io/cordoned-by-migagent: "true"` is written in the same patch as the
cordon, so after a crash the next attempt still knows the cordon is ours. A node an admin had
cordoned carries no such annotation and is never uncordoned by migagent.
"""

from __future__ import annotations

import structlog

from migagent.node.names import CORDONED_BY_MIGAGENT_ANNOTATION
from migagent.node.port import KubePort, NodeView

log = structlog.get_logger(__name__)

_OURS = "true"


def cordoned_by_us(node: NodeView) -> bool:
    return node.annotations.get(CORDONED_BY_MIGAGENT_ANNOTATION) == _OURS


class Cordon:
    def __init__(self, api: KubePort) -> None:
        self._api = api

    def cordon(self) -> bool:
        """Make the node unschedulable; True when migagent owns the cordon (and must undo it)."""
        node = self._api.get_node()
        if node.unschedulable:
            # Already cordoned: by us in an earlier, interrupted attempt, or by an admin (then not ours).
            ours = cordoned_by_us(node)
            log.info("node_already_cordoned", node=node.name, by_migagent=ours)
            return ours
        self._api.set_unschedulable(True, annotations={CORDONED_BY_MIGAGENT_ANNOTATION: _OURS})
        log.info("node_cordoned", node=node.name)
        return True

    def uncordon(self) -> bool:
        """Lift migagent's own cordon; an admin's cordon stays. True when the node was uncordoned."""
        node = self._api.get_node()
        if not cordoned_by_us(node):
            if node.unschedulable:
                log.info("admin_cordon_kept", node=node.name)
            return False
        self._api.set_unschedulable(False, annotations={CORDONED_BY_MIGAGENT_ANNOTATION: None})
        log.info("node_uncordoned", node=node.name)
        return True
