"""The edges of `migagent rollout` against a simulated pool, through the real client over HTTP: a state
object that cannot be read, two starts of one name at once, a node relabelled by hand mid-rollout."""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
from collections.abc import Callable

import pytest

from migagent.cli import build_parser, main
from migagent.cli.rollout import run_start
from migagent.cli.rollout_view import ending_lines
from migagent.kube.rollout_api import RolloutApi, StoredState, state_object_name
from migagent.node.names import MIG_CONFIG_LABEL, ROLLOUT_NAMESPACE
from migagent.rollout.errors import AlreadyStartedError
from migagent.rollout.ownership import EVENT_REASON
from migagent.rollout.state import NodeStatus, Phase
from migagent_sim.pool import PoolMonitor, SimPool, SimPoolConfig
from tests.integration.rollout.support import CLOCK, TARGET, Recorder, api, create, drive, spec, wait_reported

STATE = state_object_name("r")


def _damage(pool: SimPool, damage: Callable[[dict[str, object]], object] | str) -> None:
    stored = pool.api.config_map(ROLLOUT_NAMESPACE, STATE)
    assert stored is not None
    data = dict(stored["data"])
    if isinstance(damage, str):
        data["state"] = damage
    else:
        state = json.loads(data["state"])
        damage(state)
        data["state"] = json.dumps(state)
    pool.api.put_config_map(ROLLOUT_NAMESPACE, STATE, data)


DAMAGES: list[tuple[str, Callable[[dict[str, object]], object] | str, str]] = [
    ("not-json", "{\"name\": \"r\", \"spec\": {", "key 'state' is not JSON"),
    ("unknown-node-status", lambda s: s["nodes"]["gpu-h100-1"].update(status="busy"),  # type: ignore[index]
     'state.nodes.gpu-h100-1.status: "busy" is not one of'),
    ("nodes-of-the-wrong-type", lambda s: s.update(nodes=["gpu-h100-1"]), "state.nodes: expected an object"),
    ("no-spec", lambda s: s.pop("spec"), "state.spec: missing"),
    ("target-not-in-layouts", lambda s: s["nodes"]["gpu-h100-2"].update(target="all-8g"),  # type: ignore[index]
     'state.nodes.gpu-h100-2.target: "all-8g" is not a layout'),
]


@pytest.mark.parametrize(("damage", "said"), [(d, s) for _, d, s in DAMAGES], ids=[d[0] for d in DAMAGES])
def test_every_verb_refuses_a_damaged_state_object_in_one_line_and_relabels_nothing(
    make_pool: Callable[..., SimPool], capsys: pytest.CaptureFixture[str], damage: object, said: str
) -> None:
    pool = make_pool(SimPoolConfig(nodes=2))
    wait_reported(pool)
    server = ["--api-server", pool.api.url]
    assert main(["rollout", "start", "r", "-l", pool.selector, "-c", TARGET, "--detach", *server]) == 0
    _damage(pool, damage)  # type: ignore[arg-type]
    monitor = PoolMonitor(pool)
    capsys.readouterr()
    verbs = [["status", "r"], ["status"], ["start", "r", "-l", pool.selector, "-c", TARGET, "--poll", "0.05"],
             ["resume", "r", "--poll", "0.05"], ["undo", "r", "--poll", "0.05"], ["pause", "r"]]
    for verb in verbs:
        assert main(["rollout", *verb, *server]) == 1, verb
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1, (verb, err)
        assert err[0].startswith(
            f"migagent rollout: rollout r: its state object (configmap {ROLLOUT_NAMESPACE}/{STATE}) cannot be read: "
        ), err
        assert said in err[0]
        assert err[0].endswith(
            f"or remove it with `kubectl delete -n {ROLLOUT_NAMESPACE} configmap {STATE}` (that forgets the rollout;"
            " the nodes keep their labels)"
        )
    assert monitor.relabels == {}
    assert all(pool.labels(name)[MIG_CONFIG_LABEL] == "all-1g.10gb" for name in pool.nodes)


class MeetsTheOtherStart(RolloutApi):
    """A start whose first read of the state object returns only once the other start has read it too:
    both find no object, as two `rollout start`s at the same instant do."""

    def __init__(self, pool: SimPool, barrier: threading.Barrier) -> None:
        super().__init__(pool.client(), clock=CLOCK)
        self._barrier: threading.Barrier | None = barrier

    def read_state(self, rollout: str) -> StoredState | None:
        found = super().read_state(rollout)
        if self._barrier is not None:
            barrier, self._barrier = self._barrier, None
            barrier.wait(timeout=30)
        return found


def test_of_two_starts_at_the_same_instant_one_drives_and_the_other_says_who(
    make_pool: Callable[..., SimPool], capsys: pytest.CaptureFixture[str]
) -> None:
    pool = make_pool(SimPoolConfig(nodes=2))
    wait_reported(pool)
    monitor = PoolMonitor(pool)
    argv = ["rollout", "start", "r", "-l", pool.selector, "-c", TARGET, "--poll", "0.05", "-o", "json"]
    barrier = threading.Barrier(2)
    outcomes: list[int | str] = []

    def start() -> None:
        args: argparse.Namespace = build_parser(argv).parse_args(argv)
        try:
            outcomes.append(run_start(args, MeetsTheOtherStart(pool, barrier), CLOCK, None))
        except AlreadyStartedError as error:
            outcomes.append(str(error))

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    capsys.readouterr()

    told = [o for o in outcomes if isinstance(o, str)]
    assert (len(outcomes), outcomes.count(0), len(told)) == (2, 1, 1), outcomes  # one drove to the end
    [told_line] = told
    host = re.escape(socket.gethostname())
    assert re.fullmatch(
        rf"rollout r: another driver has just started it and drives it: {host}/\d+/[0-9a-f]{{8}}"
        r" \(follow it with `migagent rollout status r`\)", told_line
    ), told_line
    assert monitor.relabels == dict.fromkeys(pool.nodes, 1)  # one driver relabelled each node once


def test_a_node_relabelled_by_hand_mid_rollout_is_left_alone_said_and_not_undone(
    make_pool: Callable[..., SimPool], capsys: pytest.CaptureFixture[str]
) -> None:
    pool = make_pool(SimPoolConfig(nodes=3))
    wait_reported(pool)
    create(pool, "r", spec(pool, max_unavailable="2"))  # one 2-GPU node per wave
    by_hand: list[str] = []

    class AdminRelabelsWave2(Recorder):
        def event(self, event: str, **fields: object) -> None:
            super().event(event, **fields)
            if event == "node_relabelled" and not by_hand and fields["layout"] == TARGET and self.waves()[1:]:
                node = str(fields["node"])
                by_hand.append(node)
                pool.api.update_node(node, lambda n: n["metadata"]["labels"].update({MIG_CONFIG_LABEL: "all-7g"}))

    recorder = AdminRelabelsWave2()
    final = drive(pool, "r", recorder)

    assert final.phase is Phase.DONE
    [node] = by_hand
    assert pool.labels(node)[MIG_CONFIG_LABEL] == "all-7g"
    assert final.nodes[node].status is NodeStatus.OVERRIDDEN
    assert [r.node for r in final.in_status(NodeStatus.DONE)] == sorted(set(pool.nodes) - {node})
    events = [e for e in pool.api.events() if e.get("reason") == EVENT_REASON]
    assert [(e["involvedObject"]["name"], e["type"]) for e in events] == [(node, "Warning")]
    assert "changed by someone else to all-7g" in events[0]["message"]
    assert f"  {node}: nvidia.com/mig.config changed by someone else to all-7g" in "\n".join(ending_lines(final))
    capsys.readouterr()
    assert main(["rollout", "status", "r", "--api-server", pool.api.url]) == 0
    assert any(line.split()[1:3] == [node, "overridden"] for line in capsys.readouterr().out.splitlines())

    assert main(["rollout", "undo", "r", "--poll", "0.05", "-o", "json", "--api-server", pool.api.url]) == 0
    assert pool.labels(node)[MIG_CONFIG_LABEL] == "all-7g"  # the admin's label survives the undo
    assert {pool.labels(name)[MIG_CONFIG_LABEL] for name in set(pool.nodes) - {node}} == {"all-1g.10gb"}
    assert api(pool).read_state("r") is not None
