"""Each rule of the change window, on the in-memory KubePort."""

from __future__ import annotations

import json

import pytest

from migagent.attempt.report.status import StatusReporter
from migagent.attempt.window.change_window import RESUME_PLUGIN, START_HOST_CLIENTS, UNCORDON, ChangeWindow
from migagent.attempt.window.deviceplugin import GpuOperatorPause, PausedComponents
from migagent.attempt.window.post_change import PostChangeSteps
from migagent.attempt.window.services import HostClients, RecordingServiceManager
from migagent.clock import FakeClock
from migagent.errors import TransientError
from migagent.node.names import CORDONED_BY_MIGAGENT_ANNOTATION, HANDED_OVER_ANNOTATION, PAUSED_FOR_MIG_CHANGE
from migagent_sim.cluster import GPU_OPERATOR_LABELS
from migagent_sim.doubles.memory_kube import MemoryKube

PLUGIN = "nvidia.com/gpu.deploy.device-plugin"


class RecordingRestarter:
    """Pauses like the GPU Operator (through the real GpuOperatorPause) and records every resume."""

    pauses = True

    def __init__(self, kube: MemoryKube, *, fail_pause_after_labels: bool = False) -> None:
        self._real = GpuOperatorPause(kube, clock=FakeClock(), timeout_s=1.0)
        self._kube = kube
        self._fail = fail_pause_after_labels
        self.resumes: list[PausedComponents] = []

    def pause(self) -> PausedComponents:
        if self._fail:  # the labels are written, then the process dies before it can clean up
            self._kube.patch_metadata(labels={PLUGIN: PAUSED_FOR_MIG_CHANGE})
            raise TransientError("pods did not leave")
        return self._real.pause()

    def resume(self, paused: PausedComponents) -> None:
        self.resumes.append(paused)
        self._real.resume(paused)


def _window(
    kube: MemoryKube, restarter: RecordingRestarter, post_change: PostChangeSteps | None = None
) -> ChangeWindow:
    return ChangeWindow(kube, restarter, StatusReporter(kube), clock=FakeClock(), post_change=post_change)


@pytest.fixture
def kube() -> MemoryKube:
    return MemoryKube(labels=dict(GPU_OPERATOR_LABELS))


def test_the_undo_lifts_our_cordon_and_resumes_what_was_paused_in_reverse_order(kube: MemoryKube) -> None:
    window = _window(kube, RecordingRestarter(kube))
    window.cordon("all-balanced")
    window.pause()
    assert window.open == (UNCORDON, RESUME_PLUGIN)
    assert kube.labels[PLUGIN] == PAUSED_FOR_MIG_CHANGE

    assert window.unwind() == ()

    assert kube.labels == GPU_OPERATOR_LABELS
    assert not kube.unschedulable
    assert kube.writes[-1] == "uncordon", "the plugin resumed before the cordon was lifted"


def test_an_admin_cordon_is_never_lifted_by_the_undo(kube: MemoryKube) -> None:
    kube.unschedulable = True
    window = _window(kube, RecordingRestarter(kube))
    window.cordon("all-balanced")
    assert UNCORDON not in window.open
    window.unwind()
    assert kube.unschedulable


def test_a_pause_that_fails_after_writing_labels_is_still_undone(kube: MemoryKube) -> None:
    window = _window(kube, RecordingRestarter(kube, fail_pause_after_labels=True))
    with pytest.raises(TransientError):
        window.pause()
    assert window.open == (RESUME_PLUGIN,)
    window.unwind()
    assert kube.labels[PLUGIN] == "true"


def test_with_nothing_paused_the_plugin_is_restarted_on_undo_only_once_the_gpus_may_change() -> None:
    kube = MemoryKube()  # no GPU Operator labels: nothing to pause
    restarter = RecordingRestarter(kube)
    window = _window(kube, restarter)
    window.pause()
    assert not window.open
    window.gpus_may_change()
    assert window.open == (RESUME_PLUGIN,)
    window.unwind()
    assert restarter.resumes == [PausedComponents()]


def test_a_failed_resume_stays_open_so_the_undo_retries_it(kube: MemoryKube) -> None:
    restarter = RecordingRestarter(kube)
    window = _window(kube, restarter)
    window.pause()
    kube.fail("get_node", TransientError("HTTP 503"))
    with pytest.raises(TransientError):
        window.resume_plugin()
    assert RESUME_PLUGIN in window.open
    assert window.unwind() == ()
    assert kube.labels[PLUGIN] == "true"


def test_host_clients_are_stopped_once_per_change_and_started_exactly_once(kube: MemoryKube) -> None:
    systemd, steps = _host_clients(kube)
    window = _window(kube, RecordingRestarter(kube), steps)
    window.before_change()
    window.before_change()  # a superseded layout re-planned in the same attempt
    assert window.open == (START_HOST_CLIENTS,)
    window.after_change()
    assert not window.open
    assert [(c.action, c.unit) for c in systemd.calls] == [("stop", "dcgm.service"), ("start", "dcgm.service")]


def test_host_clients_stopped_by_a_failed_attempt_are_started_by_the_undo(kube: MemoryKube) -> None:
    systemd, steps = _host_clients(kube)
    window = _window(kube, RecordingRestarter(kube), steps)
    window.before_change()
    window.unwind()
    assert systemd.active == {"dcgm.service"}


def test_a_window_left_by_an_interrupted_attempt_is_adopted_and_closed(kube: MemoryKube) -> None:
    kube.set_unschedulable(True, annotations={CORDONED_BY_MIGAGENT_ANNOTATION: "true"})
    kube.patch_metadata(labels={PLUGIN: PAUSED_FOR_MIG_CHANGE})
    window = _window(kube, RecordingRestarter(kube))
    assert window.adopt(kube.get_node()) == (UNCORDON, RESUME_PLUGIN)
    window.unwind()
    assert not kube.unschedulable
    assert kube.labels[PLUGIN] == "true"


def test_a_handover_leaves_the_window_open_and_says_so_on_the_node(kube: MemoryKube) -> None:
    window = _window(kube, RecordingRestarter(kube))
    window.cordon("all-balanced")
    window.pause()
    assert window.hand_over(layout="all-balanced", attempt=2) == (UNCORDON, RESUME_PLUGIN)
    assert kube.unschedulable
    assert kube.labels[PLUGIN] == PAUSED_FOR_MIG_CHANGE
    note = json.loads(kube.annotations[HANDED_OVER_ANNOTATION])
    assert (note["layout"], note["attempt"], note["open"]) == ("all-balanced", 2, [UNCORDON, RESUME_PLUGIN])

    successor = _window(kube, RecordingRestarter(kube))
    assert successor.adopt(kube.get_node()) == (UNCORDON, RESUME_PLUGIN)
    successor.cordon("all-balanced")
    assert kube.cordon_episodes == 1, "the successor kept the one cordon"


def _host_clients(kube: MemoryKube) -> tuple[RecordingServiceManager, PostChangeSteps]:
    systemd = RecordingServiceManager(active=["dcgm.service"])
    return systemd, PostChangeSteps(
        api=kube, namespace="gpu-operator", host_clients=HostClients(systemd, ["dcgm.service"])
    )


def test_a_layout_superseded_after_the_plugin_resumed_pauses_the_plugin_again(kube: MemoryKube) -> None:
    window = _window(kube, RecordingRestarter(kube))
    window.pause()
    window.resume_plugin()
    assert kube.labels[PLUGIN] == "true"

    window.pause_again()  # the GPUs are about to change once more under the re-planned layout

    assert kube.labels[PLUGIN] == PAUSED_FOR_MIG_CHANGE
    assert window.open == (RESUME_PLUGIN,)


def test_a_layout_superseded_while_the_plugin_is_paused_pauses_nothing_twice(kube: MemoryKube) -> None:
    window = _window(kube, RecordingRestarter(kube))
    window.pause()
    writes = list(kube.writes)
    window.pause_again()
    assert kube.writes == writes
    assert window.open == (RESUME_PLUGIN,)


def test_a_handover_starts_the_host_clients_the_change_stopped(kube: MemoryKube) -> None:
    systemd, steps = _host_clients(kube)
    window = _window(kube, RecordingRestarter(kube), steps)
    window.cordon("all-balanced")
    window.before_change()
    assert "dcgm.service" not in systemd.active

    assert window.hand_over(layout="all-balanced", attempt=1) == (UNCORDON,)

    assert systemd.active == {"dcgm.service"}, "the successor cannot know which units were stopped"
    assert json.loads(kube.annotations[HANDED_OVER_ANNOTATION])["open"] == [UNCORDON]


def test_the_forward_path_closes_the_window_resuming_the_plugin_once_and_uncordoning(kube: MemoryKube) -> None:
    restarter = RecordingRestarter(kube)
    window = _window(kube, restarter)
    window.cordon("all-balanced")
    window.pause()
    window.resume_plugin()
    window.uncordon()

    assert window.open == ()
    assert not kube.unschedulable
    assert kube.labels[PLUGIN] == "true"
    assert window.unwind() == ()
    assert len(restarter.resumes) == 1, "the undo resumed the plugin a second time"


def test_an_abandoned_change_settles_the_gpus_only_once_they_may_have_changed(kube: MemoryKube) -> None:
    settled: list[str] = []

    def settle() -> tuple[str, ...]:
        settled.append("settled")
        return ()

    def window() -> ChangeWindow:
        return ChangeWindow(kube, RecordingRestarter(kube), StatusReporter(kube), clock=FakeClock(), settle_gpus=settle)

    untouched = window()
    untouched.abandon()
    assert settled == []

    touched = window()
    touched.gpus_may_change()
    touched.abandon()
    assert settled == ["settled"]


def test_an_interrupted_attempts_paused_plugin_is_resumed_even_with_no_cordon(kube: MemoryKube) -> None:
    kube.patch_metadata(labels={PLUGIN: PAUSED_FOR_MIG_CHANGE})
    window = _window(kube, RecordingRestarter(kube))
    assert window.adopt(kube.get_node()) == (RESUME_PLUGIN,)
    window.unwind()
    assert kube.labels[PLUGIN] == "true"
