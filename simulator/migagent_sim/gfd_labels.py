"""GPU Feature Discovery's resource labels for the simulated node (k8s-device-plugin v0.18.2, internal/lm).

Only the labels migagent reads or that say how a resource is shared: `nvidia.com/mig.strategy`
(absent under `none`), and per resource `.count`, `.replicas`, `.sharing-strategy` and `.product`.
Checked label by label against the real `gpu-feature-discovery` in tests/nvidia. How GFD names them:
- whole GPUs (`nvidia.com/gpu.*`), per GPU model (counting all its GPUs): MIG-enabled GPUs without
  sharing (replicas 0), GPUs with MIG off with it; when a model has both, the MIG-off labels win;
- mixed: one resource per MIG profile by its own name (`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me`,
  `1c.3g.40gb` -> `nvidia.com/mig-1c.3g.40gb`), unlike the device plugin's names (layout.strategy);
- single: `nvidia.com/gpu` counts the MIG devices, or reads `<model>-MIG-INVALID` with count 0 on a
  node the plugin refuses;
- `.product` is the model (and `-MIG-<profile>`), spaces as `-`, with `-SHARED` when the resource
  is replicated and not renamed (only renameByDefault renames); `.replicas` is the config's, else 1.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from migagent.layout.profile import ci_profile_name
from migagent.layout.sharing import SharingConfig
from migagent.layout.strategy import GPU_RESOURCE, MIG_RESOURCE_PREFIX, MigStrategy
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import MIG_ENABLE

STRATEGY_LABEL = "nvidia.com/mig.strategy"
_NOT_NAME = re.compile(r"[^A-Za-z0-9-_. ]")


def gfd_labels(fake: FakeNvml, strategy: MigStrategy, sharing: SharingConfig) -> dict[str, str]:
    labels = _whole_gpu_labels(fake, sharing)
    if strategy is MigStrategy.NONE:
        return labels
    labels[STRATEGY_LABEL] = str(strategy)
    devices = list(_mig_devices(fake))
    if strategy is MigStrategy.MIXED:
        for profile, count in Counter(profile for _, profile in devices).items():
            model = next(m for m, p in devices if p == profile)
            labels.update(_resource(MIG_RESOURCE_PREFIX + profile, count, [model, "MIG", profile], sharing))
    else:
        labels.update(_single(fake, devices, sharing))
    return labels


def _whole_gpu_labels(fake: FakeNvml, sharing: SharingConfig) -> dict[str, str]:
    models = [(fake.model(i).name, gpu.mig_current == MIG_ENABLE) for i, gpu in enumerate(fake.state.gpus)]
    counts = Counter(model for model, _ in models)  # one count per model, MIG on or off
    labels: dict[str, str] = {}
    for model in dict.fromkeys(model for model, enabled in models if enabled):
        labels.update(_resource(GPU_RESOURCE, counts[model], [model], None))
    for model in dict.fromkeys(model for model, enabled in models if not enabled):
        labels.update(_resource(GPU_RESOURCE, counts[model], [model], sharing))
    return labels


def _single(fake: FakeNvml, devices: list[tuple[str, str]], sharing: SharingConfig) -> dict[str, str]:
    gpus = list(enumerate(fake.state.gpus))
    enabled = [i for i, gpu in gpus if gpu.mig_current == MIG_ENABLE]
    if not enabled:
        return {}
    empty = any(not any(gi.compute_instances for gi in gpus[i][1].gpu_instances) for i in enabled)
    if empty or len(enabled) != len(gpus) or len({profile for _, profile in devices}) != 1:
        model = _product([fake.model(enabled[0]).name, "MIG", "INVALID"])
        return {
            f"{GPU_RESOURCE}.product": model,
            f"{GPU_RESOURCE}.count": "0",
            f"{GPU_RESOURCE}.replicas": "0",
            f"{GPU_RESOURCE}.sharing-strategy": "",
        }
    model, profile = devices[0]
    return _resource(GPU_RESOURCE, len(devices), [model, "MIG", profile], sharing)


def _resource(resource: str, count: int, parts: list[str], sharing: SharingConfig | None) -> dict[str, str]:
    """baseLabeler: `sharing` None is GFD's labeler without sharing (replicas 0)."""
    entry = next((r for r in sharing.resources if r.name == resource), None) if sharing is not None else None
    replicas = 0 if sharing is None else entry.replicas if entry is not None else 1
    shared = replicas > 1
    renamed = shared and sharing is not None and sharing.rename_by_default
    strategy = ("time-slicing" if sharing.kind == "timeSlicing" else sharing.kind) if shared and sharing else "none"
    product = _product(parts) + ("-SHARED" if shared and not renamed else "")
    return {
        f"{resource}.product": product,
        f"{resource}.count": str(count),
        f"{resource}.replicas": str(replicas),
        f"{resource}.sharing-strategy": strategy,
    }


def _product(parts: list[str]) -> str:
    return "-".join("-".join(_NOT_NAME.sub("", part).split()) for part in parts if part)


def _mig_devices(fake: FakeNvml) -> Iterator[tuple[str, str]]:
    """(parent GPU model, profile name with `+` written `.`) for every MIG device."""
    for index, gpu in enumerate(fake.state.gpus):
        if gpu.mig_current != MIG_ENABLE:
            continue
        table = fake.model(index).profiles
        for gi in gpu.gpu_instances:
            gi_profile = table.gi_profile(gi.profile_id)
            for ci in gi.compute_instances:
                ci_profile = gi_profile.ci_profile(ci.profile_id) if gi_profile is not None else None
                if gi_profile is not None and ci_profile is not None:
                    name = str(ci_profile_name(gi_profile, ci_profile, table)).replace("+", ".")
                    yield fake.model(index).name, name
