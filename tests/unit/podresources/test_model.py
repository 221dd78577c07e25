from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from migagent.podresources import PodDevices
from migagent.podresources.model import from_pod_resources, physical_device_id, to_pod_resources

_names = st.text(alphabet="abcdefgh-", min_size=1, max_size=6)
_entries = st.lists(
    st.builds(
        PodDevices,
        namespace=_names,
        name=_names,
        container=_names,
        resource_name=st.sampled_from(["nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "nvidia.com/gpu"]),
        device_ids=st.lists(st.uuids().map(lambda u: f"MIG-{u}"), min_size=1, max_size=3, unique=True).map(tuple),
    ),
    max_size=8,
)


@given(_entries)
def test_grouping_into_pods_and_flattening_again_gives_back_the_same_entries(entries: list[PodDevices]) -> None:
    ordered = sorted(entries, key=lambda e: (e.namespace, e.name, e.container))
    assert list(from_pod_resources(to_pod_resources(ordered))) == ordered


def test_one_message_per_pod_and_one_container_entry_per_container_name() -> None:
    entries = [
        PodDevices("ml", "train", "main", "nvidia.com/mig-1g.10gb", ("MIG-a",)),
        PodDevices("ml", "train", "main", "nvidia.com/mig-3g.40gb", ("MIG-b",)),
        PodDevices("ml", "train", "sidecar", "nvidia.com/mig-1g.10gb", ("MIG-c",)),
        PodDevices("web", "train", "main", "nvidia.com/mig-1g.10gb", ("MIG-d",)),
    ]
    pods = to_pod_resources(entries)
    assert [(p.namespace, p.name) for p in pods] == [("ml", "train"), ("web", "train")]
    assert [c.name for c in pods[0].containers] == ["main", "sidecar"]
    assert [d.resource_name for d in pods[0].containers[0].devices] == [
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-3g.40gb",
    ]


def test_replica_suffixes_of_shared_devices_are_removed_and_duplicates_collapse() -> None:
    assert physical_device_id("MIG-2ce7a541-1111-5222-8333-444455556666::7") == (
        "MIG-2ce7a541-1111-5222-8333-444455556666"
    )
    shared = [PodDevices("ns", "p", "c", "nvidia.com/mig-1g.10gb", ("MIG-a::1", "MIG-a::2", "MIG-b"))]
    assert from_pod_resources(to_pod_resources(shared))[0].device_ids == ("MIG-a", "MIG-b")
