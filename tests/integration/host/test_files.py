"""The selected-layout file (systemd EnvironmentFile syntax) and the watch on the layout files."""

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs
from watchdog.events import (
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
)

from migagent.errors import PermanentError
from migagent.sources.files import ChangeHandler, FileWatch, read_selected_layout
from tests.integration.host.support import WAIT_S

LAYOUT_NAMES = st.from_regex(r"[a-z0-9][a-z0-9.+-]{0,40}", fullmatch=True)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "migagent.env"
    path.write_text(text, encoding="utf-8")
    return path


@given(name=LAYOUT_NAMES, quote=st.sampled_from(["", '"', "'"]), padding=st.sampled_from(["", " ", "\t"]))
def test_the_selected_layout_reads_back_whatever_name_was_written(
    tmp_path_factory: pytest.TempPathFactory, name: str, quote: str, padding: str
) -> None:
    path = _write(tmp_path_factory.mktemp("env"), f"{padding}MIGAGENT_LAYOUT={quote}{name}{quote}{padding}\n")
    assert read_selected_layout(path) == name


def test_the_last_assignment_wins_and_comments_and_other_variables_are_ignored(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "# MIGAGENT_LAYOUT=commented-out\n"
        "MIGAGENT_LAYOUT=first\n"
        "; MIGAGENT_LAYOUT=also-commented\n"
        "MIGAGENT_HOST_CLIENTS=nvidia-dcgm.service\n"
        "MIGAGENT_LAYOUT=second\n"
        "NOT_MIGAGENT_LAYOUT=third\n",
    )
    assert read_selected_layout(path) == "second"


def test_a_missing_file_selects_the_only_config_and_an_empty_value_selects_none(tmp_path: Path) -> None:
    assert read_selected_layout(tmp_path / "absent.env") is None
    assert read_selected_layout(_write(tmp_path, "MIGAGENT_LAYOUT=\n")) == ""
    assert read_selected_layout(_write(tmp_path, "MIGAGENT_LAYOUT=''\n")) == ""


def test_the_shipped_example_selects_no_layout_so_installing_it_changes_nothing() -> None:
    example = Path(__file__).parents[3] / "systemd" / "migagent.env.example"
    assert read_selected_layout(example) == ""


@pytest.mark.parametrize(
    ("event", "reacts"),
    [
        (FileModifiedEvent("/etc/migagent/layouts.yaml"), True),
        (FileClosedEvent("/etc/migagent/migagent.env"), True),
        (FileCreatedEvent("/etc/migagent/layouts.yaml"), True),
        (FileMovedEvent("/etc/migagent/.layouts.yaml.tmp", "/etc/migagent/layouts.yaml"), True),
        (FileMovedEvent("/etc/migagent/..data_tmp", "/etc/migagent/..data"), True),  # ConfigMap volume swap
        (FileOpenedEvent("/etc/migagent/layouts.yaml"), False),  # the agent's own reads
        (FileClosedNoWriteEvent("/etc/migagent/layouts.yaml"), False),
        (FileModifiedEvent("/etc/migagent/unrelated.conf"), False),
    ],
)
def test_the_watch_reacts_to_writes_and_renames_of_watched_files_but_not_to_reads(event: object, reacts: bool) -> None:
    calls: list[None] = []
    handler = ChangeHandler(frozenset({"layouts.yaml", "migagent.env"}), lambda: calls.append(None))
    with capture_logs():
        handler.dispatch(event)  # type: ignore[arg-type]
    assert bool(calls) is reacts


def test_the_watch_sees_a_kubernetes_style_symlink_swap(tmp_path: Path) -> None:
    """ConfigMap volumes: layouts.yaml -> ..data/layouts.yaml, and an update re-points ..data."""
    (tmp_path / "..v1").mkdir()
    (tmp_path / "..v1" / "layouts.yaml").write_text("v1", encoding="utf-8")
    (tmp_path / "..data").symlink_to("..v1")
    (tmp_path / "layouts.yaml").symlink_to("..data/layouts.yaml")
    changed = threading.Event()
    with capture_logs(), FileWatch([tmp_path / "layouts.yaml"], on_change=changed.set):
        (tmp_path / "..v2").mkdir()
        (tmp_path / "..v2" / "layouts.yaml").write_text("v2", encoding="utf-8")
        (tmp_path / "..data_tmp").symlink_to("..v2")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
        assert changed.wait(WAIT_S)
    assert (tmp_path / "layouts.yaml").read_text(encoding="utf-8") == "v2"


def test_watching_a_file_in_a_missing_directory_says_which_directory(tmp_path: Path) -> None:
    watch = FileWatch([tmp_path / "nowhere" / "layouts.yaml"], on_change=lambda: None)
    with pytest.raises(PermanentError, match=r"nowhere: it is not an existing directory"):
        watch.start()
