from __future__ import annotations

import json

from migagent.attempt.report.status import desired_annotation, observed_annotation, plan_annotation
from migagent.layout.observed import Observation
from migagent.node.names import deploy_label, is_gpu_resource
from migagent_sim.doubles.builders import gpu_plan, mig_gpu, plan


def test_observed_annotation_lists_each_gpu_with_its_instances_by_profile_name_and_placement() -> None:
    gpu = mig_gpu(0, [("2g.10gb", 4), ("3g.20gb", 0, ["1c.3g.20gb", "2c.3g.20gb"])])
    decoded = json.loads(observed_annotation(Observation(gpus=(gpu,))))
    assert decoded == [
        {
            "index": 0,
            "uuid": "GPU-0",
            "name": "NVIDIA A100-SXM4-40GB",
            "pci_device_id": 0x20B010DE,  # with the name, what `migagent rollout` finds the profile table by
            "mig_capable": True,
            "mode": "enabled",
            "gpu_instances": [
                {
                    "placement": "0:4",
                    "profile_id": 9,
                    "ci_profile_ids": [0, 1],
                    "profile": "3g.20gb",
                    "compute_instances": ["1c.3g.20gb", "2c.3g.20gb"],
                },
                {
                    "placement": "4:2", "profile_id": 14, "ci_profile_ids": [1], "profile": "2g.10gb",
                    "compute_instances": ["2g.10gb"],
                },
            ],
        }
    ]


def test_observed_annotation_names_the_pods_on_each_gpu_instance_when_given() -> None:
    gpu = mig_gpu(0, [("2g.10gb", 4), ("3g.20gb", 0)])
    kept, moved = gpu.gpu_instances[1], gpu.gpu_instances[0]
    decoded = json.loads(observed_annotation(Observation(gpus=(gpu,)), {(0, kept.placement): ["ml/b", "ml/a"]}))
    pods = {gi["placement"]: gi.get("pods") for gi in decoded[0]["gpu_instances"]}
    assert pods == {str(kept.placement): ["ml/a", "ml/b"], str(moved.placement): None}


def test_plan_annotation_counts_what_the_plan_does() -> None:
    gpu = mig_gpu(0, [("3g.20gb", 0), ("3g.20gb", 4)])
    first, second = gpu.gpu_instances
    summary = json.loads(
        plan_annotation(plan(gpu_plan(0, keep=[first], destroy=[second]), gpu_plan(1, reset=True, mode_change=True)))
    )
    assert summary == {"kept": 1, "destroyed": 1, "created": 0, "mode_changes": 1, "resets": 1}


def test_desired_annotation_carries_layout_name_and_hash() -> None:
    assert json.loads(desired_annotation("all-1g.5gb", "abc123")) == {"layout": "all-1g.5gb", "hash": "abc123"}


def test_names_follow_the_gpu_operator_contract() -> None:
    assert deploy_label("device-plugin") == "nvidia.com/gpu.deploy.device-plugin"
    assert is_gpu_resource("nvidia.com/mig-1g.5gb.me")
    assert is_gpu_resource("nvidia.com/gpu")
    assert is_gpu_resource("nvidia.com/gpu.shared")
    assert not is_gpu_resource("example.com/fpga")
