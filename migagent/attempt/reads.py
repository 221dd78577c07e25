"""What one attempt reads before its first write, each read once: the layout file's bytes and their
parse, NVML's observation, the node's pods, and the layout the label names resolved against the GPUs.

Several parts of an attempt need the same facts before anything on the node changes (the back-off's
digest, the preflight, the advertisability check, the plan, the safety gate). They all take them from
one `AttemptReads`, so the file is read and parsed once, NVML observed once and the pods listed once
per attempt. A read that fails is not remembered (the next asker tries again, as the attempt would).
A layout superseded mid-change starts a new `AttemptReads`: the GPUs and the file may have changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from migagent.durable import read_bounded
from migagent.errors import InvalidLayoutError
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.layout.parse import parse_layout_bytes
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.spec import LayoutFile
from migagent.node.port import PodView


class AttemptReads:
    def __init__(
        self,
        name: str,
        *,
        config_file: Path,
        observe: Callable[[], Observation],
        list_pods: Callable[[], Sequence[PodView]],
    ) -> None:
        """`name`: the layout the label names; `config_file`: the mounted layout file (read at most once)."""
        self.name = name
        self._path = config_file
        self._observe = observe
        self._list_pods = list_pods
        self._bytes: bytes | None = None
        self._unreadable: OSError | None = None
        self._layout: LayoutFile | InvalidLayoutError | None = None
        self._observation: Observation | None = None
        self._pods: tuple[PodView, ...] | None = None
        self._desired: DesiredNode | InvalidLayoutError | None = None

    @property
    def layout_bytes(self) -> bytes:
        """The file's content as read for this attempt; empty when it cannot be read."""
        if self._bytes is None and self._unreadable is None:
            try:
                self._bytes = read_bounded(self._path)
            except OSError as exc:
                self._unreadable = exc
        return self._bytes or b""

    def layout(self) -> LayoutFile:
        """The parsed file; InvalidLayoutError (remembered: the same bytes parse the same) when it is not one."""
        if self._layout is None:
            self._layout = self._parse()
        if isinstance(self._layout, InvalidLayoutError):
            raise self._layout
        return self._layout

    def _parse(self) -> LayoutFile | InvalidLayoutError:
        data = self.layout_bytes
        if self._unreadable is not None:
            return InvalidLayoutError(f"{self._path}: cannot read layout file: {self._unreadable}")
        try:
            return parse_layout_bytes(data, source=str(self._path))
        except InvalidLayoutError as exc:
            return exc

    def observation(self) -> Observation:
        if self._observation is None:
            self._observation = self._observe()
        return self._observation

    def pods(self) -> tuple[PodView, ...]:
        """The node's pods, listed before any write of this attempt."""
        if self._pods is None:
            self._pods = tuple(self._list_pods())
        return self._pods

    def desired(self) -> DesiredNode:
        """The layout `name` resolved against the GPUs observed; InvalidLayoutError when it does not resolve."""
        if self._desired is None:
            layout, observation = self.layout(), self.observation()
            try:
                self._desired = resolve_config(layout, self.name, [identity_of(gpu) for gpu in observation.gpus])
            except InvalidLayoutError as exc:
                self._desired = exc
        if isinstance(self._desired, InvalidLayoutError):
            raise self._desired
        return self._desired
