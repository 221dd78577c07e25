"""A blocker an attempt met after its cordon is remembered and looked for before the next cordon.

A pod stuck Terminating past its grace period, and a device plugin whose DaemonSet does not take
its pod off a paused node, meet every attempt in the same place: without memory each retry cordons
the node again, waits out the drain or the pause, and undoes it. With it, the first attempt is the
only cordon episode; the later ones are refused up front with the remedy, until the blocker is gone.
Short back-offs (1 s doubling to 4 s) over 20 simulated seconds, as the review measured them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from migagent.attempt.backoff import RetryHold
from migagent.attempt.phases import Outcome
from migagent.node.names import DEFAULT_OPERATOR_NAMESPACE, NEXT_RETRY_ANNOTATION
from migagent.node.port import PodRef, PodView
from migagent.reconcile.retry import RetryPolicy
from migagent_sim.doubles.memory_node import BALANCED, MemoryNode

SHORT = RetryPolicy(failure_backoff_initial=1.0, failure_backoff_max=4.0)
PLUGIN = PodView(
    ref=PodRef(DEFAULT_OPERATOR_NAMESPACE, "nvidia-device-plugin-daemonset-x1", "uid-plugin-1"),
    labels={"app": "nvidia-device-plugin-daemonset"},
    owner_kinds=("DaemonSet",),
    owner_names=("nvidia-device-plugin-daemonset",),
    node_name="gpu-node-1",
    phase="Running",
)


@pytest.fixture
def node(tmp_path: Path) -> MemoryNode:
    node = MemoryNode(tmp_path)
    node.settings = replace(node.settings, retry=SHORT)
    return node


def _for_twenty_seconds(node: MemoryNode) -> list[tuple[Outcome, str]]:
    """Run the agent loop as its timer would for 20 simulated seconds; (outcome, condition reason) each time."""
    agent = node.agent()
    seen: list[tuple[Outcome, str]] = []
    end = node.clock.monotonic() + 20.0
    while node.clock.monotonic() < end:
        outcome = agent.reconcile_once()
        seen.append((outcome, node.condition()[1]))
        node.clock.advance(agent.retry_in_s or 1.0)
    return seen


def test_a_pod_stuck_terminating_costs_one_cordon_episode_then_is_refused_up_front_until_it_is_gone(
    node: MemoryNode,
) -> None:
    stuck = node.gpu_pod("stuck", gpu=0, slot=4)
    node.kube.stuck_terminating.add(stuck.ref)
    node.set_label("all-balanced")

    seen = _for_twenty_seconds(node)

    assert node.kube.cordon_episodes == 1
    assert seen[0] == (Outcome.FAILED, "DrainBlocked")
    refusals = [outcome for outcome, reason in seen[1:] if outcome is Outcome.FAILED]
    assert len(refusals) >= 2, seen  # tried again on schedule, refused each time without a cordon
    message = node.condition()[2]
    assert "pod(s) ml/stuck on devices this change needs are still Terminating past their grace period" in message
    assert "`kubectl delete --grace-period=0 --force` them; nothing was cordoned" in message
    assert node.released()
    hold = RetryHold.from_annotation(node.kube.annotations[NEXT_RETRY_ANNOTATION])
    assert hold is not None
    assert [(b.kind, b.name, b.uid) for b in hold.blockers] == [("terminating", "stuck", stuck.ref.uid)]

    node.kube.pods.pop(stuck.ref)  # the admin removed its finalizer: the pod is gone
    node.clock.advance(5.0)
    assert node.agent().reconcile_once() is Outcome.APPLIED
    assert node.kube.allocatable == BALANCED
    assert node.kube.cordon_episodes == 2  # the one that failed, the one that applied


def test_a_device_plugin_that_stays_when_paused_costs_one_cordon_episode_then_is_refused_up_front(
    node: MemoryNode,
) -> None:
    node.kube.add_pod(PLUGIN)  # its DaemonSet lacks the pause condition: pausing never removes it
    node.set_label("all-balanced")

    seen = _for_twenty_seconds(node)

    assert node.kube.cordon_episodes == 1
    assert seen[0] == (Outcome.FAILED, "DevicePluginNotPaused")
    assert all(reason == "DevicePluginNotPaused" for _, reason in seen)
    message = node.condition()[2]
    assert "stayed on the node when the last attempt paused them, and the DaemonSet has not changed since" in message
    assert "--device-plugin-restart=delete-pod; nothing was cordoned" in message
    assert node.released()

    # The DaemonSet was patched: it rolled, and its new pod leaves a paused node (here: it is gone).
    node.kube.pods.pop(PLUGIN.ref)
    node.kube.add_pod(replace(PLUGIN, ref=PodRef(DEFAULT_OPERATOR_NAMESPACE, "nvidia-device-plugin-daemonset-y2",
                                                 "uid-plugin-2")))
    node.clock.advance(5.0)
    report = node.agent().reconcile_once()
    assert report is Outcome.FAILED  # this pod ignores the pause too (the patch was wrong): learnt anew
    assert node.kube.cordon_episodes == 2


def test_a_blocker_that_no_longer_stands_in_the_way_of_this_change_refuses_nothing(node: MemoryNode) -> None:
    stuck = node.gpu_pod("stuck", gpu=0, slot=4)
    node.kube.stuck_terminating.add(stuck.ref)
    node.set_label("all-balanced")
    agent = node.agent()
    assert agent.reconcile_once() is Outcome.FAILED
    # Another layout that keeps the stuck pod's GPU instance: the pod is not in its way.
    node.set_label("all-1g.10gb")
    assert agent.reconcile_once() is Outcome.UNCHANGED
