"""Was the machine quiet while a run was timed? Evidence gathered outside the timed loop, and the
run's verdict: `ok`, `noisy` or `few_steps`.

Evidence, read between epochs and by a sampler thread that wakes every SAMPLE_S (the timed loop
itself only steps and marks the clock):
- cpu: the busy time of the cpus this process may run on (psutil's per-cpu times, read from
  /proc/stat on Linux, steal included: on a VM a busy neighbour shows there), minus this process's own cpu time, per second of wall time: how
  many cores something else used while the run was being timed, and during which stretch;
- cuda: other processes on the same GPU (NVML, where the nvidia-ml-py package is installed);
- the load average, the process's own cpu time against wall time x threads, and the dispersion of
  the run's own step times (q3 / q1).
"""

import math
import os
import threading
import time
from dataclasses import dataclass, field

import psutil

from mnistbench.config import devices

VERDICTS = ("ok", "noisy", "few_steps")
# /proc/stat counts whole ticks (10 ms) per cpu, so over a window of w seconds the cores it
# shows are known to within cpus x tick / w: short epochs are judged together, in windows of at
# least MIN_WINDOW_S, and a window counts as busy only when its load exceeds the threshold by
# more than that rounding.
MIN_WINDOW_S = 0.2
SAMPLE_S = 0.1  # the sampler's period while a run is timed


def _cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _busy_seconds(cpus: set[int]) -> float | None:
    """Busy time (s) of these cpus since boot: psutil's per-cpu times (/proc/stat on Linux), all
    but idle and iowait, steal included; guest time is already in user time. None where the
    platform has no per-cpu times."""
    try:
        per_cpu = psutil.cpu_times(percpu=True)
    except (OSError, NotImplementedError):
        return None
    idle = ("idle", "iowait", "guest", "guest_nice")
    return sum(sum(t) - sum(getattr(t, f, 0.0) for f in idle) for i, t in enumerate(per_cpu) if i in cpus)


def _gpu_processes(device: str) -> set[int] | None:
    """PIDs of other processes with a context on this cuda device (NVML), or None where that cannot
    be known. This pipeline's idle warm workers are not counted: they hold a context but wait
    while this run holds the timed slot."""
    if not devices.traits(device).nvml:
        return None
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            if uuid.replace("GPU-", "") in str(pynvml.nvmlDeviceGetUUID(h)):
                pids = {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
                # This process holds a context now; if NVML does not list it, its PIDs are of
                # another PID namespace (a container) and cannot be matched with ours.
                if os.getpid() not in pids:
                    return None
                return {p for p in pids - {os.getpid()} if not _is_our_worker(p)}
    except Exception:  # no NVML, no permission, an old driver: not knowable here
        return None
    return None


def _is_our_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"mnistbench.train.worker" in f.read()
    except OSError:
        return False


@dataclass
class Mark:
    wall: float
    own_cpu: float
    busy: float | None


def mark() -> Mark:
    return Mark(time.perf_counter(), time.process_time(), _busy_seconds(_cpus()))


class Sampler(threading.Thread):
    """Marks every SAMPLE_S while a run is timed, so a neighbour is located to within a fraction
    of an epoch. It sleeps between marks; a mark reads the per-cpu times (tens of µs)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.marks: list[Mark] = []
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(SAMPLE_S):
            self.marks.append(mark())


@dataclass
class Monitor:
    """Evidence of what else ran, per timed epoch. `start()` before and `stop()` after each
    timed epoch, both outside the timed loop; `close()` after the last."""

    device: str
    threads: int
    epochs: list = field(default_factory=list)  # dict per epoch
    _m: Mark | None = None
    _sampler: Sampler | None = None

    def start(self) -> None:
        if self._sampler is None:
            self._sampler = Sampler()
            self._sampler.start()
        self._m = mark()

    def stop(self, steps: int) -> dict:
        b, a = mark(), self._m
        wall = max(b.wall - a.wall, 1e-9)
        own = b.own_cpu - a.own_cpu
        busy = None if a.busy is None or b.busy is None else b.busy - a.busy
        inside = [m for m in list(self._sampler.marks) if a.wall < m.wall < b.wall]
        slices = []
        for m0, m1 in zip([a, *inside], [*inside, b]):
            dt = m1.wall - m0.wall
            if m0.busy is not None and m1.busy is not None and dt > 0:
                slices.append(
                    dict(
                        wall_s=dt, steps=steps * dt / wall, busy_s=m1.busy - m0.busy, own_cpu_s=m1.own_cpu - m0.own_cpu
                    )
                )
        gpu = _gpu_processes(self.device)
        e = dict(
            wall_s=wall,
            steps=steps,
            own_cpu_s=own,
            busy_s=busy,
            other_cores=_other(busy, own, wall),
            own_share=own / (wall * self.threads),
            gpu_others=sorted(gpu) if gpu is not None else None,
            slices=slices,
        )
        self.epochs.append(e)
        return e

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.done.set()
            self._sampler.join()
            self._sampler = None


def _other(busy, own, wall) -> float | None:
    """Cores used by other processes: busy time of our cpus beyond our own, per second."""
    if busy is None:
        return None
    return min(max(0.0, busy - own) / wall, float(len(_cpus())))


def _tick() -> float:
    return 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def windows(epochs: list[dict]) -> list[dict]:
    """The timed epochs' slices (between the sampler's marks; a whole epoch where it has none),
    consecutive ones merged until each window lasts MIN_WINDOW_S (a short last one joins the
    window before it): {wall_s, steps, other_cores, rounding}. Empty where nothing was measured
    or the whole run was too short to tell."""
    measured = [sl for e in epochs if e["busy_s"] is not None for sl in (e.get("slices") or [e])]
    out, cur = [], None
    for e in measured:
        cur = cur or dict(wall_s=0.0, steps=0.0, busy_s=0.0, own_cpu_s=0.0)
        for k in cur:
            cur[k] += e[k]
        if cur["wall_s"] >= MIN_WINDOW_S:
            out.append(cur)
            cur = None
    if cur is not None and out:
        for k in cur:
            out[-1][k] += cur[k]
    for w in out:
        w["other_cores"] = _other(w["busy_s"], w["own_cpu_s"], w["wall_s"])
        w["rounding"] = len(_cpus()) * _tick() / w["wall_s"]
    return out


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def other_cores_now(seconds: float = 0.5) -> float | None:
    """Cores other processes use right now, over a short window (nothing of ours runs meanwhile)."""
    a = mark()
    time.sleep(seconds)
    b = mark()
    if a.busy is None or b.busy is None:
        return None
    return max(0.0, (b.busy - a.busy) - (b.own_cpu - a.own_cpu)) / (b.wall - a.wall)


def settle(max_other: float, limit_s: float, log=print) -> float:
    """Before a retime: wait (at most limit_s) until other processes use less than max_other cores.
    Returns the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        now = other_cores_now()
        if now is None or now <= max_other:
            break
        log(f"waiting for the machine to settle: other processes use {now:.2f} cores")
    return time.perf_counter() - t0


def spread(step_times: list[float]) -> float:
    """q3 / q1 of the timed steps: 1.0 when every step took the same time."""
    from mnistbench.measure.timing import quantiles

    _, q1, q3 = quantiles(step_times)
    return q3 / q1 if q1 > 0 else math.nan


def verdict(epochs: list[dict], timed_steps: int, step_spread: float, cfg: dict) -> tuple[str, str, float]:
    """(verdict, note in words, score): score orders attempts, lower is cleaner."""
    q = cfg["quality"]
    if timed_steps < q["min_timed_steps"]:
        return (
            "few_steps",
            f"only {timed_steps} timed steps (fewer than quality.min_timed_steps = {q['min_timed_steps']}): "
            "raise train_samples or epochs",
            math.inf,
        )
    notes, score = [], 0.0
    measured = windows(epochs)
    busy = [w for w in measured if w["other_cores"] - w["rounding"] > q["max_other_cpu"]]
    total_steps = sum(w["steps"] for w in measured) or 1
    share = sum(w["steps"] for w in busy) / total_steps
    if busy and share > q["max_busy_share"]:
        used = sum(e["other_cores"] * e["wall_s"] for e in busy) / sum(e["wall_s"] for e in busy)
        notes.append(
            f"other processes used {used:.2g} of a core on this run's cpus during {share:.0%} of the timed steps "
            f"(more than quality.max_other_cpu = {q['max_other_cpu']} during more than "
            f"quality.max_busy_share = {q['max_busy_share']:.0%})"
        )
        score += used * share
    gpu = sorted({p for e in epochs for p in (e["gpu_others"] or [])})
    if gpu:
        notes.append(f"other processes ({', '.join(map(str, gpu[:5]))}) used the GPU while the run was timed")
        score += 1.0
    if step_spread > q["max_spread"]:
        notes.append(f"step times spread q3/q1 = {step_spread:.2f} (more than quality.max_spread = {q['max_spread']})")
        score += step_spread - 1.0
    if notes:
        return "noisy", "; ".join(notes), score
    if not measured:
        why = "the timed epochs were too short" if any(e["busy_s"] is not None for e in epochs) else "no /proc/stat"
        return "ok", f"other processes' cpu use not measured ({why}); step times steady", 0.0
    return "ok", "", 0.0
