"""mig-parted's apply sequence (mode part, then config part) refuses up front what it would refuse half-way."""

from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from migagent.cli.apply_outcome import StopSignals
from migagent.errors import InUseError, LayoutDoesNotFitError
from migagent.reconcile.session import ApplySession
from migagent.reconcile.states import Phase
from tests.integration.apply.support import SimNode

MakeNode = Callable[[str], SimNode]


def _run(node: SimNode, config: str, *, mode_only: bool = False) -> None:
    session = ApplySession(engine=node.engine(), observe=node.observe)
    with capture_logs():
        session.run(node.desired(config), config_name=config, mode_only=mode_only)


def test_a_layout_that_does_not_fit_changes_no_mig_mode_before_it_is_refused(make_node: MakeNode) -> None:
    node = make_node("2xA100-40GB")  # MIG disabled: the mode part alone would enable and reset both GPUs
    with pytest.raises(LayoutDoesNotFitError, match=r"^GPU 0 .*closest layout that fits: 3g.20gb x2"):
        _run(node, "a100-too-big")
    assert node.fake.sim_mutations == []
    assert not any(gpu.mig_pending for gpu in node.observe().gpus)


def test_mode_only_does_not_judge_the_fit_of_the_instances(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    _run(node, "a100-too-big", mode_only=True)
    assert node.observe().gpu(0).mig_current


def test_a_busy_gi_on_one_gpu_stops_a_mode_change_on_another_before_any_mutation(make_node: MakeNode) -> None:
    node = make_node("2xA100-40GB")
    _run(node, "a100-gpu1-balanced")
    doomed = next(gi for gi in node.observe().gpu(1).gpu_instances if gi.profile_id == 9)  # the 3g GI
    uuid = doomed.compute_instances[0].uuid
    node.fake.sim_attach_process(uuid, pid=4242)
    node.fake.sim_mutations = []
    with pytest.raises(InUseError, match=rf"pid 4242 on {uuid} \(GPU 1\).*nothing was changed"):
        _run(node, "a100-gpu0-on-gpu1-1g")
    assert node.fake.sim_mutations == []
    gpu0 = node.observe().gpu(0)
    assert (gpu0.mig_current, gpu0.mig_pending) == (False, False)


@pytest.mark.parametrize("left", [Phase.APPLYING, Phase.FAILED, Phase.REBOOT_REQUESTED])
@pytest.mark.parametrize("mode_only", [False, True])
def test_an_apply_with_nothing_left_to_do_closes_the_record_an_earlier_attempt_left_open(
    make_node: MakeNode, left: Phase, mode_only: bool
) -> None:
    node = make_node("2xH100-80GB-SXM")
    _run(node, "h100-2x3g")
    # An earlier attempt got the GPUs there but its last record never landed (a full disk, a kill).
    journal = node.journal()
    record = journal.load()
    assert record is not None
    journal.save(record.evolve(phase=left, last_error="cannot write the journal: No space left on device (ENOSPC)"))
    node.fake.sim_mutations = []
    _run(node, "h100-2x3g", mode_only=mode_only)
    assert node.fake.sim_mutations == []  # nothing was left to do on the GPUs
    closed = node.journal().load()
    assert closed is not None
    assert closed.phase is Phase.CONVERGED
    assert closed.last_error is None


def test_a_stop_asked_with_only_steps_already_done_left_lets_the_apply_converge(make_node: MakeNode) -> None:
    """Issue 37 item 15: a stop asked during the reset of both GPUs (GPU 1's reset step then has nothing
    left to call) stopped at that step: `run the same apply again`, the journal left `applying`."""
    node = make_node("2xA100-40GB")
    _run(node, "a100-balanced")
    stop = StopSignals()
    node.fake.sim_after_each_mutation(lambda call: stop.on("SIGINT", 130)() if call == "sim_reset_gpu" else None)
    session = ApplySession(engine=node.engine(), observe=node.observe, checkpoint=stop.checkpoint)
    with capture_logs():
        report = session.run(node.desired("all-disabled"), config_name="all-disabled", mode_only=False)
    assert stop.signal_name == "SIGINT"
    assert report.mode is not None
    assert report.mode.converged
    record = node.journal().load()
    assert record is not None
    assert record.phase is Phase.CONVERGED
