"""Wiring of the node the CLI acts on: real GPUs through pynvml, or the built-in simulator.

`--simulate SPEC` builds a FakeNvml node (e.g. `8xH100-80GB-SXM`); `--state FILE` keeps that node
between commands: it is loaded when the file exists, saved after every mutating NVML call (so a
killed command leaves the GPUs as real ones would be) and after the command, so `apply` followed by
`assert` acts on the same simulated GPUs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from migagent.catalog import GpuModel, UnknownGpuModelError
from migagent.cli.conflicts import Conflict, Needs, refuse_together
from migagent.cli.values import SECONDS, env_flag
from migagent.clock import SystemClock
from migagent.errors import PermanentError, StorageError, UsageError
from migagent.nvml.driver import GpuDriver
from migagent.nvml.driver_root import DEFAULT_DRIVER_ROOT, load_nvml_from
from migagent.nvml.reset import NvidiaSmiResetRunner, run_command
from migagent.nvml.reset_checks import HostResetChecks
from migagent.nvml.system import system_nvml
from migagent.reconcile.journal import FileJournal, Journal, MemoryJournal
from migagent.reconcile.ports import RebootRequester
from migagent.reconcile.reboot import CommandRebootRequester, RecordingRebootRequester
from migagent.reconcile.statelock import StateLock
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.persistence import persist_after_each_mutation, signal_after_mutations
from migagent.sim.reset import SimResetRunner
from migagent.sim.spec import NodeSpecError, parse_node_spec
from migagent.sim.state import StateFormatError
from migagent.sim.state_check import check_profiles, check_spec_matches

DEFAULT_JOURNAL_DIR = "/var/lib/migagent"
FAKE_NVML_STATE_ENV = "MIGAGENT_FAKE_NVML_STATE"  # the fake libnvidia-ml.so.1's node (migagent_sim/fakelib/node.py)
SIGKILL_AFTER_MUTATIONS_ENV = "MIGAGENT_SIM_SIGKILL_AFTER_MUTATIONS"
SIGINT_AFTER_MUTATIONS_ENV = "MIGAGENT_SIM_SIGINT_AFTER_MUTATIONS"
HOST_ROOT_ENV = "MIGAGENT_HOST_ROOT"


def add_node_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("node")
    group.add_argument(
        "--simulate",
        metavar="SPEC",
        default=os.environ.get("MIGAGENT_SIMULATE"),
        help="act on a simulated node instead of real GPUs, e.g. 8xH100-80GB-SXM or 2xA100-40GB,2xA30-24GB",
    )
    group.add_argument(
        "--driver-root",
        metavar="DIR",
        default=os.environ.get("NVIDIA_DRIVER_ROOT", DEFAULT_DRIVER_ROOT),
        help="where the NVIDIA driver's files are when libnvidia-ml.so.1 and nvidia-smi are not on the default"
        f" paths: the GPU Operator's driver container root (default {DEFAULT_DRIVER_ROOT}) or the host root"
        " mounted into the pod, e.g. /host (env NVIDIA_DRIVER_ROOT)",
    )
    group.add_argument(
        "--state",
        metavar="FILE",
        default=os.environ.get("MIGAGENT_SIM_STATE"),
        help="simulator state file: loaded if it exists, saved after every change and after the command",
    )
    refuse_together(parser, Conflict(
        "--driver-root", ("--simulate", "--state"),
        "--driver-root finds the NVIDIA driver of real GPUs, and a simulated node has none",
    ))


def journal_for(args: argparse.Namespace) -> Journal:
    """The apply journal: --journal-dir; next to --state for a simulated node; in memory for a
    throw-away simulated node; next to MIGAGENT_FAKE_NVML_STATE when the fake NVML library serves
    the node (its simulated GPUs must not share the real node's journal); else /var/lib/migagent
    (a hostPath in the DaemonSet)."""
    if getattr(args, "journal_dir", None):
        return FileJournal(Path(args.journal_dir))
    if args.state:
        state = Path(args.state)
        return FileJournal(state.with_name(f"{state.name}.journal"))
    if args.simulate:
        return MemoryJournal()
    fake_state = os.environ.get(FAKE_NVML_STATE_ENV)
    if fake_state:
        state = Path(fake_state)
        return FileJournal(state.with_name(f"{state.name}.journal"))
    return FileJournal(Path(DEFAULT_JOURNAL_DIR))


def add_lock_arguments(parser: argparse.ArgumentParser, *, default_s: float = 60.0) -> None:
    parser.add_argument(
        "--lock-timeout", type=SECONDS, default=default_s, metavar="SECONDS",
        help="another MIG manager (agent, host mode, apply) holding the state directory's lock: wait this long"
        f" for it, then exit 1 naming it (default {default_s:g})",
    )


def state_lock_for(args: argparse.Namespace, command: str) -> StateLock | None:
    """The lock on the journal's directory (None for a throw-away simulated node, which has no directory)."""
    journal = journal_for(args)
    return StateLock(journal.directory, command=command) if isinstance(journal, FileJournal) else None


@contextmanager
def state_locked(args: argparse.Namespace, command: str) -> Iterator[None]:
    """Hold the state lock for the block: wait up to --lock-timeout, else StateLockedError (exit 1)."""
    lock = state_lock_for(args, command)
    if lock is None:
        yield
        return
    try:
        lock.acquire(timeout_s=args.lock_timeout, clock=SystemClock())
    except StorageError as exc:
        if getattr(args, "journal_dir", None):  # the user's own path: name the flag that gave it
            raise StorageError(f"--journal-dir {args.journal_dir}: {exc}", path=exc.path, errno=exc.errno) from exc
        raise
    try:
        yield
    finally:
        lock.release()


def add_reboot_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-reboot",
        action="store_true",
        default=env_flag("MIGAGENT_ALLOW_REBOOT"),
        help="reboot the node when only a reboot can activate a MIG mode change, e.g. a GPU in a pass-through"
        " VM that cannot be reset (env MIGAGENT_ALLOW_REBOOT)",
    )
    parser.add_argument(
        "--reboot-command",
        default=os.environ.get("MIGAGENT_REBOOT_COMMAND", "systemctl reboot"),
        help="command that queues the reboot (in a container, e.g. 'chroot /host systemctl reboot')",
    )
    refuse_together(
        parser,
        Needs("--reboot-command", "--allow-reboot", "only an allowed reboot runs it (env MIGAGENT_ALLOW_REBOOT)"),
        Conflict("--reboot-command", ("--simulate", "--state"), "a simulated node never reboots this host, it only"
                 " records the request"),
    )


def reboot_requester_for(args: argparse.Namespace) -> RebootRequester | None:
    """None unless --allow-reboot; a simulated node only records the request (it never reboots this host)."""
    if not args.allow_reboot:
        return None
    if args.simulate or args.state:
        return RecordingRebootRequester()
    return CommandRebootRequester(tuple(shlex.split(args.reboot_command)))


def _load_fake(spec: str | None, state: Path | None) -> FakeNvml:
    """The simulated node; a bad spec or state file is the user's input, so it is a clear error."""
    if state is not None and state.exists():
        try:
            fake = FakeNvml.load(state)
            check_profiles(fake.state)
        except (OSError, UnicodeDecodeError, RecursionError, StateFormatError, UnknownGpuModelError) as exc:
            raise PermanentError(f"--state {state}: cannot load the simulated node: {exc}") from exc
        if spec is not None:  # both given: they must describe the same GPUs, or --simulate would be ignored
            try:
                check_spec_matches(fake.state, _parse_spec(spec), spec=spec, state_file=str(state))
            except StateFormatError as exc:
                raise PermanentError(str(exc)) from exc
        return fake
    if spec is None:
        raise UsageError("--state FILE does not exist yet; give --simulate SPEC to create the node")
    return FakeNvml.from_models(_parse_spec(spec))


def _parse_spec(spec: str) -> tuple[GpuModel, ...]:
    try:
        return parse_node_spec(spec)
    except NodeSpecError as exc:
        raise PermanentError(f"--simulate: {exc}") from exc


def _save_fake(fake: FakeNvml, state: Path, *, quiet: bool) -> None:
    # `quiet` when the command already failed: its own error says more than a failed save.
    try:
        fake.save(state)
    except StorageError:
        if not quiet:
            raise  # one line naming the path and the errno
    except OSError as exc:
        if not quiet:
            raise PermanentError(f"--state {state}: cannot save the simulated node: {exc}") from exc


def _crash_fault_from_environment(fake: FakeNvml) -> None:
    """Crash and stop testing only: MIGAGENT_SIM_SIGKILL_AFTER_MUTATIONS=N kills the process after its
    Nth mutating call on the simulated node, MIGAGENT_SIM_SIGINT_AFTER_MUTATIONS=N presses Ctrl-C
    there (see sim.persistence)."""
    faults = ((SIGKILL_AFTER_MUTATIONS_ENV, signal.SIGKILL), (SIGINT_AFTER_MUTATIONS_ENV, signal.SIGINT))
    for variable, signum in faults:
        raw = os.environ.get(variable)
        if raw is None:
            continue
        try:
            signal_after_mutations(fake, int(raw), signum)
        except ValueError as exc:
            raise UsageError(f"{variable}={raw!r}: expected a count of 1 or more") from exc


@contextmanager
def open_node(args: argparse.Namespace, *, held: bool = True) -> Iterator[GpuDriver]:
    """Yield a GpuDriver for the node selected by --simulate/--state (or real GPUs).

    `held`: NVML stays initialised for the whole block (a one-shot command). The long-running agent
    and host mode pass False: the driver then opens NVML around each unit of work only, so an idle
    agent blocks no reset and no driver unload by others."""
    spec: str | None = args.simulate
    state = Path(args.state) if args.state else None
    if spec is None and state is None:
        files = load_nvml_from(Path(getattr(args, "driver_root", None) or DEFAULT_DRIVER_ROOT))
        *prefix, nvidia_smi = files.nvidia_smi_argv()
        reset = NvidiaSmiResetRunner(run=lambda argv: run_command([*prefix, *argv]), nvidia_smi=nvidia_smi)
        checks = HostResetChecks(host_root(args))
        with _held(GpuDriver(system_nvml(), reset_runner=reset, reset_checks=checks), held=held) as driver:
            yield driver
        return
    fake = _load_fake(spec, state)
    if state is not None:
        persist_after_each_mutation(fake, state)
    _crash_fault_from_environment(fake)
    failed = True
    try:
        with _held(GpuDriver(fake, reset_runner=SimResetRunner(fake)), held=held) as driver:
            yield driver
        failed = False
    finally:
        # Saved even when the command fails: real GPUs keep whatever a failed apply already changed.
        if state is not None:
            _save_fake(fake, state, quiet=failed)


def _held(driver: GpuDriver, *, held: bool) -> AbstractContextManager[GpuDriver]:
    return driver if held else nullcontext(driver)


def host_root(args: argparse.Namespace) -> Path:
    """Where the host's /proc and /sys are, to name what would block a GPU reset: MIGAGENT_HOST_ROOT,
    else the agent's --host-root (the host's / mounted in the pod), else / (host mode, the CLI)."""
    return Path(os.environ.get(HOST_ROOT_ENV) or getattr(args, "host_root", None) or "/")
