"""Suite-wide fixtures."""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
import structlog
from hypothesis import HealthCheck, settings
from pytest_timeout import dump_stacks

from migagent.plumbing.logging import reset_logging
from migagent_sim.deadline import load_factor
from tests.leftovers import no_leftovers

__all__ = ["no_leftovers"]


def _log_through_pytest() -> None:
    """structlog's events go to the standard `logging` module, which pytest captures per test (shown
    under a failed test's "Captured log") and drops between tests. structlog's own default prints to
    whatever sys.stdout is: an agent thread still logging after its test ended (a join that timed out,
    a daemon thread) wrote into the run's progress output."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.StackInfoRenderer(),
            structlog.dev.set_exc_info,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )


_log_through_pytest()


settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")
"""Hypothesis judges each example by the clock (200 ms, and a health check on slow data generation):
a loaded machine stretched a 0.04 ms example past it. Every property test runs its examples unbounded;
pytest-timeout still bounds the test."""


@pytest.fixture(autouse=True)
def _fresh_logging(no_leftovers: None) -> Iterator[None]:
    """`migagent.cli.main` configures logging for the process (structlog, and a stderr handler on the
    root logger with its level); undo it after each test, so a CLI test can neither hide the info
    events another test reads with `structlog.testing.capture_logs` nor leave a handler printing to
    the terminal, and route structlog through `logging` again. It depends on `no_leftovers` so that
    it undoes this before the leftovers are counted: any other handler a test leaves still fails it."""
    root = logging.getLogger()
    level = root.level
    yield
    reset_logging()
    _log_through_pytest()
    root.setLevel(level)


WORKERS_PER_CORE = 2
"""`-n auto` (pyproject's addopts) starts this many workers per core: most of the suite waits on servers,
agents and child processes rather than computing, so a worker per core would leave the cores idle."""

SLOWEST_FIRST = (
    "tests/realnode",
    "tests/realkube/head_to_head",
    "tests/integration/rollout",
    "tests/realkube",
    "tests/nvidia",
    "tests/judge",
    "tests/integration/systemd",
    "tests/integration/deploy",
    "tests/integration/demand",
    "tests/integration",
)
"""The order the workers take the suites in (then the rest, tests/unit last): the long tests start first
and the many short ones fill the workers' ends, so no worker is left alone with a long test at the end."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for `-n auto`: PYTEST_XDIST_AUTO_NUM_WORKERS when set; none for a pytest that a test runs
    (tests/unit/test_suite_timeout.py, bench.mutants' children), which must behave as one process."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return 0
    stated = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if stated:
        return int(stated)
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the items slowest suites first, and keep each module whose fixtures outlive a test (a control
    plane's deployment, a pool: `_outlives_a_test`) on one worker (`--dist loadgroup` sends
    an xdist_group to one worker, in this order), so those fixtures are set up once, not once per worker.
    A test that names its group keeps it alone (two group names would make a third group: tests/realnode
    split across two workers, two nodes on one machine). Runs before xdist's own hook, which reads them."""
    paths = {item: Path(str(item.path)).resolve().relative_to(config.rootpath).as_posix() for item in items}

    def rank(item: pytest.Item) -> int:
        inside = (i for i, prefix in enumerate(SLOWEST_FIRST) if f"{paths[item]}/".startswith(f"{prefix}/"))
        return next(inside, len(SLOWEST_FIRST))

    items.sort(key=rank)  # stable: each module's tests stay in their order, together
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        outlives = any(_outlives_a_test(d[-1], paths[item]) for d in defs if d)
        if outlives and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(paths[item]))


class GroupsKept:
    """Fails every test whose xdist_group `--dist loadgroup` lost, before its fixtures start anything:
    xdist marks an item's group by suffixing its node id with `@NAME`, and a pytest that ignores that
    change makes xdist spread each group over the workers silently (pytest-dev/pytest-xdist#1386), so
    two real nodes would run on one machine at once. Registered in a worker only; its collection hook
    runs after xdist's own."""

    def __init__(self) -> None:
        self.lost: set[str] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if config.getvalue("loadgroup"):
            self.lost = {i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.nodeid in self.lost:
            pytest.fail(
                f"pytest-xdist lost this test's xdist_group: pytest {pytest.__version__} with this "
                "pytest-xdist spreads groups over workers; install the test extras' versions (pyproject.toml)",
                pytrace=False,
            )


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # this process is an xdist worker (not a child run inside one)
        config.pluginmanager.register(GroupsKept(), "migagent-groups-kept")


def _outlives_a_test(fixture: pytest.FixtureDef[object], module: str) -> bool:
    """Module, class or package scope, or session scope declared in the test module itself (a pool the
    module's tests share): one set-up per worker that runs any of them. A session fixture of a conftest
    (the control plane) is every module's, set up once per worker whatever the grouping."""
    if fixture.scope == "session":
        return fixture.baseid == module
    return fixture.scope != "function"


TEARDOWN_LIMIT_S = 120
"""The default of `teardown_timeout`. pytest-timeout arms one timer for a test's setup, call and
teardown together; once it has fired (the call hung), nothing bounds the teardown that follows, and
a fixture that cannot stop what the hung call left running would stall the whole run. This bounds
that teardown, the same way."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "teardown_timeout", "seconds a teardown may run once pytest-timeout has fired", default=str(TEARDOWN_LIMIT_S)
    )


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """pytest-timeout's bound for this test, stretched by the load factor as the test starts (outside
    pytest-timeout's own wrapper, which arms its timer from the marker): it catches a hang, and a
    loaded machine is not one (a real-control-plane test ran past 900 s at load 50)."""
    factor = load_factor()
    if factor > 1.0:
        marker = item.get_closest_marker("timeout")
        base = float(marker.args[0]) if marker is not None and marker.args else float(item.config.getini("timeout"))
        item.add_marker(pytest.mark.timeout(base * factor), append=False)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:  # pytest-timeout's timer still runs: it bounds this
        yield
        return
    terminal = item.config.get_terminal_writer()
    limit = float(item.config.getini("teardown_timeout")) * load_factor()

    def hung(signum: int, frame: FrameType | None) -> None:
        terminal.sep("+", title=f"Teardown still running after {limit:g} s")
        dump_stacks(terminal)
        terminal.write("".join(traceback.format_stack(frame)))
        pytest.fail(f"teardown of {item.nodeid} still running after {limit:g} s", pytrace=False)

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A test whose teardown was cut short (timeout) can leave non-daemon threads (an HTTP server's
    request handlers) that the interpreter would wait for at exit, for ever, after the summary. Name
    them and exit with the run's status instead."""
    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for thread in left:
        thread.join(timeout=2.0)
    left = [t for t in left if t.is_alive()]
    if not left:
        return
    names = ", ".join(sorted(t.name for t in left))
    sys.stderr.write(f"pytest: {len(left)} non-daemon thread(s) still running after the run ({names}); exiting\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(config.stash.get(_EXIT_STATUS, 1))


@pytest.fixture
def socket_path(tmp_path: Path) -> Iterator[str]:
    """A unix socket path in tmp_path, or in a short temporary folder when tmp_path is too deep for
    AF_UNIX (about 107 bytes)."""
    path = tmp_path / "kubelet.sock"
    if len(str(path)) <= 100:
        yield str(path)
        return
    with tempfile.TemporaryDirectory(prefix="sock-") as short:
        yield str(Path(short) / "kubelet.sock")
