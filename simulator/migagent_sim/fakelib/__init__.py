"""The Python side of the fake `libnvidia-ml.so.1` (native/fake_nvml/): the backend the C library
calls, the state-file node every process shares, and the fake `nvidia-smi`. FakeNvml itself (the one
model of the GPU) stays in the product, `migagent.sim`."""
