"""Node specs for the simulator: "8xH100-80GB-SXM", "2xA100-40GB,2xA30-24GB", "H200-141GB"."""

from __future__ import annotations

import re

from migagent.catalog import GpuModel, UnknownGpuModelError, model_by_key, model_keys

# The simulated PCI bus numbers start at 0x18; keep the node small enough that they stay one byte.
MAX_GPUS_PER_NODE = 64

_ENTRY = re.compile(r"^(?:(?P<count>[0-9]+)\s*[xX]\s*)?(?P<key>\S.*)$")


class NodeSpecError(ValueError):
    """A node spec the simulator cannot build; the message says what would be valid."""


def parse_node_spec(spec: str) -> tuple[GpuModel, ...]:
    """One catalog model per simulated GPU, in spec order. Keys are case-insensitive; count defaults to 1."""
    entries = [entry.strip() for entry in spec.split(",")]
    if not spec.strip() or any(not entry for entry in entries):
        raise NodeSpecError(
            f"empty entry in node spec {spec!r}: expected comma-separated [<count>x]<model>,"
            f" e.g. '8xH100-80GB-SXM'; valid models: {', '.join(model_keys())}"
        )
    parsed = [_parse_entry(spec, entry) for entry in entries]
    total = sum(count for count, _model in parsed)
    # Checked before building the list: a count such as 10**12 must not be expanded first.
    if total > MAX_GPUS_PER_NODE:
        raise NodeSpecError(
            f"node spec {spec!r} asks for {total} GPUs; the simulator supports at most {MAX_GPUS_PER_NODE}"
        )
    return tuple(model for count, model in parsed for _ in range(count))


def _parse_entry(spec: str, entry: str) -> tuple[int, GpuModel]:
    match = _ENTRY.match(entry)
    if match is None:  # pragma: no cover - the pattern accepts every non-empty entry
        raise NodeSpecError(f"malformed entry {entry!r} in node spec {spec!r}")
    count = int(match["count"]) if match["count"] is not None else 1
    if count < 1:
        raise NodeSpecError(f"entry {entry!r} in node spec {spec!r}: the GPU count must be at least 1")
    try:
        return count, model_by_key(match["key"].strip())
    except UnknownGpuModelError as exc:
        raise NodeSpecError(
            f"unknown GPU model {match['key'].strip()!r} in node spec {spec!r};"
            f" valid models: {', '.join(model_keys())}"
        ) from exc
