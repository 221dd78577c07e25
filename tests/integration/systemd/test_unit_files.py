"""Static checks of the shipped units: ordering (no cycles, consumers after the boot apply), the notify
contract of host mode, the hardening, and command lines that migagent's own CLI accepts."""

import shlex
import subprocess
from pathlib import Path

import pytest

from migagent.cli import build_parser
from migagent.cli.host import DEFAULT_CLIENTS_STATE, DEFAULT_LAYOUT_FILE, DEFAULT_SELECTED_LAYOUT_FILE
from migagent.cli.node import DEFAULT_JOURNAL_DIR
from migagent.sources.files import read_selected_layout
from tests.integration.systemd.units import BOOT, HOST, UNIT_DIR, Unit, load

ENV_EXAMPLE = UNIT_DIR / "migagent.env.example"
GPU_CONSUMERS = {
    "kubelet.service",
    "containerd.service",
    "docker.service",
    "crio.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "nvidia-dcgm-exporter.service",
    "dcgm-exporter.service",
    "nvsm.service",
    "k3s.service",
    "k3s-agent.service",
    "rke2-server.service",
    "rke2-agent.service",
    # The CDI spec the container toolkit writes lists the MIG devices: it must see the new layout.
    "nvidia-cdi-refresh.service",
    "nvidia-gpu-reset.target",
}
HARDENING = {
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "NoNewPrivileges": "yes",
    "RestrictAddressFamilies": "AF_UNIX",
    "DevicePolicy": "closed",
    "LockPersonality": "yes",
    "RestrictRealtime": "yes",
    "SystemCallArchitectures": "native",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "MemoryDenyWriteExecute": "yes",
    "RestrictNamespaces": "yes",
    "RestrictSUIDSGID": "yes",
}


@pytest.fixture(params=[BOOT, HOST])
def unit(request: pytest.FixtureRequest) -> Unit:
    return load(request.param)


def test_no_unit_is_ordered_both_after_and_before_the_same_unit(unit: Unit) -> None:
    assert unit.words("Unit", "After") & unit.words("Unit", "Before") == set()


def test_the_boot_unit_runs_before_every_gpu_consumer_and_after_the_driver_services() -> None:
    boot = load(BOOT)
    assert boot.words("Unit", "Before") >= GPU_CONSUMERS
    assert boot.words("Unit", "After") >= {"nvidia-persistenced.service", "nvidia-fabricmanager.service"}


def test_the_boot_unit_never_requires_what_may_be_missing_and_keeps_default_dependencies() -> None:
    boot = load(BOOT)
    assert boot.all("Unit", "Requires") == []
    assert boot.all("Unit", "Requisite") == []
    assert boot.all("Unit", "BindsTo") == []
    assert boot.words("Unit", "Wants") <= {"nvidia-persistenced.service"}
    assert boot.all("Unit", "DefaultDependencies") == []  # the cycle of mig-parted#103 came from =no


def test_the_two_units_are_ordered_one_way_host_after_boot() -> None:
    boot, host = load(BOOT), load(HOST)
    assert BOOT in host.words("Unit", "After")
    assert HOST not in boot.words("Unit", "After")
    assert BOOT not in host.words("Unit", "Before")


def test_host_mode_orders_itself_before_no_gpu_client_it_stops_and_starts() -> None:
    assert load(HOST).words("Unit", "Before") & GPU_CONSUMERS == set()


def test_the_boot_unit_is_a_bounded_oneshot_that_stays_active() -> None:
    boot = load(BOOT)
    assert boot.one("Service", "Type") == "oneshot"
    assert boot.one("Service", "RemainAfterExit") == "yes"
    timeout = boot.one("Service", "TimeoutStartSec")
    assert timeout not in ("0", "infinity")
    assert boot.one("Service", "SuccessExitStatus") == "3"  # a requested reboot is not a failure


def test_host_mode_is_a_notify_service_with_a_watchdog_restarted_on_failure() -> None:
    host = load(HOST)
    assert host.one("Service", "Type") == "notify"
    assert host.one("Service", "NotifyAccess") == "main"
    assert host.one("Service", "WatchdogSec")
    assert host.one("Service", "Restart") == "on-failure"
    assert host.one("Service", "RuntimeDirectoryPreserve") == "yes"  # stopped-clients.json survives restarts


def test_both_units_are_hardened(unit: Unit) -> None:
    for key, value in HARDENING.items():
        assert unit.one("Service", key) == value, key
    assert unit.words("Service", "ReadWritePaths") == {"/var/lib/migagent", "/run/migagent"}


def test_both_units_keep_only_the_capabilities_nvml_and_gpu_reset_need(unit: Unit) -> None:
    assert unit.words("Service", "CapabilityBoundingSet") == {"CAP_SYS_ADMIN", "CAP_MKNOD"}
    assert unit.all("Service", "AmbientCapabilities") == []


def test_both_units_may_open_the_nvidia_devices_and_nothing_else(unit: Unit) -> None:
    allowed = {value.split()[0] for value in unit.all("Service", "DeviceAllow")}
    assert allowed == {
        "/dev/nvidiactl",
        "char-nvidia-frontend",
        "char-nvidia",
        "char-nvidiactl",
        "char-nvidia-caps",
        "char-nvidia-nvswitch",
    }
    assert all("w" in value.split()[1] for value in unit.all("Service", "DeviceAllow"))


def test_both_units_read_the_same_settings_file(unit: Unit) -> None:
    assert unit.all("Service", "EnvironmentFile") == ["-/etc/migagent/migagent.env"]


def test_no_unit_starts_another_unit_and_waits_for_it(unit: Unit) -> None:
    for key in ("ExecStart", "ExecStartPre", "ExecStartPost", "ExecReload"):
        for command in unit.all("Service", key):
            if "systemctl" in command and " start " in command:
                assert "--no-block" in command, command


def _environment(example: Path, **overrides: str) -> dict[str, str]:
    values = {}
    for line in example.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            values[key.strip()] = value.strip()
    return {**values, **overrides}


def _expand(command: str, env: dict[str, str]) -> list[str]:
    """systemd's expansion: ${VAR} is exactly one argument, $VAR splits at whitespace (none if empty)."""
    argv: list[str] = []
    for word in shlex.split(command):
        if word.startswith("${") and word.endswith("}"):
            argv.append(env.get(word[2:-1], ""))
        elif word.startswith("$"):
            argv.extend(env.get(word[1:], "").split())
        else:
            argv.append(word)
    return argv


def test_the_boot_command_line_is_an_apply_of_the_selected_layout_that_migagent_accepts() -> None:
    env = _environment(ENV_EXAMPLE, MIGAGENT_APPLY_FLAGS="--allow-reboot", MIGAGENT_LAYOUT="all-1g.10gb")
    argv = _expand(load(BOOT).one("Service", "ExecStart"), env)
    assert argv[0] == "/usr/local/bin/migagent"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "apply"
    assert args.config_file == "/etc/migagent/layouts.yaml"
    assert args.selected_config == "all-1g.10gb"
    assert args.allow_reboot is True


def _condition(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The boot unit's ExecCondition as systemd runs it: `$$` is a literal `$`, the file's variables
    are in the environment."""
    argv = shlex.split(load(BOOT).one("Service", "ExecCondition").replace("$$", "$"))
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=30)


def test_the_shipped_settings_select_no_layout_so_the_boot_unit_is_skipped_with_a_line_saying_so() -> None:
    assert read_selected_layout(ENV_EXAMPLE) == ""
    skipped = _condition(_environment(ENV_EXAMPLE))
    assert skipped.returncode == 1  # 1-254: the unit is skipped, not failed
    assert "no layout selected" in skipped.stdout
    assert _condition(_environment(ENV_EXAMPLE, MIGAGENT_LAYOUT="all-1g.10gb")).returncode == 0


def test_the_boot_command_line_leaves_out_allow_reboot_unless_configured() -> None:
    argv = _expand(load(BOOT).one("Service", "ExecStart"), _environment(ENV_EXAMPLE))
    assert build_parser().parse_args(argv[1:]).allow_reboot is False


def test_the_host_command_line_watches_the_file_the_boot_unit_reads() -> None:
    host = load(HOST)
    argv = _expand(host.one("Service", "ExecStart"), _environment(ENV_EXAMPLE))
    args = build_parser().parse_args(argv[1:])
    assert args.command == "host"
    assert args.config_file == "/etc/migagent/layouts.yaml"
    assert args.selected_layout_file == "/etc/migagent/migagent.env"
    assert host.one("Service", "ExecReload") == "/bin/kill -HUP $MAINPID"


def test_the_example_settings_name_the_default_host_gpu_clients() -> None:
    clients = _environment(ENV_EXAMPLE)["MIGAGENT_HOST_GPU_CLIENTS"].split(",")
    assert {"nvidia-dcgm.service", "dcgm.service", "dcgm-exporter.service"} <= set(clients)
    assert "kubelet.service" not in clients
    # Started last (clients start in reverse order), so the CDI spec is written for the new layout.
    assert clients[0] == "nvidia-cdi-refresh.service"


def test_every_path_migagent_writes_by_default_stays_writable_under_protect_system_strict(unit: Unit) -> None:
    writable = {Path(p) for p in unit.words("Service", "ReadWritePaths")}
    writable |= {Path("/var/lib") / d for d in unit.words("Service", "StateDirectory")}
    writable |= {Path("/run") / d for d in unit.words("Service", "RuntimeDirectory")}
    assert Path(DEFAULT_JOURNAL_DIR) in writable  # the apply journal
    assert Path(DEFAULT_CLIENTS_STATE).parent in writable  # host mode's stopped-clients record


def test_the_units_name_the_files_migagent_host_defaults_to() -> None:
    host = load(HOST)
    args = build_parser().parse_args(_expand(host.one("Service", "ExecStart"), {})[1:])
    assert (args.config_file, args.selected_layout_file) == (DEFAULT_LAYOUT_FILE, DEFAULT_SELECTED_LAYOUT_FILE)
    assert host.all("Service", "EnvironmentFile") == [f"-{DEFAULT_SELECTED_LAYOUT_FILE}"]
