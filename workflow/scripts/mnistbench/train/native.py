"""The modes whose step is a hand-written kernel: the C kernel (`kernel`, and `sparse`, which
computes layer 1 over the nonzero inputs only; kernel.py builds kernel.c) with the Python side of
its calls (Net, SparseNet, Lists), and the Triton kernels of `persistent` (persistent.py). Each
follows the contract of modes.py.
"""

import ctypes
import dataclasses
import math
import time

import torch

from mnistbench.train import kernel
from mnistbench.train.modes import Mode, Unsupported, capture


class Kernel(Mode):
    """The whole step as a hand-written C kernel (kernel.c, built by kernel.py in setup), for any
    network of the family: each layer's forward product, its backward product from the old
    weights and its in-place update through one cache-blocked matrix product (Net). The
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
        self.net = Net(self.lib, self.spec.network.sizes, self.p, self.threads)
        if self.spec.network.sizes != kernel.SHAPE:
            return
        # The seed's network: time each path on copies of the weights, keep the faster.
        fast = self._fast(self.p)
        trial_fast = self._fast({k: v.clone() for k, v in self.p.items()})
        trial_net = Net(self.lib, self.spec.network.sizes, self.p, self.threads)
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
    sparse_steps, SparseNet): the same function, exactly, for any network of the family.
    Layer 1 (784 x w1 products, forward and update) is most of the family's arithmetic, and most
    of MNIST's pixels are one background value: 0 here, where x is the pixel / 255. The kernel
    keeps W1 as A + u.1^T with A's row sum, so that a background other than 0 (a (x - mean) / std
    normalisation) costs as little; the background is the most common value of the data's first
    rows (`background`). A step's cost then scales with the nonzeros, not with 784: past the
    dense arithmetic limit.

    The mode reads the data as each row's list of nonzeros (Lists), its own form of the
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

    def lists(self, x: torch.Tensor) -> "Lists":
        """The lists of the dataset x, built on first use (timed into prepared_s)."""
        key = (x.data_ptr(), tuple(x.shape), x.dtype, x.device)
        if self._lists[0] != key:
            t0 = time.perf_counter()
            self.background = background(x)
            self._lists = (key, Lists.of(x, self.background, self.spec.network.sizes[1]))
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
            "sparse": lambda p: SparseNet(self.lib, sizes, p, self.threads, self.background),
            "dense": lambda p: Net(self.lib, sizes, p, self.threads),
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


# ---- The Python side of kernel.c's calls: the weights in its layout, the data checked --------


def _pad16(n: int) -> int:
    return (n + 15) // 16 * 16


class Net:
    """Any network of the family 784 -> w1 -> ... -> wL -> 10 (1 <= L <= 8), trained by kernel.c's
    mlp_steps: sigmoid hidden layers, softmax output, plain SGD on the mean loss, as model.grads.

    `sizes` is the whole chain, (784, w1, ..., wL, 10); `params` holds w1, b1, ..., w{L+1},
    b{L+1} in nn.Linear's layout ([out, in] and [out]), copied here into the kernel's own layout:
    each weight transposed and zero-padded, [pad(in), pad(out)], each bias [pad(out)], every size
    rounded up to a multiple of 16. params() returns views of the real part of that storage, so
    they always show the live weights without a copy.
    """

    def __init__(self, lib: ctypes.CDLL, sizes, params: dict, threads: int):
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) < 3 or len(sizes) > 10 or sizes[0] != 784 or sizes[-1] != 10 or min(sizes) < 1:
            raise ValueError(f"not a network of the family 784 -> 1..8 hidden layers -> 10: {sizes}")
        self.lib, self.sizes, self.threads = lib, sizes, max(1, int(threads))
        self.n_layers = len(sizes) - 1
        self.wt, self.b = [], []
        for layer, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            w, b = params[f"w{layer}"], params[f"b{layer}"]
            if tuple(w.shape) != (fan_out, fan_in) or tuple(b.shape) != (fan_out,):
                raise ValueError(f"layer {layer}: w {tuple(w.shape)}, b {tuple(b.shape)} for {fan_in} -> {fan_out}")
            wt = torch.zeros(_pad16(fan_in), _pad16(fan_out))
            wt[:fan_in, :fan_out] = w.detach().t()
            bp = torch.zeros(_pad16(fan_out))
            bp[:fan_out] = b.detach()
            self.wt.append(wt)
            self.b.append(bp)
        # The C side's arguments, built once: the arrays of pointers keep the tensors' addresses.
        self._sizes = (ctypes.c_int * len(sizes))(*sizes)
        self._wt = (ctypes.c_void_p * self.n_layers)(*(w.data_ptr() for w in self.wt))
        self._b = (ctypes.c_void_p * self.n_layers)(*(b.data_ptr() for b in self.b))
        self._work = torch.empty(0)

    def work_floats(self, batch: int) -> int:
        """Floats of work memory a step of `batch` rows needs."""
        return self.lib.mlp_work_floats(batch, self.n_layers, self._sizes, self.threads)

    def steps(self, x: torch.Tensor, t: torch.Tensor, n_steps: int, batch: int, lr: float, mse: bool) -> None:
        """n_steps consecutive SGD steps, step s on rows [s*batch, (s+1)*batch) of x [n_steps*batch,
        784] and the one-hot t [n_steps*batch, 10], contiguous float32 rows on the cpu."""
        self._check(x, n_steps, batch)
        _check_rows("t", t, n_steps, batch, 10)
        need = self.work_floats(batch)
        if self._work.numel() < need:
            self._work = torch.empty(need)
        if self._call(x, t, n_steps, batch, lr, mse, self._work) != 0:
            raise ValueError(f"kernel rejected the network {self.sizes}")

    def _check(self, x, n_steps: int, batch: int) -> None:
        _check_rows("x", x, n_steps, batch, 784)

    def _call(self, x, t, n_steps, batch, lr, mse, work):
        return self.lib.mlp_steps(
            x.data_ptr(),
            t.data_ptr(),
            n_steps,
            batch,
            self.n_layers,
            self._sizes,
            self._wt,
            self._b,
            lr,
            bool(mse),
            self.threads,
            work.data_ptr(),
        )

    def params(self) -> dict[str, torch.Tensor]:
        """w1, b1, ... in nn.Linear's layout: views of the live weights, not copies."""
        out = {}
        for layer, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:]), start=1):
            out[f"w{layer}"] = self.wt[layer - 1][:fan_in, :fan_out].t()
            out[f"b{layer}"] = self.b[layer - 1][:fan_out]
        return out


def _check_rows(name: str, a: torch.Tensor, n_steps: int, batch: int, width: int) -> None:
    """a holds the n_steps * batch rows of `width` a call reads: contiguous float32 on the cpu."""
    rows = n_steps * batch
    if a.dtype != torch.float32 or a.device.type != "cpu" or not a.is_contiguous():
        raise ValueError(f"{name} must be contiguous float32 on the cpu")
    if a.dim() != 2 or a.shape[1] != width or a.shape[0] < rows:
        raise ValueError(f"{name} is {tuple(a.shape)}; {n_steps} steps of {batch} need [{rows}, {width}]")


@dataclasses.dataclass(frozen=True)
class Lists:
    """Rows as the `sparse` mode reads them: each row's inputs that differ from a background value
    c, as kernel.c's sparse_steps takes them. Built once per dataset (the mode's own form of the
    data, like a preloaded copy: its cost is the mode's one-off), reordered per epoch as every
    mode's rows are (take), sliced per call (rows): slices share idx and val, off stays absolute."""

    off: torch.Tensor  # int64 [rows + 1]: row r's entries are off[r] .. off[r + 1] of idx and val
    idx: torch.Tensor  # int32: the entry's row of layer 1's weights, pixel x the padded width
    val: torch.Tensor  # float32: x - c at that pixel
    sum: torch.Tensor  # float32 [rows]: the sum of the row's val

    @classmethod
    def of(cls, x: torch.Tensor, c: float, width: int) -> "Lists":
        """The lists of x [rows, 784] (float32 on the cpu) for layer 1 `width` wide. A NaN differs
        from every value, so it is kept: a NaN input reaches the loss as it does in every mode."""
        keep = x != c
        row, pixel = keep.nonzero(as_tuple=True)
        off = torch.zeros(x.shape[0] + 1, dtype=torch.int64)
        torch.cumsum(keep.sum(1), 0, out=off[1:])
        val = (x[row, pixel] - c).float()
        total = torch.zeros(x.shape[0]).index_add_(0, row, val)
        return cls(off, (pixel * _pad16(width)).int(), val, total)

    def __len__(self) -> int:
        return self.sum.shape[0]

    def take(self, order: torch.Tensor) -> "Lists":
        """The rows in `order` (a permutation, or any index of rows), as one contiguous copy."""
        counts = (self.off[1:] - self.off[:-1])[order]
        off = torch.zeros(len(counts) + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=off[1:])
        src = torch.repeat_interleave(self.off[:-1][order] - off[:-1], counts) + torch.arange(int(off[-1]))
        return Lists(off, self.idx[src], self.val[src], self.sum[order].contiguous())

    def rows(self, i: int, j: int) -> "Lists":
        """Rows [i, j): views."""
        return Lists(self.off[i : j + 1], self.idx, self.val, self.sum[i:j])


class SparseNet(Net):
    """Net trained by kernel.c's sparse_steps (the `sparse` mode) on Lists: the same function,
    layer 1 computed over each sample's inputs that differ from a background value c only. Layer
    1's weights are held as W1^T[k] = A[k] + u (kernel.c explains why that is exact for any c): A
    in wt[0], u a row of its own, S = sum_k A[k] a row the kernel recomputes at every call."""

    def __init__(self, lib: ctypes.CDLL, sizes, params: dict, threads: int, c: float = 0.0):
        super().__init__(lib, sizes, params, threads)
        self.c = float(c)
        self.u = torch.zeros(_pad16(self.sizes[1]))  # W1^T = A + u: all of W1 in A to start with
        self.s = torch.zeros(_pad16(self.sizes[1]))

    # steps(lists, t, ...): Net.steps on the rows' Lists (made with this net's c and width), not x.
    def _check(self, lists: Lists, n_steps: int, batch: int) -> None:
        if len(lists) < n_steps * batch:
            raise ValueError(f"{n_steps} steps of {batch} need {n_steps * batch} rows of lists, not {len(lists)}")

    def _call(self, lists, t, n_steps, batch, lr, mse, work):
        ptrs = [a.data_ptr() for a in (lists.off, lists.idx, lists.val, lists.sum, t)]
        args = [n_steps, batch, self.n_layers, self._sizes, self._wt, self._b, self.u.data_ptr(), self.s.data_ptr()]
        return self.lib.sparse_steps(*ptrs, *args, self.c, lr, bool(mse), self.threads, work.data_ptr())

    def params(self) -> dict[str, torch.Tensor]:
        """As Net.params, w1 computed as A + u (a copy; the others are views)."""
        out = super().params()
        fan_in, fan_out = self.sizes[0], self.sizes[1]
        out["w1"] = (self.wt[0][:fan_in, :fan_out] + self.u[:fan_out]).t()
        return out
