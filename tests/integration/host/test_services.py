"""Host GPU clients, through a real `systemctl` subprocess (a stand-in script that logs its arguments
and answers is-active from a list) and through the recording manager."""

import json
import stat
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.attempt.window.services import (
    HostClients,
    RecordingServiceManager,
    ServiceCall,
    ServiceControlError,
    SystemctlServiceManager,
)

FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "{log}"
case "$1" in
  is-active) grep -qx "$3" "{active}" ;;
  stop) [ "$2" != "{stuck}" ] || {{ echo "Job for $2 failed." >&2; exit 1; }} ;;
esac
"""


@pytest.fixture
def systemctl(tmp_path: Path) -> tuple[SystemctlServiceManager, Path]:
    log, active = tmp_path / "systemctl.log", tmp_path / "active"
    active.write_text("nvidia-dcgm.service\ndcgm-exporter.service\nstuck.service\n", encoding="utf-8")
    script = tmp_path / "systemctl"
    script.write_text(FAKE_SYSTEMCTL.format(log=log, active=active, stuck="stuck.service"), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return SystemctlServiceManager(systemctl=str(script)), log


def _commands(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines()


def test_clients_are_stopped_synchronously_in_order_and_started_in_reverse_without_blocking(
    systemctl: tuple[SystemctlServiceManager, Path],
) -> None:
    manager, log = systemctl
    clients = HostClients(manager, ["nvidia-dcgm.service", "nvsm.service", "dcgm-exporter.service"])
    with capture_logs():
        stopped = clients.stop_all()
        clients.start_all(stopped)
    assert stopped == ("nvidia-dcgm.service", "dcgm-exporter.service")
    assert _commands(log) == [
        "is-active --quiet nvidia-dcgm.service",
        "stop nvidia-dcgm.service",
        "is-active --quiet nvsm.service",  # not running: neither stopped nor started
        "is-active --quiet dcgm-exporter.service",
        "stop dcgm-exporter.service",
        "start --no-block dcgm-exporter.service",
        "start --no-block nvidia-dcgm.service",
    ]


def test_a_failed_systemctl_stop_names_the_unit_and_systemctls_message(
    systemctl: tuple[SystemctlServiceManager, Path],
) -> None:
    manager, _ = systemctl
    with pytest.raises(ServiceControlError, match=r"`systemctl stop stuck.service` failed \(exit 1\): Job for"):
        manager.stop("stuck.service")


def test_a_missing_systemctl_is_a_clear_error(tmp_path: Path) -> None:
    manager = SystemctlServiceManager(systemctl=str(tmp_path / "no-systemctl"))
    assert manager.is_active("nvidia-dcgm.service") is False
    with pytest.raises(ServiceControlError, match=r"systemctl start nvidia-dcgm\.service` failed"):
        manager.start("nvidia-dcgm.service")


def test_when_one_client_fails_to_start_the_others_are_still_started(tmp_path: Path) -> None:
    manager = RecordingServiceManager(active=["a.service", "b.service", "c.service"])
    clients = HostClients(manager, ["a.service", "c.service", "b.service"])
    with capture_logs() as logs:
        stopped = clients.stop_all()
        manager.failing = {"c.service"}
        not_started = clients.start_all(stopped)
    assert not_started == ("c.service",)
    assert manager.calls[-3:] == [
        ServiceCall("start", "b.service"),
        ServiceCall("start", "c.service"),
        ServiceCall("start", "a.service"),
    ]
    assert [e["unit"] for e in logs if e["event"] == "host_client_start_failed"] == ["c.service"]


def test_the_stopped_clients_are_remembered_until_they_are_started_again(tmp_path: Path) -> None:
    state = tmp_path / "run" / "stopped-clients.json"
    manager = RecordingServiceManager(active=["a.service", "b.service"])
    clients = HostClients(manager, ["a.service", "b.service"], state_file=state)
    with capture_logs():
        stopped = clients.stop_all()
        assert json.loads(state.read_text(encoding="utf-8")) == {"stopped": ["a.service", "b.service"]}
        clients.start_all(stopped)
    assert not state.exists()


def test_an_unreadable_state_file_restarts_nothing_rather_than_guessing(tmp_path: Path) -> None:
    state = tmp_path / "stopped-clients.json"
    state.write_text("{not json", encoding="utf-8")
    manager = RecordingServiceManager()
    with capture_logs() as logs:
        assert HostClients(manager, ["a.service"], state_file=state).recover() == ()
    assert manager.calls == []
    assert not state.exists()
    assert [e["event"] for e in logs] == ["host_clients_state_unreadable"]


def test_clients_are_not_stopped_when_the_record_of_them_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("a file where a directory should be", encoding="utf-8")
    manager = RecordingServiceManager(active=["a.service", "b.service"])
    clients = HostClients(manager, ["a.service", "b.service"], state_file=tmp_path / "run" / "stopped.json")
    with capture_logs(), pytest.raises(ServiceControlError, match=r"cannot record the stopped host GPU clients"):
        clients.stop_all()
    assert manager.active == {"a.service", "b.service"}
    assert ServiceCall("stop", "a.service") not in manager.calls
