"""Part (a): per catalog model, which GI multisets each way of building a GPU actually realises.

For every multiset of GI profiles (default CI each) that fits an empty GPU:
* ours: plan from the empty GPU, run the steps on FakeNvml through GpuDriver, check the result;
* NVML's automatic placement in mig-parted's creation order, one attempt (mig-parted leaves ties
  between profiles of equal G, C and attributes in random order; both tie orders are tried);
* the same with mig-parted's retry over unique permutations (capped);
* a sensitivity check: one attempt when NVML simply takes the lowest free start.
Plan time is measured on the pure planner alone (time.perf_counter around `plan`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from bench.migparted import (
    clear_gpu,
    create_without_placement,
    flatten_order,
    unique_ordering_count,
    unique_orderings,
)
from bench.simnode import SimNode, holds, sim_node, time_plan
from migagent.catalog import GpuModel
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.planning import enumerate_fitting_multisets
from migagent.planning.naming import describe_multiset
from migagent.sim.fake_nvml import FakeNvml


@dataclass(frozen=True)
class CatalogSettings:
    permutation_cap: int
    plan_repeats: int


FULL = CatalogSettings(permutation_cap=1000, plan_repeats=50)
QUICK = CatalogSettings(permutation_cap=1000, plan_repeats=2)


@dataclass(frozen=True)
class ModelRow:
    model: str
    architecture: str
    multisets: int
    ours: int
    nvml_first: int  # Flatten ties (same G, C, attribute) broken towards more memory first
    nvml_first_small: int  # the same ties broken towards less memory first
    nvml_retry: int
    retry_tries: tuple[int, ...]  # tries used by each multiset the retry realised
    retry_capped: int  # multisets given up at the cap, not because every ordering failed
    lowest_start_first: int
    plan_seconds: tuple[float, ...]
    first_attempt_misses: tuple[str, ...]  # the multisets the single NVML attempt cannot build

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
    return time_plan(observation, desired, repeats)


@dataclass(frozen=True)
class _MultisetResult:
    ours: bool
    nvml_first: bool
    nvml_first_small: bool
    lowest_start_first: bool
    retry_tries: int | None
    plan_seconds: list[float]


def _measure(
    gis: Sequence[DesiredGi], model: GpuModel, nodes: tuple[SimNode, SimNode], settings: CatalogSettings
) -> _MultisetResult:
    table = model.profiles
    inferred, lowest_start = nodes
    desired = _single_gpu(gis)
    return _MultisetResult(
        ours=_ours_realises(model, desired),
        nvml_first=_nvml_attempt(inferred, flatten_order(table, gis), desired),
        nvml_first_small=_nvml_attempt(inferred, flatten_order(table, gis, more_memory_first=False), desired),
        lowest_start_first=_nvml_attempt(lowest_start, flatten_order(table, gis), desired),
        retry_tries=_nvml_retry(inferred, gis, desired, settings.permutation_cap),
        plan_seconds=_plan_times(model, desired, settings.plan_repeats),
    )


def bench_model(model: GpuModel, settings: CatalogSettings) -> ModelRow:
    """Every non-empty fitting multiset of this model, through every approach."""
    table = model.profiles
    multisets = [gis for gis in enumerate_fitting_multisets(table) if gis]
    with (
        sim_node(FakeNvml.from_models([model], mig_enabled=True)) as inferred,
        sim_node(FakeNvml.from_models([model], mig_enabled=True, auto_placement="lowest-start")) as lowest_start,
    ):
        results = [_measure(gis, model, (inferred, lowest_start), settings) for gis in multisets]
    tries = [r.retry_tries for r in results if r.retry_tries is not None]
    return ModelRow(
        model=model.key,
        architecture=model.architecture.value,
        multisets=len(multisets),
        ours=sum(r.ours for r in results),
        nvml_first=sum(r.nvml_first for r in results),
        nvml_first_small=sum(r.nvml_first_small for r in results),
        nvml_retry=len(tries),
        retry_tries=tuple(tries),
        retry_capped=sum(
            r.retry_tries is None and unique_ordering_count(gis) > settings.permutation_cap
            for r, gis in zip(results, multisets, strict=True)
        ),
        lowest_start_first=sum(r.lowest_start_first for r in results),
        plan_seconds=tuple(t for r in results for t in r.plan_seconds),
        first_attempt_misses=tuple(
            describe_multiset(table, gis) for r, gis in zip(results, multisets, strict=True) if not r.nvml_first
        ),
    )
