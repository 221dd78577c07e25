"""MIG mode changes that a GPU reset cannot activate (pass-through VMs), and --skip-reset."""

from collections.abc import Callable

from structlog.testing import capture_logs

from migagent.reconcile.machine import ApplyOutcome
from migagent.reconcile.states import Phase
from tests.integration.apply.support import SimNode

MakeNode = Callable[[str], SimNode]


def _passthrough_a100(make_node: MakeNode) -> SimNode:
    node = make_node("A100-40GB")
    node.fake.sim_set_reset_supported(0, False)
    return node


def test_reset_unsupported_with_reboot_allowed_requests_a_reboot_and_records_it(make_node: MakeNode) -> None:
    node = _passthrough_a100(make_node)
    with capture_logs() as logs:
        result = node.apply("a100-balanced", allow_reboot=True)
    assert result.outcome is ApplyOutcome.REBOOT_REQUESTED
    assert len(node.reboots.reasons) == 1
    assert "GPU 0" in node.reboots.reasons[0]
    record = node.journal().load()
    assert record is not None
    assert record.phase is Phase.REBOOT_REQUESTED
    assert record.reboot_requested
    assert "reboot_requested" in [e["event"] for e in logs]


def test_after_the_reboot_a_fresh_engine_converges(make_node: MakeNode) -> None:
    node = _passthrough_a100(make_node)
    with capture_logs():
        node.apply("a100-balanced", allow_reboot=True)
        node.reboot()  # Ampere activates the pending mode at boot; the boot id changes
        result = node.apply("a100-balanced", allow_reboot=True)
    assert result.converged, result.error
    assert len(node.reboots.reasons) == 1
    record = node.journal().load()
    assert record is not None
    assert not record.reboot_requested


def test_a_reboot_that_did_not_activate_the_mode_fails_instead_of_rebooting_again(make_node: MakeNode) -> None:
    node = _passthrough_a100(make_node)
    with capture_logs():
        node.apply("a100-balanced", allow_reboot=True)
        node.boot.reboot()  # a new boot, but the GPU still has MIG off
        result = node.apply("a100-balanced", allow_reboot=True)
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "reboot did not activate MIG mode on GPU 0" in result.error
    assert len(node.reboots.reasons) == 1


def test_applying_again_before_the_reboot_happened_asks_again_without_failing(make_node: MakeNode) -> None:
    node = _passthrough_a100(make_node)
    with capture_logs():
        node.apply("a100-balanced", allow_reboot=True)
        result = node.apply("a100-balanced", allow_reboot=True)
    assert result.outcome is ApplyOutcome.REBOOT_REQUESTED
    assert len(node.reboots.reasons) == 2


def test_reset_unsupported_without_reboot_allowed_fails_saying_a_reboot_is_needed(make_node: MakeNode) -> None:
    node = _passthrough_a100(make_node)
    with capture_logs():
        result = node.apply("a100-balanced")
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "reboot" in result.error
    assert "--allow-reboot" in result.error
    assert node.reboots.reasons == []


def test_a_reset_that_is_refused_as_unsupported_also_leads_to_a_reboot(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    with capture_logs():
        result = node.apply("all-enabled", skip_reset=True)  # mode now pending
    assert result.outcome is ApplyOutcome.RESET_PENDING
    node.fake.sim_set_reset_supported(0, False)
    with capture_logs():
        result = node.apply("all-enabled", allow_reboot=True)
    assert result.outcome is ApplyOutcome.REBOOT_REQUESTED
    assert "reset is not supported" in node.reboots.reasons[0]


def test_skip_reset_leaves_the_ampere_mode_pending_and_a_later_apply_only_resets(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    with capture_logs():
        first = node.apply("all-enabled", skip_reset=True)
    assert first.outcome is ApplyOutcome.RESET_PENDING
    gpu = node.observe().gpu(0)
    assert (gpu.mig_current, gpu.mig_pending) == (False, True)
    node.fake.sim_mutations = []
    with capture_logs():
        second = node.apply("all-enabled")
    assert second.converged
    assert node.fake.sim_mutations == ["sim_reset_gpu"]


def test_a_hopper_mode_change_blocked_by_a_client_fails_naming_the_gpu(make_node: MakeNode) -> None:
    node = make_node("H100-80GB-SXM")
    node.fake.sim_set_client_attached(0, True)
    with capture_logs():
        result = node.apply("all-enabled")
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "GPU 0" in result.error
    assert "in use" in result.error
    node.fake.sim_set_client_attached(0, False)
    with capture_logs():
        assert node.apply("all-enabled").converged
