"""Which nodes `migagent status` lists: those marked for MIG, including the standalone overlay's
admin-chosen nodes (migagent.io/enabled=true) before any layout was asked for."""

from __future__ import annotations

import pytest

from migagent.attempt.report.fleet_rows import is_mig_node
from migagent.node.port import NodeView


@pytest.mark.parametrize(
    ("labels", "listed"),
    [
        ({"migagent.io/enabled": "true"}, True),
        ({"nvidia.com/mig.capable": "true"}, True),
        ({"nvidia.com/mig.config": "all-1g.10gb"}, True),
        ({"migagent.io/enabled": "false"}, False),
        ({"pool": "cpu"}, False),
    ],
)
def test_a_node_is_a_mig_node_when_marked_for_mig(labels: dict[str, str], listed: bool) -> None:
    assert is_mig_node(NodeView(name="n", uid="u", resource_version="1", labels=labels)) is listed
