"""Log format: JSON lines for daemons, console lines on a terminal, for structlog and stdlib loggers alike."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog

from migagent.plumbing.logging import configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _lines(capsys: pytest.CaptureFixture[str], *, mentioning: str) -> list[str]:
    """The stderr lines that mention `mentioning` (threads left over from other tests may log too)."""
    return [line for line in capsys.readouterr().err.splitlines() if mentioning in line]


def test_daemon_logs_are_one_json_object_per_line_with_level_and_timestamp(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_logs=True, level=logging.INFO)
    structlog.get_logger("migagent.test").info("host_layout_applied", config="all-balanced")
    (line,) = _lines(capsys, mentioning="host_layout_applied")
    record = json.loads(line)
    assert record["event"] == "host_layout_applied"
    assert record["config"] == "all-balanced"
    assert record["level"] == "info"
    assert record["timestamp"].endswith("Z")


def test_library_warnings_in_daemon_mode_are_json_too_naming_their_logger(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_logs=True, level=logging.INFO)
    logging.getLogger("somelib.connectionpool").warning("Retrying (%s) after connection broken", "total=2")
    (line,) = _lines(capsys, mentioning="somelib")
    record = json.loads(line)
    assert record["event"] == "Retrying (total=2) after connection broken"
    assert record["level"] == "warning"
    assert record["logger"] == "somelib.connectionpool"


def test_a_library_exception_keeps_its_traceback_inside_the_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_logs=True, level=logging.INFO)
    try:
        raise ConnectionResetError("peer went away")
    except ConnectionResetError:
        logging.getLogger("somelib.rest").exception("request failed")
    (line,) = _lines(capsys, mentioning="somelib")
    assert "ConnectionResetError: peer went away" in json.loads(line)["exception"]


def test_library_info_chatter_is_dropped_unless_debugging(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_logs=True, level=logging.INFO)
    logging.getLogger("somelib.connectionpool").info("Starting new HTTPS connection")
    assert _lines(capsys, mentioning="somelib") == []
    configure_logging(json_logs=True, level=logging.DEBUG)
    logging.getLogger("somelib.connectionpool").info("Starting new HTTPS connection")
    assert json.loads(_lines(capsys, mentioning="somelib")[0])["event"] == "Starting new HTTPS connection"


def test_configuring_twice_does_not_print_library_records_twice(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_logs=True)
    configure_logging(json_logs=True)
    logging.getLogger("somelib").warning("once")
    assert len(_lines(capsys, mentioning="somelib")) == 1


def test_console_logs_are_readable_text_not_json(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_logs=False, level=logging.INFO)
    structlog.get_logger("migagent.test").info("host_layout_applied", config="all-balanced")
    logging.getLogger("somelib.connectionpool").warning("Retrying GET")
    err = capsys.readouterr().err
    (ours,) = [line for line in err.splitlines() if "host_layout_applied" in line]
    (library,) = [line for line in err.splitlines() if "somelib.connectionpool" in line]
    for line in (ours, library):
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)
    assert "config=all-balanced" in ours
    assert "Retrying GET" in library


def test_without_a_choice_the_format_follows_whether_stderr_is_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    # Under pytest, stderr is a capture buffer, as under systemd or a container runtime: JSON.
    configure_logging(level=logging.INFO)
    structlog.get_logger("migagent.test").info("started")
    assert json.loads(_lines(capsys, mentioning="started")[0])["event"] == "started"


class _Writes(io.StringIO):
    """A stderr that keeps each write call apart."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_each_log_line_is_one_write_so_another_threads_line_never_lands_inside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # apply's "stopping after the step in progress" is written by the signal's own thread while the main
    # thread logs its steps: a line written as text then newline (two writes) could take it in between.
    stderr = _Writes()
    monkeypatch.setattr(sys, "stderr", stderr)
    configure_logging(json_logs=True, level=logging.INFO)
    structlog.get_logger("migagent.test").info("step_started", step="GPU 0: destroy")
    logging.getLogger("urllib3").warning("a library line")
    lines = [call for call in stderr.calls if "step_started" in call or "a library line" in call]
    assert len(lines) == 2
    assert all(call.endswith("\n") and call.count("\n") == 1 for call in lines), stderr.calls
    assert "\n" not in stderr.calls  # no newline written on its own


def test_a_logger_bound_before_stderr_was_swapped_and_closed_writes_to_the_new_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An attempt binds its logger when it starts; pytest's capsys swapped in its stream and closed it when
    the test ended, while the attempt's thread still ran: the next line raised "I/O operation on closed
    file" and the thread died (once, in a whole-suite run beside a second one)."""
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging(json_logs=True, level=logging.INFO)
    attempt_log = structlog.get_logger("migagent.test").bind(node="gpu-h100-2")
    monkeypatch.setattr(sys, "stderr", second)
    first.close()
    attempt_log.info("layout_already_applied")
    assert json.loads(second.getvalue())["event"] == "layout_already_applied"


class _SwappedWhileWriting(io.StringIO):
    """A stream that is swapped for `then` and closed between the logger's look at sys.stderr and its write."""

    def __init__(self, then: io.StringIO) -> None:
        super().__init__()
        self.then = then

    def write(self, text: str) -> int:
        sys.stderr = self.then
        self.close()
        return super().write(text)


def test_a_line_whose_stream_is_swapped_and_closed_mid_write_lands_in_the_new_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replacement = io.StringIO()
    monkeypatch.setattr(sys, "stderr", _SwappedWhileWriting(replacement))
    configure_logging(json_logs=True, level=logging.INFO)
    structlog.get_logger("migagent.test").info("attempt_failed")
    assert json.loads(replacement.getvalue())["event"] == "attempt_failed"


def test_a_closed_stderr_that_is_still_stderr_is_an_error_not_a_lost_line(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    configure_logging(json_logs=True, level=logging.INFO)
    with pytest.raises(ValueError, match="closed file"):
        structlog.get_logger("migagent.test").info("attempt_failed")
