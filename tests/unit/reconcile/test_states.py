from collections import deque

import pytest

from migagent.reconcile.states import (
    RESTART_FROM_OBSERVE,
    RESUMABLE,
    STABLE,
    TRANSITIONS,
    InvalidTransitionError,
    Phase,
    transition,
)


def test_every_non_stable_phase_is_in_exactly_one_restart_set() -> None:
    for phase in set(Phase) - STABLE:
        assert (phase in RESUMABLE) != (phase in RESTART_FROM_OBSERVE), phase


def test_stable_and_restart_sets_do_not_overlap() -> None:
    assert not STABLE & (RESUMABLE | RESTART_FROM_OBSERVE)


def test_every_phase_is_reachable_from_idle() -> None:
    seen = {Phase.IDLE}
    queue = deque([Phase.IDLE])
    while queue:
        for nxt in TRANSITIONS[queue.popleft()]:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    assert seen == set(Phase)


def test_every_phase_has_a_one_line_docstring() -> None:
    for phase in Phase:
        assert phase.__doc__, phase
        assert "\n" not in phase.__doc__.strip(), phase


def test_every_phase_can_reach_a_stable_phase() -> None:
    for start in Phase:
        seen, queue = {start}, deque([start])
        while queue:
            for nxt in TRANSITIONS[queue.popleft()]:
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        assert seen & STABLE, start


def test_an_allowed_transition_returns_the_target() -> None:
    assert transition(Phase.IDLE, Phase.OBSERVING) is Phase.OBSERVING


def test_an_illegal_transition_raises_naming_both_phases_and_the_allowed_ones() -> None:
    with pytest.raises(InvalidTransitionError, match=r"idle -> applying; allowed from idle: observing"):
        transition(Phase.IDLE, Phase.APPLYING)


def test_converged_cannot_jump_to_failed_without_a_new_attempt() -> None:
    with pytest.raises(InvalidTransitionError):
        transition(Phase.CONVERGED, Phase.FAILED)
