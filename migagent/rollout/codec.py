"""The state object read back strictly: every field of the stored JSON is checked for its type and its
rules (the same rules as the flags), and the targets against the rollout's layouts, before any
decision is made from it. A hand-edited or damaged object is refused in one line that names the
object, the field and what is wrong, and says how to repair or remove it; nothing is relabelled.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from migagent.errors import InvalidLayoutError
from migagent.jsontext import decode_json
from migagent.rollout.budget import BudgetSpecError, MaxUnavailable
from migagent.rollout.errors import CorruptStateError
from migagent.rollout.spec import RolloutSpec, SpecValueError, node_count, positive_seconds, seconds
from migagent.rollout.state import Layouts, Mode, NodeRecord, NodeStatus, Phase, RolloutState

STATE_KEY = "state"
LAYOUTS_KEY = "layouts"
_SHOWN = 60  # characters of a bad value quoted in a message
E = TypeVar("E", bound=enum.Enum)


class StoredObject(Protocol):
    """A state object as read (kube.rollout_api.StoredState): its data and where it lives."""

    @property
    def rollout(self) -> str: ...

    @property
    def data(self) -> Mapping[str, str]: ...

    @property
    def resource_version(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def object_name(self) -> str: ...


class _WrongFieldError(Exception):
    """One thing wrong in the object, said as `field: problem`."""


def _show(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


class _Fields:
    """One JSON object of the state, read field by field; `path` names it in messages (state.nodes.gpu-1)."""

    def __init__(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            raise _WrongFieldError(f"{path}: expected an object, got {_show(value)}")
        self._data: dict[str, object] = value
        self.path = path

    @property
    def raw(self) -> dict[str, object]:
        return self._data

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def _required(self, key: str) -> object:
        if key not in self._data:
            raise _WrongFieldError(f"{self._at(key)}: missing")
        return self._data[key]

    def text(self, key: str) -> str:
        value = self._required(key)
        if not isinstance(value, str):
            raise _WrongFieldError(f"{self._at(key)}: expected a string, got {_show(value)}")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is not None and not isinstance(value, str):
            raise _WrongFieldError(f"{self._at(key)}: expected a string or null, got {_show(value)}")
        return value

    def whole(self, key: str, default: int | None = None, *, least: int = 0) -> int:
        value = self._data.get(key, default) if default is not None else self._required(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise _WrongFieldError(f"{self._at(key)}: expected a whole number of at least {least}, got {_show(value)}")
        return value

    def optional_whole(self, key: str, *, least: int) -> int | None:
        return None if self._data.get(key) is None else self.whole(key, least=least)

    def number(self, key: str, default: float) -> float:
        value = self._data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise _WrongFieldError(f"{self._at(key)}: expected a number, got {_show(value)}")
        return float(value)

    def optional_number(self, key: str) -> float | None:
        return None if self._data.get(key) is None else self.number(key, 0.0)

    def flag(self, key: str, default: bool) -> bool:
        value = self._data.get(key, default)
        if not isinstance(value, bool):
            raise _WrongFieldError(f"{self._at(key)}: expected true or false, got {_show(value)}")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self._data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise _WrongFieldError(f"{self._at(key)}: expected a list of strings, got {_show(value)}")
        return tuple(value)

    def choice(self, key: str, kind: type[E], default: E | None = None) -> E:
        value = self._required(key) if default is None else self._data.get(key, default.value)
        try:
            return kind(value)
        except ValueError:
            valid = ", ".join(str(member.value) for member in kind)
            raise _WrongFieldError(f"{self._at(key)}: {_show(value)} is not one of {valid}") from None

    def nested(self, key: str) -> _Fields:
        return _Fields(self._required(key), self._at(key))

    def entries(self, key: str) -> list[tuple[str, _Fields]]:
        value = self._data.get(key, {})
        listed = _Fields(value, self._at(key))
        return [(name, _Fields(entry, listed._at(name))) for name, entry in listed._data.items()]

    def checked(self, key: str, value: float, rule: Callable[[Any], object]) -> None:
        """`rule(value)` (a spec rule) as a field problem."""
        try:
            rule(value)
        except SpecValueError as error:
            raise _WrongFieldError(f"{self._at(key)}: {error}") from None


def _spec(fields: _Fields) -> RolloutSpec:
    try:
        budget = MaxUnavailable.parse(fields.text("max_unavailable"))
    except BudgetSpecError as error:
        raise _WrongFieldError(f"{fields.path}.max_unavailable: {error}") from None
    spec = RolloutSpec(
        selector=fields.text("selector"),
        layout=fields.text("layout"),
        max_unavailable=budget,
        canary=fields.whole("canary", 1),
        soak_s=fields.number("soak_s", 0.0),
        failure_budget=fields.whole("failure_budget", 1),
        lease_s=fields.number("lease_s", 30.0),
    )
    for key, value, rule in (("canary", spec.canary, node_count), ("failure_budget", spec.failure_budget, node_count),
                             ("soak_s", spec.soak_s, seconds), ("lease_s", spec.lease_s, positive_seconds)):
        fields.checked(key, value, rule)
    return spec


def _record(node: str, fields: _Fields) -> NodeRecord:
    status = fields.choice("status", NodeStatus)
    wave = fields.optional_whole("wave", least=1)
    return NodeRecord(
        node=node,
        status=status,
        target=fields.optional_text("target"),
        previous=fields.optional_text("previous"),
        gpus=fields.whole("gpus", 0),
        wave=wave,
        predicted=fields.texts("predicted"),
        pods_before=fields.texts("pods_before"),
        evicted=fields.texts("evicted"),
        started_at=fields.optional_number("started_at"),
        finished_at=fields.optional_number("finished_at"),
        reason=fields.optional_text("reason") or "",
        stale_attempt=fields.optional_text("stale_attempt"),
        # An object written before `labelled` existed: a node that reached an answer was relabelled.
        labelled=fields.flag("labelled", status in (NodeStatus.DONE, NodeStatus.FAILED) and wave is not None),
    )


def _in_layouts(layouts: Layouts, name: str | None, where: str) -> None:
    if name is None or name not in layouts.file.configs:
        names = layouts.file.names
        valid = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "") or "none"
        raise _WrongFieldError(f"{where}: {_show(name)} is not a layout of the rollout's layouts (valid: {valid})")


def _layouts(stored: StoredObject, known: RolloutState | None) -> Layouts:
    if LAYOUTS_KEY not in stored.data:
        raise _WrongFieldError(f"no {LAYOUTS_KEY!r} key (the layout file the rollout was started with)")
    text = stored.data[LAYOUTS_KEY]
    if known is not None and known.layouts.text == text:
        return known.layouts
    try:
        return Layouts.parse(text, source=f"key {LAYOUTS_KEY!r}")
    except InvalidLayoutError as error:
        raise _WrongFieldError(" ".join(str(error).split())) from None


def _state(rollout: str, stored: StoredObject, known: RolloutState | None) -> RolloutState:
    if STATE_KEY not in stored.data:
        raise _WrongFieldError(f"no {STATE_KEY!r} key")
    try:
        top = _Fields(decode_json(stored.data[STATE_KEY]), STATE_KEY)
    except ValueError as error:
        raise _WrongFieldError(f"key {STATE_KEY!r} is not JSON ({error})") from None
    name = top.text("name")
    if name != rollout:
        raise _WrongFieldError(f"state.name: {_show(name)}, but the object is rollout {rollout!r}'s")
    spec_fields = top.nested("spec")
    spec = known.spec if known is not None and spec_fields.raw == known.spec.to_json() else _spec(spec_fields)
    layouts = _layouts(stored, known)  # (spec.layout names the rollout's origin: -c, or the advice)
    mode = top.choice("mode", Mode, Mode.ROLLOUT)
    nodes = {node: _record(node, fields) for node, fields in top.entries("nodes")}
    for record in nodes.values() if mode is Mode.ROLLOUT else ():
        # An undo's targets are the labels the nodes had before: restored even where the file lacks them.
        _in_layouts(layouts, record.target, f"state.nodes.{record.node}.target")
    return RolloutState(
        name=name,
        spec=spec,
        layouts=layouts,
        phase=top.choice("phase", Phase, Phase.RUNNING),
        mode=mode,
        nodes=nodes,
        waves=top.whole("waves", 0),
        canary_done_at=top.optional_number("canary_done_at"),
        holder=top.optional_text("holder"),
        holder_expires=top.number("holder_expires", 0.0),
        reasons=top.texts("reasons"),
        resource_version=stored.resource_version,
    )


def decode(rollout: str, stored: StoredObject, known: RolloutState | None = None) -> RolloutState:
    """The rollout in `stored`; its spec (--max-unavailable and the rest) and its layouts are taken from
    `known`, the same rollout read before, while they are unchanged, so a driver that reads the object
    at every look parses them once. CorruptStateError says what is wrong and how to repair or remove it."""
    try:
        return _state(rollout, stored, known)
    except _WrongFieldError as wrong:
        raise CorruptStateError(
            f"rollout {rollout}: its state object (configmap {stored.namespace}/{stored.object_name}) cannot be"
            f" read: {wrong}; {repair_or_remove(stored, 'that forgets the rollout; the nodes keep their labels')}"
        ) from None


def repair_or_remove(stored: StoredObject, removing: str) -> str:
    """How an admin mends a state object that cannot be read, and what `removing` it costs."""
    where = f"-n {stored.namespace} configmap {stored.object_name}"
    return f"repair it with `kubectl edit {where}`, or remove it with `kubectl delete {where}` ({removing})"


def encode(state: RolloutState) -> dict[str, str]:
    return {STATE_KEY: state.dumps(), LAYOUTS_KEY: state.layouts.text}
