"""Property: any sequence of layouts converges, asserts as applied, and re-applying changes nothing."""

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from migagent.reconcile.assertion import config_mismatches
from tests.integration.apply.support import SimNode

A100_CONFIGS = ("all-disabled", "all-enabled", "a100-balanced", "a100-1g", "a100-gpu0-1g")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=st.lists(st.sampled_from(A100_CONFIGS), min_size=1, max_size=4))
def test_every_sequence_of_layouts_converges_and_a_repeat_apply_is_a_no_op(sequence: list[str]) -> None:
    with tempfile.TemporaryDirectory() as journal_dir, capture_logs():
        node = SimNode("2xA100-40GB", Path(journal_dir))
        for config in sequence:
            result = node.apply(config)
            assert result.converged, f"{sequence}: {config}: {result.error}"
            assert config_mismatches(node.observe(), node.desired(config)) == ()
        node.fake.sim_mutations = []
        assert node.apply(sequence[-1]).steps_run == ()
        assert node.fake.sim_mutations == []
