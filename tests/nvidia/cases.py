"""The cases NVIDIA's device plugin judges: a layout, a MIG strategy, and a sharing config.

Layouts are written in mig-parted's format, for two H100-80GB GPUs unless a case names another
model. Each case states nothing about the outcome: the real plugin's registration is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from migagent.layout.strategy import MigStrategy

H100 = "2xH100-80GB-SXM"
A100 = "2xA100-40GB"
A30 = "2xA30-24GB"

LAYOUTS = """\
version: v1
mig-configs:
  all-1g.10gb:
    - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}
  balanced:
    - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
  media:
    - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb+me": 1, "1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}}
  uniform-3g:
    - {devices: all, mig-enabled: true, mig-devices: {"3g.40gb": 2}}
  half-disabled:
    - {devices: [0], mig-enabled: true, mig-devices: {"3g.40gb": 2}}
    - {devices: [1], mig-enabled: false, mig-devices: {}}
  small-ci:
    - {devices: all, mig-enabled: true, mig-devices: {"1c.3g.40gb": 3, "3g.40gb": 1}}
  empty:
    - {devices: all, mig-enabled: true, mig-devices: {}}
  disabled:
    - {devices: all, mig-enabled: false, mig-devices: {}}
  a100-balanced:
    - {devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}
  a30-mixed:
    - {devices: all, mig-enabled: true, mig-devices: {"1g.6gb+me": 1, "1g.6gb": 1, "2g.12gb": 1}}
"""


def time_slicing(*entries: str, rename_by_default: bool = False, fail_greater_than_one: bool = False) -> str:
    """A plugin config replicating `entries` (each a YAML flow mapping such as `{name: X, replicas: 2}`)."""
    resources = "".join(f"\n      - {entry}" for entry in entries)
    return (
        "version: v1\nsharing:\n  timeSlicing:\n"
        f"    renameByDefault: {str(rename_by_default).lower()}\n"
        f"    failRequestsGreaterThanOne: {str(fail_greater_than_one).lower()}\n"
        f"    resources:{resources}\n"
    )


@dataclass(frozen=True)
class Case:
    name: str
    layout: str
    strategy: MigStrategy
    config: str | None = None
    """The one sharing config the plugin runs with (selected through config-manager), or None."""
    spec: str = H100

    def __str__(self) -> str:
        return self.name


MIXED, SINGLE, NONE = MigStrategy.MIXED, MigStrategy.SINGLE, MigStrategy.NONE
ONE_G = "nvidia.com/mig-1g.10gb"
ONE_G_TWICE = f"{{name: {ONE_G}, replicas: 2}}"

STRATEGY_CASES = (
    Case("mixed-all-1g", "all-1g.10gb", MIXED),
    Case("mixed-balanced", "balanced", MIXED),
    Case("mixed-media-extension", "media", MIXED),
    Case("mixed-one-gpu-mig-disabled", "half-disabled", MIXED),
    Case("mixed-ci-smaller-than-gi", "small-ci", MIXED),
    Case("mixed-mig-enabled-no-devices", "empty", MIXED),
    Case("mixed-mig-disabled", "disabled", MIXED),
    Case("single-uniform", "uniform-3g", SINGLE),
    Case("single-two-profiles", "balanced", SINGLE),
    Case("single-mixed-mig-modes", "half-disabled", SINGLE),
    Case("single-mig-enabled-no-devices", "empty", SINGLE),
    Case("single-mig-disabled", "disabled", SINGLE),
    Case("none-balanced", "balanced", NONE),
    Case("none-one-gpu-mig-disabled", "half-disabled", NONE),
    Case("a100-mixed-balanced", "a100-balanced", MIXED, spec=A100),
    Case("a30-mixed-media-extension", "a30-mixed", MIXED, spec=A30),
)

SHARING_CASES = (
    Case("ts-1g-twice", "balanced", MIXED, time_slicing(ONE_G_TWICE)),
    Case(
        "ts-rename-by-default",
        "balanced",
        MIXED,
        time_slicing(ONE_G_TWICE, "{name: nvidia.com/mig-3g.40gb, replicas: 3}", rename_by_default=True),
    ),
    Case("ts-custom-rename", "balanced", MIXED, time_slicing(f"{{name: {ONE_G}, replicas: 2, rename: nvidia.com/s}}")),
    Case("ts-device-subset", "balanced", MIXED, time_slicing(f"{{name: {ONE_G}, replicas: 4, devices: 1}}")),
    Case("ts-name-without-prefix", "balanced", MIXED, time_slicing("{name: mig-2g.20gb, replicas: 2}")),
    Case("ts-one-replica", "balanced", MIXED, time_slicing(f"{{name: {ONE_G}, replicas: 1}}")),
    Case("ts-unused-resource", "uniform-3g", MIXED, time_slicing(ONE_G_TWICE)),
    Case("ts-full-gpu-beside-mig", "half-disabled", MIXED, time_slicing("{name: nvidia.com/gpu, replicas: 2}")),
    Case("ts-single", "uniform-3g", SINGLE, time_slicing(
        "{name: nvidia.com/gpu, replicas: 3}", rename_by_default=True
    )),
    Case("ts-none-mig-enabled", "balanced", NONE, time_slicing("{name: nvidia.com/gpu, replicas: 4}")),
    # the plugin's --mig-strategy (set here, as the GPU Operator sets MIG_STRATEGY) wins over the file's flags
    Case("config-flags-strategy", "balanced", MIXED, "version: v1\nflags: {migStrategy: single}\n"),
)
