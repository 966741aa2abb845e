"""The modes whose step is a hand-written kernel: the C kernel (`kernel`, and `sparse`, which
computes layer 1 over the nonzero inputs only; kernel.py builds kernel.c) and the Triton kernels
of `persistent` (persistent.py). Each follows the contract of modes.py.
"""

import math
import time

import torch

from mnistbench.train import kernel
from mnistbench.train.modes import Mode, Unsupported, capture


class Kernel(Mode):
    """The whole step as a hand-written C kernel (kernel.c, built by kernel.py in setup), for any
    network of the family: each layer's forward product, its backward product from the old
    weights and its in-place update through one cache-blocked matrix product (kernel.Net). The
    seed's network also has a path of its own, written for its shape (each block of samples goes
    through forward, backward and both W1 products while it is in cache): setup times both on
    copies of the weights and keeps the faster, since which one wins depends on the cpu (the shape's
    path was tuned on AVX-512; on an AVX2 cpu the generic path measured 4-8x faster:
    bench/kernel_paths.py). Threads: torch's count, none started for small work.

    At small batch sizes one call runs ROWS_PER_CALL // batch consecutive steps, in order, with no
    Python between them (a call from Python costs more than a batch-1 step's arithmetic); at batch
    1 the kernel streams W1 once per sample, updating it for one sample while it computes the next
    sample's first layer with the updated weights."""

    # A call from Python with its item (slicing the rows, the checks, ctypes) costs ~14 us: at 256
    # rows per call 0.055 us per sample, a tenth of sparse's batch-1 step; at 1024, a fortieth.
    ROWS_PER_CALL = 1024
    TRIALS = 5  # calls of each path timed in setup (the best of them counts)
    ARCH = "native"  # the vector code kernel.c is built for (kernel.ARCHES): this cpu's own

    def __init__(self, *args):
        super().__init__(*args)
        self.steps_per_call = max(1, self.ROWS_PER_CALL // self.batch_size)
        self.mse = self.loss != "cross_entropy"
        self.path = "generic"

    def _load(self, batch, name: str) -> int:
        """kernel.c built (Unsupported naming the mode where it cannot be) and the batch checked;
        the steps of one call."""
        try:
            self.lib = kernel.load(self.ARCH)
        except kernel.BuildError as e:
            raise Unsupported(f"{name}: {e}") from e
        x, _, t = batch
        if not (x.dtype == t.dtype == torch.float32 and x.is_contiguous() and t.is_contiguous()):
            raise ValueError(f"{name} needs contiguous float32 rows of x and t, as Mode.epoch gives")
        self.threads = torch.get_num_threads()
        return x.shape[0] // self.batch_size

    def _fastest(self, runs: dict, n: int) -> str:
        """Times each path's run (n steps on copies of the weights) TRIALS times, in turn; keeps
        the best time of each in `choice` and returns the fastest path's name."""
        best = dict.fromkeys(runs, math.inf)
        for _ in range(self.TRIALS if len(runs) > 1 else 0):
            for name, run in runs.items():
                t0 = time.perf_counter()
                run()
                best[name] = min(best[name], (time.perf_counter() - t0) / n)
        self.choice = ", ".join(f"{name} path {best[name] * 1e6:.2f} us/step" for name in runs)
        return min(best, key=best.get)

    def setup(self, batch):
        n = self._load(batch, "kernel")
        x, _, t = batch
        self.net = kernel.Net(self.lib, self.spec.network.sizes, self.p, self.threads)
        if self.spec.network.sizes != kernel.SHAPE:
            return
        # The seed's network: time each path on copies of the weights, keep the faster.
        fast = self._fast(self.p)
        trial_fast = self._fast({k: v.clone() for k, v in self.p.items()})
        trial_net = kernel.Net(self.lib, self.spec.network.sizes, self.p, self.threads)
        self.path = self._fastest(
            {
                "fast": lambda: self._fast_steps(trial_fast, x, t, n),
                "generic": lambda: trial_net.steps(x, t, n, self.batch_size, self.lr, self.mse),
            },
            n,
        )
        if self.path == "fast":
            self.fast = fast
            del self.net

    def _fast(self, p: dict) -> dict:
        """The seed's network as the fast path reads it: every parameter contiguous, W1 transposed
        ([784, 16], the kernel's layout; params() sees it as a [16, 784] view), and its call's
        arguments."""
        p = {k: v.contiguous() for k, v in p.items()}
        w1t = p["w1"].t().contiguous()
        p["w1"] = w1t.t()
        work = torch.empty(self.lib.work_floats(self.threads))
        ptrs = [w1t.data_ptr()] + [p[k].data_ptr() for k in ("b1", "w2", "b2", "w3", "b3")]
        return dict(params=p, w1t=w1t, work=work, args=ptrs + [self.lr, self.mse, self.threads, work.data_ptr()])

    def _fast_steps(self, fast: dict, x, t, n: int) -> None:
        self.lib.sgd_steps(x.data_ptr(), t.data_ptr(), n, self.batch_size, *fast["args"])

    def step(self, batch):
        x, _, t = batch  # rows of a contiguous float32 tensor (Mode.epoch): whole batches, in order
        n = x.shape[0] // self.batch_size
        if self.path == "fast":
            self._fast_steps(self.fast, x, t, n)
        else:
            self.net.steps(x, t, n, self.batch_size, self.lr, self.mse)
        return n

    def params(self):
        if self.path == "fast":
            return self.fast["params"]
        return self.net.params() if hasattr(self, "net") else self.p  # before setup: the initial weights


BACKGROUND_ROWS = 256  # rows the background value is taken from


def background(x: torch.Tensor) -> float:
    """The inputs' background value, the one `sparse` skips: the most common value of the first
    BACKGROUND_ROWS rows (0 for this pipeline's pixel / 255; -mean / std after a normalisation)."""
    head = x[:BACKGROUND_ROWS].reshape(-1)
    return float(torch.mode(head).values) if head.numel() else 0.0


def nonzero_share(x: torch.Tensor) -> float:
    """The share of the inputs that differ from their background value: what `sparse` computes."""
    return float((x != background(x)).float().mean()) if x.numel() else math.nan


class Sparse(Kernel):
    """The kernel's generic path with layer 1 over each sample's nonzero inputs only (kernel.c's
    sparse_steps, kernel.SparseNet): the same function, exactly, for any network of the family.
    Layer 1 (784 x w1 products, forward and update) is most of the family's arithmetic, and most
    of MNIST's pixels are one background value: 0 here, where x is the pixel / 255. The kernel
    keeps W1 as A + u.1^T with A's row sum, so that a background other than 0 (a (x - mean) / std
    normalisation) costs as little; the background is the most common value of the data's first
    rows (`background`). A step's cost then scales with the nonzeros, not with 784: past the
    dense arithmetic limit.

    The mode reads the data as each row's list of nonzeros (kernel.Lists), its own form of the
    data: built once per dataset, the first time an epoch is asked for, its seconds counted in the
    mode's one-off cost (prepared_s, part of setup_s); each epoch then reorders the lists with the
    rows, before the clock, as every mode's epoch does. Where skipping does not pay (dense inputs;
    at large batches the dense path's blocked products can match it), setup times both paths on
    copies of the weights, as `kernel` does, and keeps the faster ("dense": the kernel's generic
    path on the rows themselves)."""

    PATHS = ("sparse", "dense")  # the paths setup times (tests hold it to one)

    def __init__(self, *args):
        super().__init__(*args)
        self._lists = (None, None)  # (the dataset's key, its lists)

    def lists(self, x: torch.Tensor) -> kernel.Lists:
        """The lists of the dataset x, built on first use (timed into prepared_s)."""
        key = (x.data_ptr(), tuple(x.shape), x.dtype, x.device)
        if self._lists[0] != key:
            t0 = time.perf_counter()
            self.background = background(x)
            self._lists = (key, kernel.Lists.of(x, self.background, self.spec.network.sizes[1]))
            self.prepared_s += time.perf_counter() - t0
        return self._lists[1]

    def epoch(self, data, perm):
        """Mode.epoch's items, each with its rows' lists last."""
        lists = self.lists(data["x"]).take(perm)
        c = self.batch_size * self.steps_per_call
        return (
            item + (lists.rows(i, i + item[0].shape[0]),)
            for i, item in zip(range(0, len(perm), c), super().epoch(data, perm))
        )

    def setup(self, batch):
        x, _, t, lists = batch
        n = self._load(batch[:3], "sparse")
        sizes = self.spec.network.sizes
        paths = {
            "sparse": lambda p: kernel.SparseNet(self.lib, sizes, p, self.threads, self.background),
            "dense": lambda p: kernel.Net(self.lib, sizes, p, self.threads),
        }
        paths = {name: paths[name] for name in self.PATHS}
        data = {"sparse": lists, "dense": x}
        trials = {name: make({k: v.clone() for k, v in self.p.items()}) for name, make in paths.items()}
        self.path = self._fastest(
            {
                name: (lambda net=net, d=data[name]: net.steps(d, t, n, self.batch_size, self.lr, self.mse))
                for name, net in trials.items()
            },
            n,
        )
        self.net = paths[self.path](self.p)

    def step(self, batch):
        x, _, t, lists = batch
        n = x.shape[0] // self.batch_size
        self.net.steps(lists if self.path == "sparse" else x, t, n, self.batch_size, self.lr, self.mse)
        return n


class Persistent(Mode):
    """Triton kernels without per-step launch cost (persistent.py). At small batch sizes one
    launch of one program runs STEPS_PER_CALL consecutive steps of the epoch with the weights in
    registers; at large ones the fused step (each batch read once, the gradients of all blocks
    summed on the GPU) is replayed as one CUDA graph. Up to LARGEST_LOOPED rows per step, setup
    times both on copies of the weights and keeps the faster."""

    STEPS_PER_CALL = 256
    LARGEST_LOOPED = 32  # the looped kernel takes a step's rows one after another
    TRIAL_STEPS = 64  # steps of each path timed in setup to choose between them

    def __init__(self, *args):
        super().__init__(*args)
        from mnistbench.train import persistent

        self.pk = persistent
        self.p = persistent.params(self.p)
        self.mse = self.loss != "cross_entropy"
        self.looped = self.batch_size <= self.LARGEST_LOOPED
        self.steps_per_call = self.STEPS_PER_CALL if self.looped else 1

    def setup(self, batch):
        x, _, t = batch
        b = self.batch_size
        try:
            self._capture(x[:b], t[:b])
            if self.looped:
                looped, fused = self._time_looped(x, t), self._time_fused()
                self.looped = looped <= fused
                self.choice = f"looped {looped * 1e6:.2f} us/step, fused graph {fused * 1e6:.2f} us/step"
                self.steps_per_call = self.STEPS_PER_CALL if self.looped else 1
        except Exception as e:  # a Triton compile or launch failure: this mode cannot run here
            raise Unsupported(f"persistent: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from e

    def _capture(self, x, t):
        """The fused step captured as a CUDA graph on the real weights (the graph holds their
        addresses); the warm-up compiles it outside the capture."""
        self.sx, self.st, self.buf = x.clone(), t.clone(), self.pk.grad_buffer(self.device)
        self.graph = capture(lambda: self.pk.fused_step(self.p, self.sx, self.st, self.lr, self.mse, self.buf), self.p)

    def _time(self, run, n) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        run()  # compiles on first use
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / n

    def _time_looped(self, x, t) -> float:
        copy = self.pk.params(self.p)  # so that timing does not train
        n = min(self.TRIAL_STEPS, x.shape[0] // self.batch_size)
        rows = n * self.batch_size
        return self._time(lambda: self.pk.steps(copy, x[:rows], t[:rows], self.batch_size, self.lr, self.mse), n)

    def _time_fused(self) -> float:
        saved = {k: v.clone() for k, v in self.p.items()}

        def replay():
            for _ in range(self.TRIAL_STEPS):
                self.graph.replay()

        seconds = self._time(replay, self.TRIAL_STEPS)
        for k, v in self.p.items():
            v.copy_(saved[k])
        return seconds

    def step(self, batch):
        x, _, t = batch
        if self.looped:
            return self.pk.steps(self.p, x, t, self.batch_size, self.lr, self.mse)
        b = self.batch_size
        if x.shape[0] == b:
            self.sx.copy_(x)
            self.st.copy_(t)
            self.graph.replay()
            return None
        # An item made before setup chose the graph holds the looped path's call of many batches:
        # one replay per batch, in order, so every step is still one batch's update.
        for i in range(0, x.shape[0], b):
            self.sx.copy_(x[i : i + b])
            self.st.copy_(t[i : i + b])
            self.graph.replay()
        return x.shape[0] // b
