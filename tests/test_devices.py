"""devices.py is the one place that knows the kinds of device: names, paths, capabilities."""

import pytest
import torch
from mnistbench import BenchError
from mnistbench.config import devices


@pytest.mark.parametrize("name, slug", [("cpu", "cpu"), ("cuda", "cuda"), ("cuda:1", "cuda1"), ("mps", "mps")])
def test_slug_round_trip(name, slug):
    assert devices.slug(name) == slug and devices.unslug(slug) == name


def test_capabilities_per_kind():
    assert devices.is_cpu("cpu") and not devices.is_cpu("cuda:0")
    assert devices.traits("cuda:2").pinned_memory and not devices.traits("cpu").pinned_memory
    assert devices.traits("cuda").events and devices.traits("mps").mark_every > 1
    assert devices.traits("cuda:1").needs_gpu and not devices.traits("mps").needs_gpu
    assert devices.autocast_dtype("cpu", "float16") == torch.bfloat16
    assert devices.autocast_dtype("cuda", "float16") == torch.float16
    assert devices.cpu_first(["cuda:1", "cpu", "cuda"]) == ["cpu", "cuda", "cuda:1"]


def test_this_machine_has_a_cpu_and_refuses_what_it_lacks():
    assert devices.available()[0] == "cpu"
    with pytest.raises(BenchError, match="unknown device 'tpu'"):
        devices.check("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(BenchError, match="CUDA not available"):
            devices.check("cuda:1")
