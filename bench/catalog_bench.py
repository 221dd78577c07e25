"""Part (a): per catalog model, which GI multisets each way of building a GPU actually realises.

For every multiset of GI profiles (default CI each) that fits an empty GPU:
* ours: plan from the empty GPU, run the steps on FakeNvml through GpuDriver, check the result;
* NVML's automatic placement in mig-parted's creation order, one attempt;
* the same with mig-parted's retry over unique permutations (capped);
* a sensitivity check: one attempt when NVML simply takes the lowest free start.
Plan time is measured on the pure planner alone (time.perf_counter around `plan`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.migparted import (
    clear_gpu,
    create_without_placement,
    flatten_order,
    unique_ordering_count,
    unique_orderings,
)
from bench.simnode import SimNode, holds, sim_node
from migagent.catalog import GpuModel
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.planning import enumerate_fitting_multisets, plan
from migagent.sim.fake_nvml import FakeNvml


@dataclass(frozen=True)
class CatalogSettings:
    permutation_cap: int
    plan_repeats: int


FULL = CatalogSettings(permutation_cap=1000, plan_repeats=25)
QUICK = CatalogSettings(permutation_cap=1000, plan_repeats=2)


@dataclass(frozen=True)
class ModelRow:
    model: str
    architecture: str
    multisets: int
    ours: int
    nvml_first: int
    nvml_retry: int
    retry_tries: tuple[int, ...]  # tries used by each multiset the retry realised
    retry_capped: int  # multisets given up at the cap, not because every ordering failed
    lowest_start_first: int
    plan_seconds: tuple[float, ...]

    def share(self, realised: int) -> float:
        return realised / self.multisets if self.multisets else 1.0


def _single_gpu(gis: Sequence[DesiredGi]) -> DesiredNode:
    return DesiredNode(gpus=(DesiredGpu(index=0, mig_enabled=True, gpu_instances=tuple(gis)),))


def _ours_realises(model: GpuModel, desired: DesiredNode) -> bool:
    with sim_node(FakeNvml.from_models([model], mig_enabled=True)) as node:
        node.apply(desired)
        return holds(node.observe(), desired)


def _nvml_attempt(node: SimNode, ordering: Sequence[DesiredGi], desired: DesiredNode) -> bool:
    if not create_without_placement(node.fake, 0, ordering):
        return False
    realised = holds(node.observe(), desired)
    clear_gpu(node.fake, 0)
    if not realised:  # pragma: no cover - every creation succeeded, so the GPU holds the multiset
        raise AssertionError(f"NVML created every instance of {ordering} but the GPU does not hold them")
    return True


def _nvml_retry(node: SimNode, gis: Sequence[DesiredGi], desired: DesiredNode, cap: int) -> int | None:
    """Tries mig-parted needs (1 = the Flatten order worked); None when it gives up."""
    orderings = unique_orderings(flatten_order(node.fake.model(0).profiles, gis))
    for tries, ordering in enumerate(itertools.islice(orderings, cap), start=1):
        if _nvml_attempt(node, ordering, desired):
            return tries
    return None


def _plan_times(model: GpuModel, desired: DesiredNode, repeats: int) -> list[float]:
    with sim_node(FakeNvml.from_models([model], mig_enabled=True)) as node:
        observation = node.observe()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        plan(observation, desired)
        samples.append(time.perf_counter() - started)
    return samples


def bench_model(model: GpuModel, settings: CatalogSettings) -> ModelRow:
    table = model.profiles
    multisets = [gis for gis in enumerate_fitting_multisets(table) if gis]
    ours = first = retried = capped = lowest = 0
    tries_used: list[int] = []
    plan_seconds: list[float] = []
    with (
        sim_node(FakeNvml.from_models([model], mig_enabled=True)) as inferred,
        sim_node(FakeNvml.from_models([model], mig_enabled=True, auto_placement="lowest-start")) as lowest_node,
    ):
        for gis in multisets:
            desired = _single_gpu(gis)
            ours += _ours_realises(model, desired)
            first += _nvml_attempt(inferred, flatten_order(table, gis), desired)
            lowest += _nvml_attempt(lowest_node, flatten_order(table, gis), desired)
            tries = _nvml_retry(inferred, gis, desired, settings.permutation_cap)
            if tries is not None:
                retried += 1
                tries_used.append(tries)
            elif unique_ordering_count(gis) > settings.permutation_cap:
                capped += 1
            plan_seconds += _plan_times(model, desired, settings.plan_repeats)
    return ModelRow(
        model=model.key,
        architecture=model.architecture.value,
        multisets=len(multisets),
        ours=ours,
        nvml_first=first,
        nvml_retry=retried,
        retry_tries=tuple(tries_used),
        retry_capped=capped,
        lowest_start_first=lowest,
        plan_seconds=tuple(plan_seconds),
    )

