"""What a timing depends on besides the code: versions, hardware, threads, commit, config."""

import functools
import hashlib
import json
import os
import platform
import socket
import subprocess
from pathlib import Path

import torch

from mnistbench.config import depends, devices
from mnistbench.measure import machines


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def config_hash(cfg: dict) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


@functools.cache
def fma_gflops() -> float | None:
    """One core's peak arithmetic rate, GFLOP/s (kernel.c's FMA chains; ~30 ms to measure, once per
    process), or None where the kernel cannot be built: a network's arithmetic limit on one core
    is its FLOP per training sample at this rate."""
    from mnistbench.train import kernel

    try:
        return kernel.fma_gflops()
    except kernel.BuildError:
        return None


@functools.cache
def denormals() -> dict:
    """What an operation on a denormal number costs this core, as a multiple of a normal one
    (kernel.c's probe: ~3 ms, once per process, so every repeat's process measures it anew), and
    whether the C modes flush denormals on this cpu; None for both where the kernel cannot be built."""
    from mnistbench.train import kernel

    try:
        return {"denormal_cost": kernel.denormal_cost(), "c_modes_flush": kernel.flushes()}
    except kernel.BuildError:
        return {"denormal_cost": None, "c_modes_flush": None}


def machine(device: str, threads: int) -> str:
    """The hardware a run had, as machines.py reads it: runs on identical nodes pool by it."""
    parts = [f"{devices.cpu_model()}, {threads} threads", devices.accelerator(device), f"torch {torch.__version__}"]
    return machines.SEP.join(p for p in parts if p)


def describe(device: str, threads: int, cfg: dict) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        torchvision = version("torchvision")  # without importing it: train jobs never need it
    except PackageNotFoundError:
        torchvision = None
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),  # the process that trained: repeats are trained by different ones
        "device": device,
        "device_name": devices.name(device),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision,
        **devices.runtime(device),
        "cpu_model": devices.cpu_model(),
        "cores": os.cpu_count(),
        "threads": threads,
        "fma_gflops": fma_gflops(),
        **denormals(),
        "platform": platform.platform(),
        "env": {k: os.environ[k] for k in sorted(os.environ) if k.startswith(depends.RECORDED_ENV)},
        "git_commit": git_commit(),
        "config_hash": config_hash(cfg),
    }
