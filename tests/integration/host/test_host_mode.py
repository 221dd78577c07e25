"""Host mode on a simulated A100: applies at start, re-applies on file changes, and stops the host GPU
clients around a change (and only then), always starting them again."""

from pathlib import Path

import pynvml
from structlog.testing import capture_logs

from migagent.attempt.window.services import ServiceCall
from tests.integration.host.support import LAYOUTS, HostHarness, write_atomically

CLIENTS = ("nvidia-dcgm.service", "dcgm-exporter.service", "nvsm.service")
RUNNING = ("nvidia-dcgm.service", "dcgm-exporter.service")  # nvsm is installed but not running
CREATE_GI = "nvmlDeviceCreateGpuInstanceWithPlacement"


def test_host_mode_applies_the_selected_layout_at_start_and_then_reports_ready(tmp_path: Path) -> None:
    with capture_logs(), HostHarness(tmp_path) as host:
        host.wait_for_status("config a100-balanced applied")
    assert host.mismatches("a100-balanced") == ()
    ready = [m for m in host.messages if m.startswith("READY=1")]
    assert ready == ["READY=1\nSTATUS=config a100-balanced applied"]


def test_host_mode_reapplies_when_the_selected_layout_file_changes(tmp_path: Path) -> None:
    with capture_logs(), HostHarness(tmp_path) as host:
        host.wait_for_status("config a100-balanced applied")
        host.select("a100-1g")
        host.wait_for_status("config a100-1g applied")
    assert host.mismatches("a100-1g") == ()


def test_host_mode_reapplies_when_the_layout_file_is_rewritten_in_place(tmp_path: Path) -> None:
    with capture_logs(), HostHarness(tmp_path) as host:
        host.wait_for_status("config a100-balanced applied")
        # Same config name, new content: a100-balanced now means seven 1g.5gb instances.
        edited = LAYOUTS.replace('{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}', '{"1g.5gb": 7}')
        host.layout_file.write_text(edited, encoding="utf-8")
        host.wait_for_status("config a100-balanced applied", count=2)
    assert host.mismatches("a100-1g") == ()


def test_host_mode_reapplies_when_the_layout_file_is_replaced_by_a_rename(tmp_path: Path) -> None:
    with capture_logs(), HostHarness(tmp_path, selected="a100-1g") as host:
        host.wait_for_status("config a100-1g applied")
        write_atomically(host.layout_file, LAYOUTS.replace('{"1g.5gb": 7}', '{"3g.20gb": 2}'))
        host.wait_for_status("config a100-1g applied", count=2)
    assert host.mismatches("a100-1g") == ()
    assert len(host.observe().gpu(0).gpu_instances) == 2


def test_host_clients_are_stopped_before_the_first_nvml_mutation_and_started_after_the_last(
    tmp_path: Path,
) -> None:
    with capture_logs(), HostHarness(tmp_path, clients=CLIENTS, active=RUNNING) as host:
        host.wait_for_status("config a100-balanced applied")
    mutations = len(host.fake.sim_mutations)
    assert mutations > 0
    assert host.timeline == [
        (ServiceCall("stop", "nvidia-dcgm.service"), 0),
        (ServiceCall("stop", "dcgm-exporter.service"), 0),
        (ServiceCall("start", "dcgm-exporter.service"), mutations),
        (ServiceCall("start", "nvidia-dcgm.service"), mutations),
    ]
    assert host.services.active == set(RUNNING)
    assert not host.clients_state.exists()


def test_host_clients_are_left_alone_when_the_layout_is_already_applied(tmp_path: Path) -> None:
    with capture_logs(), HostHarness(tmp_path, clients=CLIENTS, active=RUNNING) as host:
        host.wait_for_status("config a100-balanced applied")
        calls_after_first_apply = len(host.services.calls)
        host.agent.request_reconcile()  # what SIGHUP does
        host.wait_for_status("config a100-balanced applied; nothing to change")
    assert len(host.services.calls) == calls_after_first_apply


def test_host_clients_are_started_again_when_the_apply_fails(tmp_path: Path) -> None:
    harness = HostHarness(tmp_path, clients=CLIENTS, active=RUNNING)
    harness.fake.sim_inject_fault(CREATE_GI, pynvml.NVML_ERROR_NO_PERMISSION, times=None)
    with capture_logs() as logs, harness as host:
        host.wait_for_status("apply failed")
    assert [call for call, _ in host.timeline] == [
        ServiceCall("stop", "nvidia-dcgm.service"),
        ServiceCall("stop", "dcgm-exporter.service"),
        ServiceCall("start", "dcgm-exporter.service"),
        ServiceCall("start", "nvidia-dcgm.service"),
    ]
    assert host.services.active == set(RUNNING)
    assert any(e["event"] == "host_apply_failed" for e in logs)


def test_stopping_dcgm_lets_an_ampere_mig_mode_change_reset_the_gpu(tmp_path: Path) -> None:
    def dcgm_follows_its_service(call: ServiceCall) -> None:
        harness.fake.sim_set_client_attached(0, call.action == "start")

    harness = HostHarness(tmp_path, clients=("nvidia-dcgm.service",), on_service_call=dcgm_follows_its_service)
    harness.fake.sim_set_client_attached(0, True)  # DCGM holds the GPU: an A100 reset would be refused
    with capture_logs(), harness as host:
        host.wait_for_status("config a100-balanced applied")
    assert "sim_reset_gpu" in host.fake.sim_mutations
    assert host.mismatches("a100-balanced") == ()
    assert host.services.active == {"nvidia-dcgm.service"}


def test_without_stopping_dcgm_the_ampere_mode_change_fails_and_is_reported(tmp_path: Path) -> None:
    harness = HostHarness(tmp_path)
    harness.fake.sim_set_client_attached(0, True)
    with capture_logs(), harness as host:
        host.wait_for_status("apply failed")
    assert host.mismatches("a100-balanced") != ()


def test_a_client_that_cannot_be_stopped_leaves_the_gpus_untouched_and_restarts_the_others(tmp_path: Path) -> None:
    harness = HostHarness(tmp_path, clients=RUNNING, failing=("dcgm-exporter.service",))
    with capture_logs(), harness as host:
        host.wait_for_status("apply failed: simulated failure to stop dcgm-exporter.service")
    assert host.fake.sim_mutations == []
    assert [call for call, _ in host.timeline] == [
        ServiceCall("stop", "nvidia-dcgm.service"),
        ServiceCall("stop", "dcgm-exporter.service"),
        ServiceCall("start", "dcgm-exporter.service"),  # running when we came: restored even so
        ServiceCall("start", "nvidia-dcgm.service"),
    ]


def test_a_failed_apply_is_retried_with_a_doubling_back_off_without_a_file_change(tmp_path: Path) -> None:
    harness = HostHarness(tmp_path, retry_interval_s=0.1)
    harness.fake.sim_inject_fault(CREATE_GI, pynvml.NVML_ERROR_NO_PERMISSION, times=2)
    with capture_logs(), harness as host:
        host.wait_for_status("config a100-balanced applied")
    outcomes = [s for s in host.statuses if s.startswith(("apply failed", "config a100-balanced applied"))]
    assert [s.rsplit("retrying in ", 1)[-1].split("s ")[0] for s in outcomes[:2]] == ["0.1", "0.2"]
    assert outcomes[2].startswith("config a100-balanced applied")
    assert host.mismatches("a100-balanced") == ()


def test_selecting_a_layout_that_does_not_exist_is_reported_and_changes_nothing(tmp_path: Path) -> None:
    with capture_logs(), HostHarness(tmp_path, selected="no-such-layout") as host:
        host.wait_for_status("apply failed")
    failure = host.status_starting("apply failed")
    assert "selected mig-config not present: no-such-layout" in failure
    assert "a100-balanced" in failure  # the message lists what would be valid
    assert host.fake.sim_mutations == []


def test_an_empty_selection_as_shipped_changes_nothing_and_says_so_until_a_layout_is_named(tmp_path: Path) -> None:
    with capture_logs() as logs, HostHarness(tmp_path, selected="") as host:
        host.wait_for_status("no layout selected")
        assert host.fake.sim_mutations == []
        host.select("a100-1g")
        host.wait_for_status("config a100-1g applied")
    assert any(event["event"] == "host_no_layout_selected" for event in logs)
    assert host.mismatches("a100-1g") == ()


def test_without_a_selected_layout_a_file_with_several_configs_is_refused(tmp_path: Path) -> None:
    with capture_logs(), HostHarness(tmp_path, selected=None) as host:
        host.wait_for_status("apply failed")
    assert "no config selected" in host.status_starting("apply failed")
    assert host.fake.sim_mutations == []


def test_clients_left_stopped_by_a_killed_agent_are_started_when_host_mode_starts_again(tmp_path: Path) -> None:
    harness = HostHarness(tmp_path, clients=CLIENTS, active=RUNNING)
    with capture_logs():
        assert harness.clients.stop_all() == RUNNING  # ... and the process dies here
    assert harness.services.active == set()
    with capture_logs() as logs, harness as host:
        host.wait_for_status("config a100-balanced applied")
    assert host.services.active == set(RUNNING)
    assert any(e["event"] == "host_clients_left_stopped" for e in logs)
