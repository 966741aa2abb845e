/* The `kernel` mode: one SGD step of the 784-16-16-10 sigmoid MLP in one pass over the batch.

Why a hand-written kernel: at large batch on the cpu the step is bound by reading the batch from
memory. Library GEMMs read it twice (x.W1^T forward, d1^T.x for W1's gradient) and pack it on
the way; this kernel takes R rows at a time through forward, backward and both W1 products
while they are in cache, so every sample is read from memory once. bench/README.md has the
measurements that led here. Built by kernel.py with the machine's C compiler; plain C with GCC /
Clang vector extensions, so it compiles for any cpu (the speed was tuned on AVX-512).

Same function as model.grads + SGD: true gradient of the mean loss over the batch, every
gradient computed before any weight changes. sgd_step takes one step; sgd_steps takes many
consecutive ones in one call, with a path of its own at batch 1 (see there). Float32
throughout; exp is a polynomial within ~1 ulp (tests/test_modes.py and tests/test_kernel.py hold
the result to float64 autograd).

Those are the seed shape's fast path. mlp_steps, the last section, is the general one: the same
function for any network of the family 784 -> w1 -> ... -> wL -> 10 (1 <= L <= 8).
*/
#include <string.h>
#include <time.h>

enum { D0 = 784, D1 = 16, D2 = 16, D3 = 10, L = 16 }; /* L: lanes of one vector = one 16-wide row */
enum { R = 16 };         /* rows per block: 50 KB of x, in cache between its two uses */
enum { MIN_ROWS = 256 }; /* fewer rows per thread than this cost more to start than they save */
enum { MAXT = 256 };

/* A thread's gradient sums, in 16-float rows: W1^T [784][16], b1, W2 [16][16], b2, W3 [10][16],
   b3 (10 used). W1 is kept transposed so its 16 outputs are one vector. */
enum { G_W1 = 0, G_B1 = D0 * L, G_W2 = G_B1 + L, G_B2 = G_W2 + D2 * L, G_W3 = G_B2 + L,
       G_B3 = G_W3 + D3 * L, G_N = G_B3 + L };
/* The step's transposed copies of the small weights (W3^T zero-padded to 16 columns). */
enum { P_W2T = 0, P_W3T = P_W2T + D1 * L, P_N = P_W3T + D2 * L };

/* ---- Denormal numbers are flushed -------------------------------------------------------------

Per-sample SGD at a high learning rate saturates the sigmoids and the softmax: their derivatives,
the products with them and the updates fall below float32's smallest normal number (1.2e-38).
Some cpus (Intel's among them) take a microcode assist of the order of 100 cycles for each
operation on such a denormal operand or result; others compute them at full speed. So that a
mode's speed does not depend on which, every call into this file computes with denormals flushed
to zero: flush-to-zero (a denormal result becomes 0) and denormals-are-zero (a denormal operand
reads as 0), as TensorFlow does by default and torch.set_flush_denormal(True) does for torch. The
control register is per thread: the state is set on entry in the calling thread and in each
thread of every team (SPLIT), and each thread's own flush bits are restored when it leaves, so
torch's pool, which these teams are, computes after a call as before it. Status flags raised
during the call stay raised, as any computation leaves them. Only values below 1.2e-38 change.

x86: MXCSR's FTZ (bit 15) and DAZ (bit 6). aarch64: FPCR.FZ (bit 24), which flushes denormal
operands and results alike. Elsewhere nothing is set: fp_flushes() says 0 and kernel.py says so.
`flush_denormals` = 0 computes with denormals (the caller's flush bits cleared for the call, then
restored): what the tests and the benches compare with. */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
typedef unsigned fp_t;
enum { FP_FLUSH = 0x8040, FP_FTZ = 0x8000, FP_DAZ = 0x0040, FP_DENORMAL = 0x0002, FP_UNDERFLOW = 0x0010 };
static inline fp_t fp_control(void) { return _mm_getcsr(); }
static inline void fp_set_control(fp_t v) { _mm_setcsr(v); }
static inline fp_t fp_status_bits(void) { return _mm_getcsr(); }
static inline void fp_clear_status(void) { _mm_setcsr(_mm_getcsr() & ~0x3Fu); }
#elif defined(__aarch64__)
typedef unsigned long fp_t;
enum { FP_FLUSH = 1 << 24, FP_FTZ = 1 << 24, FP_DAZ = 1 << 24, FP_DENORMAL = 1 << 7, FP_UNDERFLOW = 1 << 3 };
static inline fp_t fp_control(void) { fp_t v; __asm__ volatile("mrs %0, fpcr" : "=r"(v)); return v; }
static inline void fp_set_control(fp_t v) { __asm__ volatile("msr fpcr, %0" : : "r"(v)); }
static inline fp_t fp_status_bits(void) { fp_t v; __asm__ volatile("mrs %0, fpsr" : "=r"(v)); return v; }
static inline void fp_clear_status(void) { __asm__ volatile("msr fpsr, %0" : : "r"(fp_status_bits() & ~0x9Ful)); }
#else
typedef unsigned fp_t;
enum { FP_FLUSH = 0, FP_FTZ = 0, FP_DAZ = 0, FP_DENORMAL = 0, FP_UNDERFLOW = 0 };
static inline fp_t fp_control(void) { return 0; }
static inline void fp_set_control(fp_t v) { (void)v; }
static inline fp_t fp_status_bits(void) { return 0; }
static inline void fp_clear_status(void) {}
#endif

int flush_denormals = 1;

/* This thread computes as the call must (flush bits set, or cleared with flush_denormals = 0);
   returns its state before, for fp_leave. */
static inline fp_t fp_enter(void) {
    fp_t was = fp_control(), want = flush_denormals ? was | FP_FLUSH : was & ~(fp_t)FP_FLUSH;
    if (want != was) fp_set_control(want);
    return was;
}

/* This thread's flush bits back to `was`; everything else (x86: the status flags in the same
   register) as the call left it. */
static inline void fp_leave(fp_t was) {
    fp_t now = fp_control(), back = (now & ~(fp_t)FP_FLUSH) | (was & FP_FLUSH);
    if (back != now) fp_set_control(back);
}

/* The calling thread's flush state: 1 flush-to-zero, 2 denormals-are-zero (3: both). */
int fp_mode(void) {
    fp_t c = fp_control();
    return (FP_FTZ && (c & FP_FTZ) ? 1 : 0) | (FP_DAZ && (c & FP_DAZ) ? 2 : 0);
}

/* Whether this build can flush at all (x86 and aarch64). */
int fp_flushes(void) { return FP_FLUSH != 0; }

/* The calling thread's status flags raised since they were last cleared: 1 a denormal operand,
   2 an underflow (a tiny result); cleared after reading if `clear`. */
int fp_status(int clear) {
    fp_t s = fp_status_bits();
    if (clear) fp_clear_status();
    return (FP_DENORMAL && (s & FP_DENORMAL) ? 1 : 0) | (FP_UNDERFLOW && (s & FP_UNDERFLOW) ? 2 : 0);
}

/* While fp_watch is set, every place that computes notes the flush state it computes under:
   fp_seen keeps the bits set in all of them (AND), fp_noted counts them. For the tests. */
int fp_watch = 0, fp_seen = 3, fp_noted = 0;
static inline void fp_note(void) {
    if (__builtin_expect(fp_watch, 0)) {
        __atomic_fetch_and(&fp_seen, fp_mode(), __ATOMIC_RELAXED);
        __atomic_fetch_add(&fp_noted, 1, __ATOMIC_RELAXED);
    }
}

/* The flush states of the other threads of a team of `threads` of OpenMP's pool, as they are
   between calls (OR of their fp_mode; 0 without OpenMP): torch's pool must leave a call as it
   entered it. */
#ifdef _OPENMP
#include <omp.h>
#endif
int fp_team_mode(int threads) {
    int any = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(| : any)
    if (omp_get_thread_num() != 0) any |= fp_mode();
#else
    (void)threads;
#endif
    return any;
}

/* Runs `body` for i in [0, n) on nt threads, or in the caller alone when nt is 1: a parallel
   region costs its start even for a team of one (library calls, at times a system call), and
   at batch 1 that is per layer and step. Each thread of a team computes flushed (fp_enter) and
   leaves its state as it found it. */
#define SPLIT(nt, i, n, ...)                                         \
    do {                                                             \
        const int split_nt = (nt);                                   \
        if (split_nt > 1) {                                          \
            _Pragma("omp parallel num_threads(split_nt)") {          \
                const fp_t fp_was = fp_enter();                      \
                _Pragma("omp for schedule(static)")                  \
                for (int i = 0; i < (n); i++) {                      \
                    fp_note();                                       \
                    __VA_ARGS__;                                     \
                }                                                    \
                fp_leave(fp_was);                                    \
            }                                                        \
        } else {                                                     \
            for (int i = 0; i < (n); i++) {                          \
                fp_note();                                           \
                __VA_ARGS__;                                         \
            }                                                        \
        }                                                            \
    } while (0)

/* A dependent chain of `iters` multiply-adds x = x m + c at its fixed point 2c, computed with
   denormals (whatever the caller's state), ns per operation: with c = 1e-30 every operand and
   result is normal, with c = 1e-40 denormal. Their ratio is what a denormal costs this cpu. */
static volatile float fp_sink;
double fp_chain_ns(long iters, float c) {
    const fp_t was = fp_control();
    fp_set_control(was & ~(fp_t)FP_FLUSH);
    volatile float vm = 0.5f, vc = c; /* read once: the compiler must not fold the chain */
    float m = vm, k = vc, x = 2 * k;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iters; i++) x = x * m + k;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fp_sink = x;
    fp_leave(was);
    double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    return iters > 0 ? s * 1e9 / iters : 0.0;
}

/* aligned(4): torch tensors and row slices need not start on a 64-byte boundary */
typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef int i16 __attribute__((vector_size(64), aligned(4)));

/* a where c is true (all bits set), else b */
static inline v16 vsel(i16 c, v16 a, v16 b) { return (v16)((c & (i16)a) | (~c & (i16)b)); }

static inline v16 vexp(v16 x) {
    /* exp(x) = 2^n exp(r) with n = round(x log2 e), |r| <= ln2/2; Taylor to r^7 is within 1 ulp.
       Clamped with vector selects (a per-lane loop compiles to scalar code); NaN stays NaN. */
    const v16 lo = (v16){0} - 87.0f, hi = (v16){0} + 88.0f;
    x = vsel(x < lo, lo, x);
    x = vsel(x > hi, hi, x);
    v16 big = x * 1.44269504088896341f + 12582912.0f; /* + 1.5 * 2^23 rounds to an integer */
    v16 n = big - 12582912.0f;
    i16 e = ((i16)big - 0x4B400000 + 127) << 23; /* 2^n, built in the exponent bits */
    v16 r = x - n * 0.693145751953125f - n * 1.428606765330187e-6f; /* ln2 in two parts */
    v16 p = r * (1.0f / 5040) + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * (v16)e;
}

static inline v16 vsig(v16 z) { return 1.0f / (1.0f + vexp(-z)); }

typedef struct {
    const float *x, *t, *w1t, *b1, *w2, *b2, *w3, *b3, *p;
    float *g;
    int n, mse;
    float scale; /* 1 / batch size: the loss is the mean over the whole batch */
} part_t;

/* Forward, backward and gradient sums of rn <= R rows x [rn][784], t [rn][10]. */
static inline __attribute__((always_inline)) void block(const part_t *q, const float *x, const float *t, int rn) {
    const v16 *w1t = (const v16 *)q->w1t, *w2t = (const v16 *)(q->p + P_W2T);
    const v16 *w3t = (const v16 *)(q->p + P_W3T), *w2 = (const v16 *)q->w2, *w3 = (const v16 *)q->w3;
    v16 *g = (v16 *)q->g;
    v16 b3 = {0}, mask = {0}, h[R], z[R], d1[R];
    for (int i = 0; i < D3; i++) b3[i] = q->b3[i], mask[i] = 1.0f;

    /* layer 1, R rows at once: R independent accumulators, x read as broadcasts. The next
       block is fetched meanwhile (prefetches never fault, so no bound check at the end). */
    for (int r = 0; r < rn; r++) h[r] = *(const v16 *)q->b1;
    for (int k = 0; k < D0; k++) {
        if (k % 16 == 0)
            for (int r = 0; r < rn; r++) __builtin_prefetch(x + (R + r) * D0 + k, 0, 2);
        for (int r = 0; r < rn; r++) h[r] += x[r * D0 + k] * w1t[k];
    }

    /* The small layers stage by stage across the block's rows (R independent chains, not one
       long chain per row); lanes are read back from memory as broadcasts, not extracted. */
    float a1[R][L], a2[R][L], d3[R][L], d2[R][L];
    for (int r = 0; r < rn; r++) *(v16 *)a1[r] = vsig(h[r]), z[r] = *(const v16 *)q->b2;
    for (int j = 0; j < D1; j++)
        for (int r = 0; r < rn; r++) z[r] += a1[r][j] * w2t[j];
    for (int r = 0; r < rn; r++) *(v16 *)a2[r] = vsig(z[r]), z[r] = b3;
    for (int j = 0; j < D2; j++)
        for (int r = 0; r < rn; r++) z[r] += a2[r][j] * w3t[j];
    for (int r = 0; r < rn; r++) { /* softmax over the 10 used lanes, then dL/dz3 */
        float m = z[r][0], sum = 0.0f;
        for (int i = 1; i < D3; i++) m = z[r][i] > m ? z[r][i] : m;
        v16 s = vexp(z[r] - m) * mask, tv = {0};
        for (int i = 0; i < D3; i++) sum += s[i], tv[i] = t[r * D3 + i];
        s /= sum;
        if (q->mse) { /* squared error of softmax: the full Jacobian, as model.grads */
            v16 gi = (2.0f * q->scale) * (s - tv), u = gi * s;
            float gs = 0.0f;
            for (int i = 0; i < D3; i++) gs += u[i];
            *(v16 *)d3[r] = s * (gi - gs);
        } else {
            *(v16 *)d3[r] = (s - tv) * q->scale;
        }
        z[r] = (v16){0};
    }
    for (int i = 0; i < D3; i++)
        for (int r = 0; r < rn; r++) z[r] += d3[r][i] * w3[i];
    for (int r = 0; r < rn; r++) {
        v16 a = *(v16 *)a2[r];
        *(v16 *)d2[r] = z[r] * a * (1.0f - a), z[r] = (v16){0};
    }
    for (int i = 0; i < D2; i++)
        for (int r = 0; r < rn; r++) z[r] += d2[r][i] * w2[i];
    for (int r = 0; r < rn; r++) {
        v16 a = *(v16 *)a1[r];
        d1[r] = z[r] * a * (1.0f - a);
    }

    /* gradient sums of the small layers: one accumulator per output row */
    v16 acc[L];
    for (int i = 0; i < D3; i++) acc[i] = g[G_W3 / L + i];
    for (int r = 0; r < rn; r++)
        for (int i = 0; i < D3; i++) acc[i] += d3[r][i] * *(v16 *)a2[r];
    for (int i = 0; i < D3; i++) g[G_W3 / L + i] = acc[i];
    for (int i = 0; i < D2; i++) acc[i] = g[G_W2 / L + i];
    for (int r = 0; r < rn; r++)
        for (int i = 0; i < D2; i++) acc[i] += d2[r][i] * *(v16 *)a1[r];
    for (int i = 0; i < D2; i++) g[G_W2 / L + i] = acc[i];
    for (int r = 0; r < rn; r++) {
        g[G_B3 / L] += *(v16 *)d3[r];
        g[G_B2 / L] += *(v16 *)d2[r];
        g[G_B1 / L] += d1[r];
    }

    /* W1's gradient while this block of x is still in cache: gW1^T[k] += sum_r x[r][k] d1[r].
       8 columns at a time, so 8 independent FMA chains instead of one waiting on itself. */
    enum { KU = 8 };
    for (int k = 0; k < D0; k += KU) {
        for (int u = 0; u < KU; u++) acc[u] = g[k + u];
        for (int r = 0; r < rn; r++)
            for (int u = 0; u < KU; u++) acc[u] += x[r * D0 + k + u] * d1[r];
        for (int u = 0; u < KU; u++) g[k + u] = acc[u];
    }
}

static void run_part(const part_t *q) {
    memset(q->g, 0, G_N * sizeof(float));
    int r = 0;
    for (; r + R <= q->n; r += R) block(q, q->x + (long)r * D0, q->t + (long)r * D3, R);
    if (r < q->n) block(q, q->x + (long)r * D0, q->t + (long)r * D3, q->n - r);
}

/* Floats of work memory sgd_step needs for `threads` threads. */
long work_floats(int threads) { return (long)(threads < 1 ? 1 : threads > MAXT ? MAXT : threads) * G_N + P_N; }

/* One SGD step. x [n][784] and t [n][10] (one-hot) contiguous; w1t [784][16] (W1 transposed),
   b1 [16], w2 [16][16], b2 [16], w3 [10][16], b3 [10] (nn.Linear's layout), updated in place; loss:
   mse (squared error of softmax) or cross-entropy. The rows are split among up to `threads`
   threads, each summing its own gradient, added up at the end. The threads are OpenMP's: built
   with -fopenmp inside a torch process, this library binds to the libgomp torch already loaded
   (same soname), so it runs on torch's own thread pool; threads of a second pool would compete
   with torch's for the cores (they spin after every parallel torch op). Built without OpenMP,
   the parts run one after another in the calling thread. */
static void one_step(const float *x, const float *t, int n, float *w1t, float *b1, float *w2, float *b2,
                     float *w3, float *b3, float lr, int mse, int threads, float *work) {
    int most = (n + MIN_ROWS - 1) / MIN_ROWS;
    threads = threads > most ? most : threads;
    threads = threads < 1 ? 1 : threads > MAXT ? MAXT : threads;
    float *p = work + (long)threads * G_N;
    memset(p, 0, P_N * sizeof(float));
    for (int i = 0; i < D2; i++)
        for (int j = 0; j < D1; j++) p[P_W2T + j * L + i] = w2[i * D1 + j];
    for (int i = 0; i < D3; i++)
        for (int j = 0; j < D2; j++) p[P_W3T + j * L + i] = w3[i * D2 + j];

    part_t parts[MAXT];
    int per = ((n + threads - 1) / threads + R - 1) / R * R; /* whole blocks per thread */
    for (int i = 0; i < threads; i++) {
        int r0 = i * per < n ? i * per : n, r1 = r0 + per < n ? r0 + per : n;
        parts[i] = (part_t){x + (long)r0 * D0, t + (long)r0 * D3, w1t, b1, w2, b2, w3, b3, p,
                            work + (long)i * G_N, r1 - r0, mse, 1.0f / n};
    }
    SPLIT(threads, i, threads, run_part(&parts[i]));
    for (int i = 1; i < threads; i++)
        for (int k = 0; k < G_N; k++) work[k] += work[(long)i * G_N + k];

    const float *g = work;
    for (int k = 0; k < D0 * L; k++) w1t[k] -= lr * g[G_W1 + k];
    for (int j = 0; j < D1; j++) b1[j] -= lr * g[G_B1 + j];
    for (int i = 0; i < D2; i++) {
        b2[i] -= lr * g[G_B2 + i];
        for (int j = 0; j < D1; j++) w2[i * D1 + j] -= lr * g[G_W2 + i * L + j];
    }
    for (int i = 0; i < D3; i++) {
        b3[i] -= lr * g[G_B3 + i];
        for (int j = 0; j < D2; j++) w3[i * D2 + j] -= lr * g[G_W3 + i * L + j];
    }
}

void sgd_step(const float *x, const float *t, int n, float *w1t, float *b1, float *w2, float *b2,
              float *w3, float *b3, float lr, int mse, int threads, float *work) {
    const fp_t was = fp_enter();
    one_step(x, t, n, w1t, b1, w2, b2, w3, b3, lr, mse, threads, work);
    fp_leave(was);
}

/* ---- Many consecutive SGD steps per call ------------------------------------------------------

sgd_steps below runs a whole run of steps without returning to Python. At batch 1 a step is
~50 kFLOP, well under a microsecond of arithmetic, so the per-step costs of sgd_step (the
gradient buffer's memset, the transposes, a separate update pass over W1, the Python call)
would dominate; the batch-1 path has none of them. */

/* Horizontal sum and max, the result in every lane: log2(16) steps of swapping lanes s apart.
   GCC's shuffle builtin and Clang's differ (GCC has Clang's only from version 12 on). */
#if defined(__clang__)
#define SHUF(v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)
#else
#define SHUF(v, ...) __builtin_shuffle(v, (i16){__VA_ARGS__})
#endif
#define SWAP8(v) SHUF(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)
#define SWAP4(v) SHUF(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)
#define SWAP2(v) SHUF(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)
#define SWAP1(v) SHUF(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
static inline v16 vmax(v16 a, v16 b) { return vsel(a > b, a, b); }
static inline v16 hsum(v16 v) {
    v += SWAP8(v), v += SWAP4(v), v += SWAP2(v);
    return v + SWAP1(v);
}
static inline v16 hmax(v16 v) {
    v = vmax(v, SWAP8(v)), v = vmax(v, SWAP4(v)), v = vmax(v, SWAP2(v));
    return vmax(v, SWAP1(v));
}

/* The small layers, held for the whole run in both layouts: the forward pass wants W^T (one
   vector per input, scaled by a broadcast activation), the backward pass W (one vector per
   output, scaled by a broadcast delta). Both copies get the same update, w - lr * (d_i a_j),
   the product computed once per element in either layout, so they stay bit-identical. */
typedef struct {
    v16 w2[D2], w2t[D1], w3[D3], w3t[D2], b1, b2, b3; /* w3t, b3: lanes 10..15 zero */
} small_t;

/* One sample from layer 1's pre-activation h on: the small layers, softmax, the backward pass,
   and the SGD update of everything but W1. Returns d1 = dL/dh, for W1's update. A vector's
   lanes are broadcast from memory (a1[j] below), as in block(). */
static inline __attribute__((always_inline)) v16 small_step(small_t *s, v16 h, const float *t, float lr, int mse) {
    const v16 mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
    const v16 pad = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1e30f, -1e30f, -1e30f, -1e30f, -1e30f, -1e30f};
    float a1[L], a2[L], d3[L], d2[L];
    v16 z[4] = {s->b2};
    *(v16 *)a1 = vsig(h);
    /* 4 interleaved chains: 16 dependent FMAs would wait on each other's latency */
    for (int j = 0; j < D1; j++) z[j % 4] += a1[j] * s->w2t[j];
    *(v16 *)a2 = vsig((z[0] + z[1]) + (z[2] + z[3]));
    z[0] = s->b3, z[1] = z[2] = z[3] = (v16){0};
    for (int j = 0; j < D2; j++) z[j % 4] += a2[j] * s->w3t[j];
    v16 z3 = (z[0] + z[1]) + (z[2] + z[3]), tv = {0};
    v16 e = vexp(z3 - hmax(z3 + pad)) * mask; /* softmax over the 10 used lanes */
    v16 sm = e / hsum(e);
    memcpy(&tv, t, D3 * sizeof(float));
    if (mse) { /* squared error of softmax: the full Jacobian, as model.grads */
        v16 gi = 2.0f * (sm - tv);
        *(v16 *)d3 = sm * (gi - hsum(gi * sm));
    } else {
        *(v16 *)d3 = sm - tv;
    }
    z[0] = z[1] = z[2] = z[3] = (v16){0};
    for (int i = 0; i < D3; i++) z[i % 4] += d3[i] * s->w3[i];
    v16 va2 = *(v16 *)a2, va1 = *(v16 *)a1, vd3 = *(v16 *)d3;
    *(v16 *)d2 = ((z[0] + z[1]) + (z[2] + z[3])) * va2 * (1.0f - va2);
    z[0] = z[1] = z[2] = z[3] = (v16){0};
    for (int i = 0; i < D2; i++) z[i % 4] += d2[i] * s->w2[i];
    v16 d1 = ((z[0] + z[1]) + (z[2] + z[3])) * va1 * (1.0f - va1), vd2 = *(v16 *)d2;

    /* every delta above came from the weights before this step; now the update */
    for (int i = 0; i < D3; i++) s->w3[i] -= lr * (d3[i] * va2);
    for (int j = 0; j < D2; j++) s->w3t[j] -= lr * (vd3 * a2[j]);
    for (int i = 0; i < D2; i++) s->w2[i] -= lr * (d2[i] * va1);
    for (int j = 0; j < D1; j++) s->w2t[j] -= lr * (vd2 * a1[j]);
    s->b3 -= lr * vd3;
    s->b2 -= lr * vd2;
    s->b1 -= lr * d1;
    return d1;
}

/* One pass over W1^T [784][16]: if upd, W1 -= lr x_u (x) d1 (nd = -lr d1); if fwd, returns
   sum_k x_f[k] W1^T[k] with the weights as updated in this same pass. Fusing sample i's update
   with sample i+1's layer 1 streams W1 (50 KB, more than L1) once per step instead of twice; per
   row it is then one load, one store and two FMAs, close to the FMA and store ports' limit. 8
   accumulators: one chain of 784 FMAs would wait on the FMA latency. The row after x_f is
   fetched meanwhile (a few per cent over the hardware prefetcher alone, on dense rows). Always
   upwards: alternate passes downwards (to start on the lines still in L1) measured slower. */
static inline __attribute__((always_inline)) v16 w1_pass(float *restrict w1t, const float *restrict xu, v16 nd,
                                                         const float *restrict xf, int upd, int fwd) {
    enum { KU = 8 };
    v16 *w = (v16 *)w1t, acc[KU] = {{0}};
    for (int k0 = 0; k0 < D0; k0 += KU) {
        if (k0 % L == 0) __builtin_prefetch(xf + D0 + k0, 0, 3); /* never faults past the end */
        for (int u = 0; u < KU; u++) {
            v16 wk = w[k0 + u];
            if (upd) w[k0 + u] = wk = wk + xu[k0 + u] * nd;
            if (fwd) acc[u] += xf[k0 + u] * wk;
        }
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void steps_bs1(const float *x, const float *t, int n, float *w1t, float *b1, float *w2, float *b2,
                      float *w3, float *b3, float lr, int mse) {
    fp_note();
    small_t s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < D2; i++) s.w2[i] = ((const v16 *)w2)[i];
    for (int i = 0; i < D3; i++) s.w3[i] = ((const v16 *)w3)[i], s.b3[i] = b3[i];
    for (int i = 0; i < D2; i++)
        for (int j = 0; j < D1; j++) s.w2t[j][i] = w2[i * D1 + j];
    for (int i = 0; i < D3; i++)
        for (int j = 0; j < D2; j++) s.w3t[j][i] = w3[i * D2 + j];
    s.b1 = *(const v16 *)b1, s.b2 = *(const v16 *)b2;

    v16 h = s.b1 + w1_pass(w1t, x, (v16){0}, x, 0, 1);
    for (int i = 0; i < n; i++) {
        v16 nd = -lr * small_step(&s, h, t + (long)i * D3, lr, mse);
        const float *xi = x + (long)i * D0;
        if (i + 1 < n)
            h = s.b1 + w1_pass(w1t, xi, nd, xi + D0, 1, 1); /* s.b1: already this step's update */
        else
            w1_pass(w1t, xi, nd, xi, 1, 0);
    }

    for (int i = 0; i < D2; i++) ((v16 *)w2)[i] = s.w2[i];
    for (int i = 0; i < D3; i++) ((v16 *)w3)[i] = s.w3[i], b3[i] = s.b3[i];
    *(v16 *)b1 = s.b1, *(v16 *)b2 = s.b2;
}

/* n_steps consecutive SGD steps: step s trains on rows [s*batch, (s+1)*batch) of x [.][784] and
   t [.][10], in order, each the step one sgd_step call would take (same arguments and layouts,
   float32 round-off aside; work as for sgd_step, work_floats(threads) floats, unused at batch
   1). Any n_steps: the call's first step starts from the weights the last call left. */
void sgd_steps(const float *x, const float *t, int n_steps, int batch, float *w1t, float *b1, float *w2,
               float *b2, float *w3, float *b3, float lr, int mse, int threads, float *work) {
    if (n_steps < 1 || batch < 1) return;
    const fp_t was = fp_enter();
    if (batch == 1)
        steps_bs1(x, t, n_steps, w1t, b1, w2, b2, w3, b3, lr, mse);
    else
        for (int s = 0; s < n_steps; s++)
            one_step(x + (long)s * batch * D0, t + (long)s * batch * D3, batch, w1t, b1, w2, b2, w3, b3, lr, mse,
                     threads, work);
    fp_leave(was);
}

/* This thread's arithmetic limit in GFLOP/s: `iters` rounds of 12 independent FMA chains (more
   than FMA latency x FMA ports on current cpus), 2 FLOP per lane each. On the widest vector the
   build has, not v16: GCC lowers a vector wider than the hardware's through memory, which would
   measure the stack, not the FMA units. The bench turns it into microseconds per sample. */
#if defined(__AVX512F__)
typedef float vnat __attribute__((vector_size(64)));
#elif defined(__AVX__)
typedef float vnat __attribute__((vector_size(32)));
#else
typedef float vnat __attribute__((vector_size(16)));
#endif
static volatile float fma_sink;
double fma_gflops(long iters) {
    enum { C = 12, LANES = sizeof(vnat) / sizeof(float) };
    vnat acc[C], m = (vnat){0} + 0.999f, c = (vnat){0} + 1e-3f;
    for (int j = 0; j < C; j++) acc[j] = (vnat){0} + (float)j;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < C; j++) acc[j] = acc[j] * m + c; /* converges to 1: no overflow */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    vnat sum = {0};
    for (int j = 0; j < C; j++) sum += acc[j];
    fma_sink = sum[0]; /* the chains must not be optimised away */
    double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    return s > 0 ? 2.0 * LANES * C * (double)iters / s / 1e9 : 0.0;
}

/* ---- Any network of the family: 784 -> w1 -> ... -> wL -> 10 -----------------------------------

The same function as above (sigmoid hidden layers, softmax output with cross-entropy or squared
error, the mean loss over the batch, plain SGD, every gradient of a step computed before any
weight of that step changes) for any depth and width. Everything above stays the seed shape's
fast path; this is the general one.

Layout. Layer l (1..n_layers, the last one the output) keeps its weights transposed and
zero-padded, Wt_l [in_pad][out_pad], and its bias b_l [out_pad], every size rounded up to a
multiple of 16 (784 already is one). Activations and deltas are kept with their pad lanes exactly
0 (a pad lane's sigmoid would be 0.5: they are masked), so the pads of the weights only ever get
zero updates and never contribute.

One step on n rows: forward layer by layer over all rows, softmax and dL/dz over the 10 classes,
then from the top: the delta of layer l-1 from the old Wt_l, then Wt_l -= lr D_l^T A_{l-1} in
place (no gradient buffer: Wt_l is not read again in this step) and b_l. The three products of a
layer are all one kind of matrix product, written once (mm below): C = A B with B's rows
contiguous and a vector of 16 outputs per B row, so every one is broadcast-and-FMA, no horizontal
sums:
    forward   Z[r][o]   = sum_i A[r][i] Wt[i][o]     B = Wt
    backward  D'[r][i]  = sum_o D[r][o] Wt[i][o]     B = Wt^T, transposed while it is packed
    update    Wt[i][o] -= lr sum_r A[r][i] D[r][o]   B = D, A read down its columns
Threads split each product over the dimension that needs no reduction (see mm). At batch 1 (many
steps per call) a step is a few vector-matrix products, too small to pay for packing; that path
(net_steps_bs1) passes each weight matrix once or twice per step instead. */

/* The native vector: a 16-float row of the layout is VPR of them. The code above computes on
   16-lane v16 throughout, which is one register with AVX-512; with narrower registers GCC keeps
   arrays of v16 accumulators on the stack (the fast path's loops at batch 1 spend most of their
   time moving them through memory on an AVX2 cpu), so the general path computes on this one. */
#if defined(__AVX512F__)
#define VN_BYTES 64
#elif defined(__AVX__)
#define VN_BYTES 32
#else
#define VN_BYTES 16
#endif
typedef float vn __attribute__((vector_size(VN_BYTES), aligned(4)));
typedef int vni __attribute__((vector_size(VN_BYTES), aligned(4)));
enum { VL = VN_BYTES / 4, VPR = 16 / VL };

static inline vn vnsel(vni c, vn a, vn b) { return (vn)((c & (vni)a) | (~c & (vni)b)); }

/* vexp on the native vector: the same range reduction and polynomial, the polynomial in Estrin's
   form (its terms in pairs, r^2 and r^4 beside them) instead of Horner's: 4 dependent
   multiply-adds instead of 7, which the batch-1 paths wait on at every layer. Within 1.3 ulp of
   exp (Horner's: 0.92) over [-80, 80]. */
static inline vn vnexp(vn x) {
    const vn lo = (vn){0} - 87.0f, hi = (vn){0} + 88.0f;
    x = vnsel(x < lo, lo, x);
    x = vnsel(x > hi, hi, x);
    vn big = x * 1.44269504088896341f + 12582912.0f;
    vn n = big - 12582912.0f;
    vni e = ((vni)big - 0x4B400000 + 127) << 23;
    vn r = x - n * 0.693145751953125f - n * 1.428606765330187e-6f;
    vn r2 = r * r, r4 = r2 * r2; /* 1 added last: the small terms are summed before it */
    vn p = ((r * (1.0f / 5040) + 1.0f / 720) * r2 + (r * (1.0f / 120) + 1.0f / 24)) * r4 +
           ((r * (1.0f / 6) + 0.5f) * r2 + r);
    return (p + 1.0f) * (vn)e;
}

static inline float vnsum(vn v) {
    float s = 0.0f;
    for (int i = 0; i < VL; i++) s += v[i];
    return s;
}

static inline vn vnload(const float *p) { return *(const vn *)p; }
static inline void vnstore(float *p, vn v) { *(vn *)p = v; }

/* Register tile of the product: MR rows x NV groups of 16 columns (NV * VPR native vectors) of
   accumulators, sized to the register file with room for the B vectors and a broadcast: 32 x
   512-bit registers with AVX-512, 16 x 256-bit with AVX, 32 x 128-bit on arm64, 16 x 128-bit
   otherwise. CH: groups of 16 independent accumulators that hide the FMA latency in a
   vector-matrix product. -DMLP_MR=.. -DMLP_NV=.. -DMLP_CH=.. in $CC override them (to run the
   AVX-512 tile on another cpu, say). */
#ifndef MLP_MR
#if defined(__AVX512F__)
#define MLP_MR 8
#define MLP_NV 2
#define MLP_CH 8
#elif defined(__AVX__)
#define MLP_MR 6
#define MLP_NV 1
#define MLP_CH 4
#elif defined(__aarch64__)
#define MLP_MR 4
#define MLP_NV 1
#define MLP_CH 2
#else
#define MLP_MR 2
#define MLP_NV 1
#define MLP_CH 2
#endif
#endif
#ifndef MLP_CH
#define MLP_CH 4
#endif

/* Cache blocking of the product: a KC x NC block of B is packed into contiguous micro-panels of
   KC x (16 NV) (16 KB at NV 1: in L1 while MC rows of A use it; packed, the rows of a panel do not
   all map to the same few cache sets, as rows of a wide matrix a multiple of 4 KB apart would),
   and MC x KC of A (100 KB) stays in L2 while it meets all NC columns of the block. */
enum { MAXLAYERS = 9, KC = 256, NC = 1024, MC = 16 * MLP_MR };
/* B is packed only for more than this many rows of A: with fewer, the copy costs more than the
   cache misses it saves (measured at 784 x 4096: 23 against 38 GFLOP/s at 16 rows packed and
   not; 45 against 34 at 64 rows). */
enum { PACK_MIN_ROWS = 48 };
/* Multiply-adds below which one more thread costs more to start than it saves. */
enum { MIN_MACS = 1 << 17 };

static inline int pad16(int n) { return (n + 15) / 16 * 16; }
static inline int imin(int a, int b) { return a < b ? a : b; }

/* Threads worth starting for `macs` multiply-adds: at most `threads`, one per MIN_MACS. */
static int threads_for(double macs, int threads) {
    double most = macs / MIN_MACS;
    threads = threads > MAXT ? MAXT : threads;
    return most < threads ? (most < 1 ? 1 : (int)most) : (threads < 1 ? 1 : threads);
}

/* A matrix by strides: element (i, k) at p[i * rs + k * cs]. */
typedef struct {
    const float *p;
    long rs, cs;
} mat_t;

/* The register tile: C[r][j] = alpha * sum_k a[r sa + k sk] b[k sb + j] (+ C[r][j] if add) for
   r < rn, j < 16 nv. Inlined with constant rn and nv (mm_tile's switch), so the accumulators are
   registers. With few rows (batch 1, a small batch) the tile alone has too few accumulators to
   hide the FMA latency; then ks interleaved chains over k share the register budget. */
static inline __attribute__((always_inline)) void micro(const int rn, const int nv, int kn, const float *restrict a,
                                                        long sa, long sk, const float *restrict b, long sb,
                                                        float *restrict c, long sc, float alpha, int add) {
    const int fit = MLP_MR * MLP_NV / (rn * nv), ks = fit >= 4 ? 4 : fit >= 2 ? 2 : 1, nw = nv * VPR;
    vn acc[4][8][8];
    for (int s = 0; s < ks; s++)
        for (int r = 0; r < rn; r++)
            for (int v = 0; v < nw; v++) acc[s][r][v] = (vn){0};
    int k = 0;
    for (; k + ks <= kn; k += ks)
        for (int s = 0; s < ks; s++) {
            vn bv[8];
            for (int v = 0; v < nw; v++) bv[v] = vnload(b + (long)(k + s) * sb + VL * v);
            for (int r = 0; r < rn; r++) {
                float ar = a[r * sa + (long)(k + s) * sk];
                for (int v = 0; v < nw; v++) acc[s][r][v] += ar * bv[v];
            }
        }
    for (; k < kn; k++)
        for (int r = 0; r < rn; r++) {
            float ar = a[r * sa + (long)k * sk];
            for (int v = 0; v < nw; v++) acc[0][r][v] += ar * vnload(b + (long)k * sb + VL * v);
        }
    for (int r = 0; r < rn; r++)
        for (int v = 0; v < nw; v++) {
            vn sum = acc[0][r][v];
            for (int s = 1; s < ks; s++) sum += acc[s][r][v];
            float *cp = c + r * sc + VL * v;
            vnstore(cp, add ? vnload(cp) + alpha * sum : alpha * sum);
        }
}

/* micro for rn rows (1..MLP_MR) and nv vectors (1..MLP_NV), each pair compiled on its own. */
#define MICRO_CASE(R, V)                                                                                   \
    case R:                                                                                                \
        if (R <= MLP_MR) micro(R <= MLP_MR ? R : 1, V, kn, a, sa, sk, b, sb, c, sc, alpha, add);           \
        break;
#define MICRO_SWITCH(V)                                                                                    \
    switch (rn) {                                                                                          \
        MICRO_CASE(1, V) MICRO_CASE(2, V) MICRO_CASE(3, V) MICRO_CASE(4, V) MICRO_CASE(5, V) MICRO_CASE(6, V) \
        MICRO_CASE(7, V) MICRO_CASE(8, V)                                                                  \
    }
static void mm_tile(int rn, int nv, int kn, const float *a, long sa, long sk, const float *b, long sb, float *c, long sc,
                    float alpha, int add) {
    if (nv == MLP_NV) {
        MICRO_SWITCH(MLP_NV)
    } else {
        MICRO_SWITCH(1)
    }
}

/* Copies B's block of rows k0..k0+kn, columns j0..j0+w (w <= 16 NV) into dst [kn][w]. */
static void pack_panel(float *restrict dst, mat_t b, int k0, int kn, int j0, int w) {
    if (b.cs == 1) { /* rows of 16 or 32 floats: vector copies (a memcpy call per row costs more) */
        for (int k = 0; k < kn; k++)
            for (int j = 0; j < w; j += VL) vnstore(dst + (long)k * w + j, vnload(b.p + (k0 + k) * b.rs + j0 + j));
    } else { /* B given transposed: read along its (contiguous) k */
        for (int j = 0; j < w; j++) {
            const float *src = b.p + (k0)*b.rs + (j0 + j) * b.cs;
            for (int k = 0; k < kn; k++) dst[(long)k * w + j] = src[k * b.rs];
        }
    }
}

/* Hidden activations of one row in place: z [p] becomes sigmoid(z + b) on the first `real`
   lanes, exactly 0 in the pads (a pad's sigmoid would be 0.5). */
static void sigmoid_row(float *z, int p, int real, const float *b) {
    static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    for (int o = 0; o < p; o += VL) {
        vn a = 1.0f / (1.0f + vnexp(-(vnload(z + o) + vnload(b + o))));
        if (o + VL > real) a = vnsel(vnload(iota) < (float)(real - o), a, (vn){0});
        vnstore(z + o, a);
    }
}

/* What a product does to each finished tile of C while it is in cache: nothing; the forward
   pass's sigmoid(C + v[j]) on the columns j < real, 0 above; or the backward pass's factor
   C *= v (1 - v), v the activations laid out as C. */
enum { EPI_NONE, EPI_SIGMOID, EPI_DSIG };
typedef struct {
    int kind;
    const float *v;
    int real;
} epi_t;

static void epilogue(epi_t e, float *c, long sc, int i, int rn, int j0, int w) {
    for (int r = i; r < i + rn; r++) {
        float *cr = c + r * sc + j0;
        if (e.kind == EPI_SIGMOID) {
            sigmoid_row(cr, w, e.real - j0, e.v + j0);
        } else if (e.kind == EPI_DSIG) {
            const float *a = e.v + r * sc + j0;
            for (int j = 0; j < w; j++) cr[j] *= a[j] * (1.0f - a[j]);
        }
    }
}

/* Panels of the product: 16 NV columns each. */
enum { PW = 16 * MLP_NV };

/* Floats of one thread's pack buffer for products at most `widest` columns wide. */
static long pack_floats(int widest) { return (long)KC * imin(NC, (widest + PW - 1) / PW * PW); }

/* C [m][nn] (row stride sc) = alpha * A [m][kn] B [kn][nn] (+ C if add), then the epilogue; nn a
   multiple of 16; by the calling thread alone. Cache-blocked as at KC, NC and MC. B is packed
   unless few rows of A use it (PACK_MIN_ROWS) or one panel is all of it; it must be packed when
   given transposed (b.cs != 1). */
static void mm_serial(int m, int nn, int kn, mat_t a, mat_t b, float *c, long sc, float alpha, int add, epi_t epi,
                      float *pack) {
    int packed = b.cs != 1 || (m > PACK_MIN_ROWS && nn > PW);
    for (int jc = 0; jc < nn; jc += NC) {
        int nw = imin(NC, nn - jc), np = (nw + PW - 1) / PW;
        for (int pc = 0; pc < kn; pc += KC) {
            int kc = imin(KC, kn - pc), last = pc + kc == kn;
            if (packed)
                for (int jp = 0; jp < np; jp++)
                    pack_panel(pack + (long)jp * KC * PW, b, pc, kc, jc + jp * PW, imin(PW, nw - jp * PW));
            for (int ib = 0; ib < m; ib += MC)
                for (int jp = 0; jp < np; jp++) {
                    int j0 = jc + jp * PW, w = imin(PW, nw - jp * PW);
                    const float *bp = packed ? pack + (long)jp * KC * PW : b.p + pc * b.rs + j0;
                    long sb = packed ? w : b.rs;
                    for (int i = ib; i < imin(m, ib + MC); i += MLP_MR) {
                        int rn = imin(MLP_MR, m - i);
                        mm_tile(rn, w / 16, kc, a.p + i * a.rs + pc * a.cs, a.rs, a.cs, bp, sb, c + i * sc + j0, sc,
                                alpha, add || pc > 0);
                        if (last && epi.kind != EPI_NONE) epilogue(epi, c, sc, i, rn, j0, w);
                    }
                }
        }
    }
}

/* mm_serial on up to `threads` threads (one below MIN_MACS of work per thread), each on a part
   of C of its own with its own pack buffer (pack + t pstride), so no thread waits on another
   before the end: whole panels of columns where there are plenty of them, else rows. */
static void mm(int m, int nn, int kn, mat_t a, mat_t b, float *c, long sc, float alpha, int add, epi_t epi,
               int threads, float *pack, long pstride) {
    if (m < 1 || nn < 1) return;
    if (kn < 1) { /* an empty sum: only the epilogue's data counts */
        for (int i = 0; i < m; i++)
            if (!add) memset(c + i * sc, 0, nn * sizeof(float));
        if (epi.kind != EPI_NONE) epilogue(epi, c, sc, 0, m, 0, nn);
        return;
    }
    int nt = threads_for((double)m * nn * kn, threads), np = (nn + PW - 1) / PW;
    if (nt == 1) { /* no team at all: a team of one still costs its start */
        fp_note();
        mm_serial(m, nn, kn, a, b, c, sc, alpha, add, epi, pack);
    } else if (np >= 4 * nt) {
        int per = (np + nt - 1) / nt * PW;
        SPLIT(nt, t, nt, {
            int c0 = imin(nn, t * per), c1 = imin(nn, c0 + per);
            epi_t e = epi;
            if (e.kind == EPI_SIGMOID) e.v += c0, e.real -= c0;
            if (e.kind == EPI_DSIG) e.v += c0;
            if (c0 < c1)
                mm_serial(m, c1 - c0, kn, a, (mat_t){b.p + c0 * b.cs, b.rs, b.cs}, c + c0, sc, alpha, add, e,
                          pack + t * pstride);
        });
    } else {
        int per = ((m + nt - 1) / nt + MLP_MR - 1) / MLP_MR * MLP_MR;
        SPLIT(nt, t, nt, {
            int r0 = imin(m, t * per), r1 = imin(m, r0 + per);
            epi_t e = epi;
            if (e.kind == EPI_DSIG) e.v += r0 * sc;
            if (r0 < r1)
                mm_serial(r1 - r0, nn, kn, (mat_t){a.p + r0 * a.rs, a.rs, a.cs}, b, c + r0 * sc, sc, alpha, add, e,
                          pack + t * pstride);
        });
    }
}

/* The output layer's dL/dz of one row in place, from its logits z [16] (10 used, zeros above)
   plus the bias b and the one-hot target t: softmax over the 10 classes, then cross-entropy's or
   the squared error's derivative (the full Jacobian, as model.grads), scaled by 1 / batch for
   the mean. Pad lanes come out 0. */
static inline void out_delta(float *z, const float *b, const float *t, float scale, int mse) {
    float m = z[0] + b[0], e[16], sum = 0.0f, gs = 0.0f;
    for (int i = 1; i < D3; i++) m = z[i] + b[i] > m ? z[i] + b[i] : m;
    for (int c = 0; c < 16; c += VL) vnstore(e + c, vnexp(vnload(z + c) + vnload(b + c) - m));
    for (int i = 0; i < D3; i++) sum += e[i];
    for (int i = 0; i < D3; i++) e[i] /= sum; /* e: softmax */
    if (mse) {
        for (int i = 0; i < D3; i++) z[i] = (2.0f * scale) * (e[i] - t[i]), gs += z[i] * e[i];
        for (int i = 0; i < D3; i++) z[i] = e[i] * (z[i] - gs);
    } else {
        for (int i = 0; i < D3; i++) z[i] = (e[i] - t[i]) * scale;
    }
    for (int i = D3; i < 16; i++) z[i] = 0.0f;
}

/* The network as kernel.py hands it over, sizes checked and padded. */
typedef struct {
    int nl;                       /* layers with weights, the output layer included */
    int size[MAXLAYERS + 1];      /* real sizes: size[0] = 784, size[nl] = 10 */
    int pad[MAXLAYERS + 1];       /* rounded up to multiples of 16 */
    float *const *wt, *const *b;  /* Wt_l [pad[l-1]][pad[l]], b_l [pad[l]] for l = 1..nl */
    int maxp;                     /* the widest pad[l], l >= 1 */
} net_t;

/* 0, or -1 if the sizes are not a network of the family: 784 -> 1..8 hidden layers -> 10. */
static int net_init(net_t *q, int n_layers, const int *sizes, float *const *wt, float *const *b) {
    if (n_layers < 2 || n_layers > MAXLAYERS || sizes[0] != D0 || sizes[n_layers] != D3) return -1;
    q->nl = n_layers, q->wt = wt, q->b = b, q->maxp = 0;
    for (int l = 0; l <= n_layers; l++) {
        if (sizes[l] < 1 || sizes[l] > (1 << 20)) return -1; /* any real width is far below 2^20 */
        q->size[l] = sizes[l], q->pad[l] = pad16(sizes[l]);
        if (l > 0 && q->pad[l] > q->maxp) q->maxp = q->pad[l];
    }
    return 0;
}

/* Whether the backward product of a layer in_pad -> out_pad on n rows is taken transposed,
   D_{l-1}^T = Wt_l D_l^T: then the deltas (n x out) and the result (in x n) are transposed, where
   packing Wt_l^T would transpose all of Wt_l; at few rows against a large matrix that is far
   less copying (784-1024-1024-10 at 2 rows per step: the transpose of Wt_2 was 1.2 ms a step). */
static int bwd_transposed(int n, int in_pad, int out_pad) { return 2L * pad16(n) * (in_pad + out_pad) < (long)in_pad * out_pad; }

/* Work memory for n rows on up to `threads` threads: each hidden layer's activations [n][pad],
   two delta buffers [n][maxp] (a layer's and the one below it), and at n > 1 a pack buffer per
   thread and, where a backward product is taken transposed, its two buffers [maxp][pad16(n)]; at
   batch 1 instead the next sample's layer-1 pre-activation and -lr d [maxp]. */
static long net_work(const net_t *q, int n, int threads) {
    long f = 2L * n * q->maxp;
    for (int l = 1; l < q->nl; l++) f += (long)n * q->pad[l];
    if (n == 1) return f + 2L * q->maxp;
    f += threads * pack_floats(q->maxp);
    for (int l = 2; l <= q->nl; l++)
        if (bwd_transposed(n, q->pad[l - 1], q->pad[l])) return f + 2L * q->maxp * pad16(n);
    return f;
}

/* ---- Sparse layer 1: the `sparse` mode -------------------------------------------------------

MNIST's pixels are mostly one background value (0 in this pipeline's x / 255, where ~81 % of
the raw pixels are 0; -mean/std under a (x - mean) / std normalisation). Layer 1's two products,
784 x w1 each per sample (~95 % of mlp-16-16's arithmetic), then only need the pixels that
differ from it. Exactly the same function, not an approximation:

    Wt_1[k] = A[k] + u for every pixel k (A is wt[0], u one row of w1 floats, both kept)
    x = c 1 + s, with c the background value and s nonzero only where x differs from c

  forward   sum_k x_k Wt_1[k] = c S + sum_{s_k != 0} s_k A[k] + (784 c + sum_k s_k) u,
            S = sum_k A[k] kept as a running row (the identity is exact algebra; only float
            round-off differs from the dense sum's, as any reordering of a sum does)
  update    Wt_1[k] += x_k nd (nd = -lr dL/dz1, per row of the batch) is
            A[k] += s_k nd on the nonzero s_k only,  u += c nd,  S += (sum_k s_k) nd
            (0 * nd leaves a weight as it is, so skipping s_k = 0 is the dense update)

With c = 0 (this pipeline) u and S stay exactly 0 and unused; the c != 0 terms cost O(w1) per
row. Either way a row costs O(nonzeros x w1). The lists of nonzeros are the mode's own form of
the training data (kernel.py's nonzero_lists), built once per dataset like any preloaded copy,
reordered per epoch before the clock as every mode's data is: a row's list is its pixels that
differ from c, each as its row's offset in A (pixel x padded width) and x - c. S is a running sum
whose round-off could drift from sum_k A[k] over many updates: it is recomputed from A at the
start of every call (every call of the mode: at most 1024 steps). Measured
(tests/test_modes.py, normalised synthetic data at batch 1): over a whole 60000-sample epoch in
one call, with no resync, S drifts 2.3e-5 of its scale from A's true sum; over one call of 1024
steps, 1.2e-6, float32 round-off. Every other layer is the generic path's (net_step,
net_steps_bs1), or at batch 1 of a narrow network the path of its own below (sp_steps_narrow). */

typedef struct {
    float c;          /* the background value */
    float *u;         /* [pad1]: Wt_1[k] = A[k] + u */
    float *s;         /* [pad1]: S = sum_k A[k] (c != 0 only) */
    const long *off;  /* row r's list: entries off[r] .. off[r + 1] of idx and val */
    const int *idx;   /* the entry's row of A: its offset in floats (pixel x pad1) */
    const float *val; /* x - c at that pixel */
    const float *sum; /* [rows]: the sum of each row's val */
} sp_t;

/* The lists of rows [r0, ...): the same lists, row r0 first. */
static sp_t sp_from(const sp_t *sp, long r0) {
    sp_t o = *sp;
    o.off += r0, o.sum += r0;
    return o;
}

/* Groups of 16 columns per strip of the forward product (as vm_pass's STRIP). */
enum { SP_STRIP = MLP_CH / 2 > 1 ? MLP_CH / 2 : 1 };

/* z[0..16 sv) = sum_j val[j] A[idx[j]] over one strip of sv groups of 16 columns (a: the strip's
   first column; idx: row offsets); MLP_CH / sv chains over the list hide the FMA latency. */
static inline __attribute__((always_inline)) void sp_fwd_strip(const int sv, const float *restrict a,
                                                               const int *restrict idx, const float *restrict val,
                                                               int n, float *restrict z) {
    const int ku = MLP_CH / sv > 1 ? MLP_CH / sv : 1, nw = sv * VPR;
    vn acc[MLP_CH][8];
    for (int u = 0; u < ku; u++)
        for (int w = 0; w < nw; w++) acc[u][w] = (vn){0};
    int j = 0;
    for (; j + ku <= n; j += ku)
        for (int u = 0; u < ku; u++) {
            const float *ap = a + idx[j + u];
            for (int w = 0; w < nw; w++) acc[u][w] += val[j + u] * vnload(ap + VL * w);
        }
    for (; j < n; j++)
        for (int w = 0; w < nw; w++) acc[0][w] += val[j] * vnload(a + idx[j] + VL * w);
    for (int w = 0; w < nw; w++) {
        vn sum = acc[0][w];
        for (int u = 1; u < ku; u++) sum += acc[u][w];
        vnstore(z + VL * w, sum);
    }
}

/* Layer 1's pre-activation of row r, z [p], from the weights as they are. */
static void sp_fwd(const sp_t *sp, const float *a, int p, long r, float *z) {
    const int *idx = sp->idx + sp->off[r], n = (int)(sp->off[r + 1] - sp->off[r]);
    const float *val = sp->val + sp->off[r];
    for (int g = 0; g < p / 16;) {
        int left = p / 16 - g;
        if (left >= 4 && SP_STRIP >= 4) sp_fwd_strip(4 <= SP_STRIP ? 4 : 1, a + 16 * g, idx, val, n, z + 16 * g), g += 4;
        else if (left >= 2 && SP_STRIP >= 2) sp_fwd_strip(2 <= SP_STRIP ? 2 : 1, a + 16 * g, idx, val, n, z + 16 * g), g += 2;
        else sp_fwd_strip(1, a + 16 * g, idx, val, n, z + 16 * g), g += 1;
    }
    if (sp->c != 0.0f) {
        float k1 = D0 * sp->c + sp->sum[r];
        for (int o = 0; o < p; o += VL) vnstore(z + o, vnload(z + o) + sp->c * vnload(sp->s + o) + k1 * vnload(sp->u + o));
    }
}

/* A[k][c0..c1) += val_k alpha d over row r's list (alpha d = -lr dL/dz1 of that row, [p]). */
static void sp_upd(const sp_t *sp, float *a, long r, const float *d, float alpha, int c0, int c1) {
    const int *idx = sp->idx + sp->off[r], n = (int)(sp->off[r + 1] - sp->off[r]);
    const float *val = sp->val + sp->off[r];
    if (c1 - c0 == 16 && VPR <= 2) { /* the narrow layer: nd in registers for the whole list */
        const vn nv[2] = {alpha * vnload(d + c0), VPR == 2 ? alpha * vnload(d + c0 + VL) : (vn){0}};
        float *restrict ac = a + c0;
        int j = 0;
        /* four rows at a time, all four loaded before any is stored: a list names each row once,
           so no load waits on (or is speculated past) an earlier store of the same list */
        for (; j + 4 <= n; j += 4) {
            float *ap[4];
            vn w[4][2];
            for (int u = 0; u < 4; u++) {
                ap[u] = ac + idx[j + u];
                for (int v = 0; v < VPR; v++) w[u][v] = vnload(ap[u] + VL * v);
            }
            for (int u = 0; u < 4; u++) {
                const float x = val[j + u];
                for (int v = 0; v < VPR; v++) vnstore(ap[u] + VL * v, w[u][v] + x * nv[v]);
            }
        }
        for (; j < n; j++) {
            float *ap = ac + idx[j];
            const float x = val[j];
            for (int v = 0; v < VPR; v++) vnstore(ap + VL * v, vnload(ap + VL * v) + x * nv[v]);
        }
        return;
    }
    for (int j = 0; j < n; j++) {
        float *ap = a + idx[j];
        for (int o = c0; o < c1; o += VL) vnstore(ap + o, vnload(ap + o) + val[j] * (alpha * vnload(d + o)));
    }
}

/* u += c sum_r nd_r and S += sum_r (sum_k s_rk) nd_r over rows [0, n), nd_r = -lr d_r. */
static void sp_upd_rows(const sp_t *sp, int p, int n, const float *d, float lr) {
    if (sp->c == 0.0f) return;
    for (int r = 0; r < n; r++)
        for (int o = 0; o < p; o += VL) {
            vn nd = -lr * vnload(d + (long)r * p + o);
            vnstore(sp->u + o, vnload(sp->u + o) + sp->c * nd);
            vnstore(sp->s + o, vnload(sp->s + o) + sp->sum[r] * nd);
        }
}

/* S = sum_k A[k] over the 784 real rows, from scratch (c != 0 only). */
static void sp_resync(const sp_t *sp, const float *a, int p) {
    if (sp->c == 0.0f) return;
    for (int o = 0; o < p; o += VL) {
        vn sum = {0};
        for (int k = 0; k < D0; k++) sum += vnload(a + (long)k * p + o);
        vnstore(sp->s + o, sum);
    }
}

/* Layer 1's update of a step on n rows: A over each row's list, the columns shared among threads
   in groups of 16 (each thread all rows of its own columns: no two write one weight), then u, S. */
static void sp_step_update(const sp_t *sp, float *a, int p, int n, const float *d, float lr, int threads) {
    int ng = p / 16, nt = imin(threads_for((double)n * p * 160, threads), ng);
    SPLIT(nt, t, nt, {
        int c0 = 16 * (ng * t / nt), c1 = 16 * (ng * (t + 1) / nt);
        for (int r = 0; r < n; r++) sp_upd(sp, a, r, d + (long)r * p, -lr, c0, c1);
    });
    sp_upd_rows(sp, p, n, d, lr);
}

/* One SGD step on n rows (see the top of this section). */
static void net_step(const net_t *q, const float *x, const float *t, int n, float lr, int mse, int threads,
                     float *work, const sp_t *sp) {
    const int nl = q->nl, *sz = q->size, *pd = q->pad;
    const float *act[MAXLAYERS + 1];
    float *w = work;
    act[0] = x;
    for (int l = 1; l < nl; l++) act[l] = w, w += (long)n * pd[l];
    float *d = w, *dn = w + (long)n * q->maxp, *pack = dn + (long)n * q->maxp;
    const long ps = pack_floats(q->maxp), n16 = pad16(n);
    float *dt = pack + threads * ps, *ct = dt + q->maxp * n16; /* bwd_transposed's buffers */
    const epi_t none = {EPI_NONE, 0, 0};

    for (int l = 1; l <= nl; l++) { /* forward; the output layer's logits go to d */
        float *z = l < nl ? (float *)act[l] : d;
        if (l == 1 && sp) { /* sparse: each row over its own list (nl >= 2: z is act[1]) */
            int nt = threads_for((double)n * pd[1] * 160, threads);
            SPLIT(nt, r, n, {
                sp_fwd(sp, q->wt[0], pd[1], r, z + (long)r * pd[1]);
                sigmoid_row(z + (long)r * pd[1], pd[1], sz[1], q->b[0]);
            });
            continue;
        }
        epi_t sig = {EPI_SIGMOID, q->b[l - 1], sz[l]};
        mm(n, pd[l], sz[l - 1], (mat_t){act[l - 1], pd[l - 1], 1}, (mat_t){q->wt[l - 1], pd[l], 1}, z, pd[l], 1.0f, 0,
           l < nl ? sig : none, threads, pack, ps);
    }
    int nt = threads_for(128.0 * n, threads); /* a row's softmax: ~128 FMAs' time */
    SPLIT(nt, r, n, out_delta(d + (long)r * pd[nl], q->b[nl - 1], t + (long)r * D3, 1.0f / n, mse));

    for (int l = nl; l >= 1; l--) { /* backward from the top; d holds D_l [n][pd[l]] */
        /* D_{l-1} = (D_l Wt_l^T) a(1 - a), from the weights before this step */
        if (l > 1 && bwd_transposed(n, pd[l - 1], pd[l])) {
            for (int o = 0; o < sz[l]; o++) /* dt [out][n16] = D_l^T, zeros past row n */
                for (int r = 0; r < n16; r++) dt[o * n16 + r] = r < n ? d[(long)r * pd[l] + o] : 0.0f;
            mm(sz[l - 1], n16, sz[l], (mat_t){q->wt[l - 1], pd[l], 1}, (mat_t){dt, n16, 1}, ct, n16, 1.0f, 0, none,
               threads, pack, ps);
            const float *a = act[l - 1];
            for (int r = 0; r < n; r++)
                for (int i = 0; i < pd[l - 1]; i++) {
                    long ri = (long)r * pd[l - 1] + i;
                    dn[ri] = i < sz[l - 1] ? ct[i * n16 + r] * a[ri] * (1.0f - a[ri]) : 0.0f;
                }
        } else if (l > 1) {
            mm(n, pd[l - 1], sz[l], (mat_t){d, pd[l], 1}, (mat_t){q->wt[l - 1], 1, pd[l]}, dn, pd[l - 1], 1.0f, 0,
               (epi_t){EPI_DSIG, act[l - 1], 0}, threads, pack, ps);
        }
        /* Wt_l -= lr A_{l-1}^T D_l over the real input rows (the pad rows' update is 0) */
        if (l == 1 && sp)
            sp_step_update(sp, q->wt[0], pd[1], n, d, lr, threads);
        else
            mm(sz[l - 1], pd[l], n, (mat_t){act[l - 1], 1, pd[l - 1]}, (mat_t){d, pd[l], 1}, q->wt[l - 1], pd[l], -lr,
               1, none, threads, pack, ps);
        float *bl = q->b[l - 1];
        nt = threads_for((double)n * pd[l], threads);
        SPLIT(nt, g, pd[l] / 16, {
            for (int o = 16 * g; o < 16 * g + 16; o += VL) {
                vn sum = {0};
                for (int r = 0; r < n; r++) sum += vnload(d + (long)r * pd[l] + o);
                vnstore(bl + o, vnload(bl + o) - lr * sum);
            }
        });
        float *tmp = d;
        d = dn, dn = tmp;
    }
}

/* ---- Batch 1: many one-sample steps per call ---------------------------------------------------

A step is then a vector-matrix product per layer and its update. Each layer above the first is
passed twice per step: forward (vm_pass), then once more for its backward product and update
together (bwd_pass). Layer 1 (784 rows, usually the largest) is passed once: its update for
sample s and sample s+1's forward product share one pass (vm_pass with both), as in steps_bs1. */

/* One strip of sv groups of 16 columns of Wt [kn][.] (row stride sw), down all its rows: if upd,
   Wt += xu (x) nd; if fwd, z = xf Wt with the weights as updated in this same pass. Inlined with
   constant sv, upd and fwd; MLP_CH / sv chains over the rows hide the FMA latency. */
static inline __attribute__((always_inline)) void vm_strip(const int sv, const int upd, const int fwd, float *restrict w,
                                                           long sw, int kn, const float *restrict xu,
                                                           const float *restrict nd, const float *restrict xf,
                                                           float *restrict z) {
    const int ku = MLP_CH / sv > 1 ? MLP_CH / sv : 1, nw = sv * VPR;
    vn acc[MLP_CH][8], ndv[8];
    for (int v = 0; v < nw; v++) {
        ndv[v] = upd ? vnload(nd + VL * v) : (vn){0};
        for (int u = 0; u < ku; u++) acc[u][v] = (vn){0};
    }
    int k = 0;
    for (; k + ku <= kn; k += ku)
        for (int u = 0; u < ku; u++)
            for (int v = 0; v < nw; v++) {
                float *wp = w + (long)(k + u) * sw + VL * v;
                vn wk = vnload(wp);
                if (upd) vnstore(wp, wk = wk + xu[k + u] * ndv[v]);
                if (fwd) acc[u][v] += xf[k + u] * wk;
            }
    for (; k < kn; k++)
        for (int v = 0; v < nw; v++) {
            float *wp = w + (long)k * sw + VL * v;
            vn wk = vnload(wp);
            if (upd) vnstore(wp, wk = wk + xu[k] * ndv[v]);
            if (fwd) acc[0][v] += xf[k] * wk;
        }
    if (fwd)
        for (int v = 0; v < nw; v++) {
            vn sum = acc[0][v];
            for (int u = 1; u < ku; u++) sum += acc[u][v];
            vnstore(z + VL * v, sum);
        }
}

/* Groups of 16 columns per strip: as many accumulators as MLP_CH at two chains per group, and
   as many registers again for nd. */
enum { STRIP = MLP_CH / 2 > 1 ? MLP_CH / 2 : 1 };
/* Wider than this many groups of 16 columns, vm_pass sweeps (measured: the same speed up to
   256 columns, 2.5-3x faster from 1024 on). */
enum { SWEEP_GROUPS = 16 };

/* vm_strip for the sv the pass asks for (STRIP, or one of the last strip's 1..STRIP-1 groups) and
   the update and product that xu and xf ask for. */
static void vm_strip_any(int sv, float *w, long sw, int kn, const float *xu, const float *nd, const float *xf,
                         float *z) {
#define L1_STRIPS(SV)                                                                                  \
    (xu ? (xf ? vm_strip(SV, 1, 1, w, sw, kn, xu, nd, xf, z) : vm_strip(SV, 1, 0, w, sw, kn, xu, nd, xf, z)) \
        : vm_strip(SV, 0, 1, w, sw, kn, xu, nd, xf, z))
    if (sv >= 4 && STRIP >= 4) L1_STRIPS(4 <= STRIP ? 4 : 1);
    else if (sv >= 2 && STRIP >= 2) L1_STRIPS(2 <= STRIP ? 2 : 1);
    else L1_STRIPS(1);
#undef L1_STRIPS
}

/* Wide matrices: rows 4 at a time across columns [c0, c1), z accumulating in memory (a row of
   z is at most 16 KB here: in L1). Every stream is then sequential, where a strip down a wide
   matrix (rows 16 KB apart at 4096 columns) takes a new page per row and gets no help from the
   hardware prefetcher. */
static void sweep(float *restrict w, long sw, int kn, int c0, int c1, const float *restrict xu,
                  const float *restrict nd, const float *restrict xf, float *restrict z) {
    enum { KG = 4 };
    if (xf) memset(z + c0, 0, (c1 - c0) * sizeof(float));
    for (int k = 0; k < kn; k += KG) {
        int kg = imin(KG, kn - k);
        for (int c = c0; c < c1; c += VL) {
            vn acc = xf ? vnload(z + c) : (vn){0}, ndc = xu ? vnload(nd + c) : (vn){0};
            for (int u = 0; u < kg; u++) {
                float *wp = w + (long)(k + u) * sw + c;
                vn wk = vnload(wp);
                if (xu) vnstore(wp, wk = wk + xu[k + u] * ndc);
                if (xf) acc += xf[k + u] * wk;
            }
            if (xf) vnstore(z + c, acc);
        }
    }
}

/* One pass over Wt [kn][16 ng] (row stride sw): if xu, Wt += xu (x) nd; if xf, z = xf Wt with the
   updated weights. Narrow matrices in strips of STRIP groups down all rows (the accumulators in
   registers), wide ones by sweep; either way the columns are shared among threads. */
static void vm_pass(float *w, long sw, int kn, int ng, const float *xu, const float *nd, const float *xf, float *z,
                    int threads) {
    int nt = threads_for((double)kn * ng * 16 * ((xu != 0) + (xf != 0)), threads);
    if (ng > SWEEP_GROUPS) {
        int per = (ng + nt - 1) / nt;
        SPLIT(nt, s, nt, sweep(w, sw, kn, imin(ng, s * per) * 16, imin(ng, s * per + per) * 16, xu, nd, xf, z));
        return;
    }
    const int strips = (ng + STRIP - 1) / STRIP;
    SPLIT(nt, s, strips, {
        for (int g = STRIP * s; g < imin(ng, STRIP * s + STRIP);) {
            int left = ng - g, sv = left >= STRIP ? STRIP : left >= 4 ? 4 : left >= 2 ? 2 : 1;
            vm_strip_any(sv, w + 16 * g, sw, kn, xu, nd ? nd + 16 * g : 0, xf, z + 16 * g);
            g += sv;
        }
    });
}

/* One row of layer l's backward at batch 1: returns sum_o w[o] d[o] from the row's old weights,
   then w += a nd (nd = -lr d). */
static inline float bwd_row(float *w, int p, const float *d, const float *nd, float a) {
    vn acc0 = {0}, acc1 = {0};
    int c = 0;
    for (; c + 2 * VL <= p; c += 2 * VL) { /* two chains: one would wait on its own FMA latency */
        vn w0 = vnload(w + c), w1 = vnload(w + c + VL);
        acc0 += w0 * vnload(d + c), acc1 += w1 * vnload(d + c + VL);
        vnstore(w + c, w0 + a * vnload(nd + c)), vnstore(w + c + VL, w1 + a * vnload(nd + c + VL));
    }
    if (c < p) {
        vn w0 = vnload(w + c);
        acc0 += w0 * vnload(d + c);
        vnstore(w + c, w0 + a * vnload(nd + c));
    }
    return vnsum(acc0 + acc1);
}

/* Layer l's backward at batch 1, one pass over Wt [in][p] (in real rows): dp[i] = row i . d,
   then row i += a[i] nd; dp's pad lanes set to 0. */
static void bwd_pass(float *w, int in, int p, const float *d, const float *nd, const float *a, float *dp,
                     int threads) {
    int nt = threads_for((double)in * p * 2, threads);
    SPLIT(nt, i, in, dp[i] = bwd_row(w + (long)i * p, p, d, nd, a[i]));
    for (int i = in; i < pad16(in); i++) dp[i] = 0.0f;
}

/* n_steps steps of one sample each (see above). */
static void net_steps_bs1(const net_t *q, const float *x, const float *t, int n_steps, float lr, int mse,
                          int threads, float *work, const sp_t *sp) {
    fp_note();
    const int nl = q->nl, *sz = q->size, *pd = q->pad;
    float *act[MAXLAYERS + 1], *w = work;
    for (int l = 1; l < nl; l++) act[l] = w, w += pd[l];
    float *d = w, *dn = d + q->maxp, *z1 = dn + q->maxp, *nd = z1 + q->maxp;
    float *wt1 = q->wt[0];

    if (sp) /* sparse: sample s's list is row s's */
        sp_fwd(sp, wt1, pd[1], 0, z1);
    else
        vm_pass(wt1, pd[1], D0, pd[1] / 16, 0, 0, x, z1, threads);
    for (int s = 0; s < n_steps; s++) {
        memcpy(act[1], z1, pd[1] * sizeof(float));
        sigmoid_row(act[1], pd[1], sz[1], q->b[0]);
        for (int l = 2; l <= nl; l++) {
            float *z = l < nl ? act[l] : d;
            vm_pass(q->wt[l - 1], pd[l], sz[l - 1], pd[l] / 16, 0, 0, act[l - 1], z, threads);
            if (l < nl) sigmoid_row(z, pd[l], sz[l], q->b[l - 1]);
        }
        out_delta(d, q->b[nl - 1], t + (long)s * D3, 1.0f, mse);

        for (int l = nl; l >= 2; l--) {
            for (int o = 0; o < pd[l]; o++) nd[o] = -lr * d[o];
            bwd_pass(q->wt[l - 1], sz[l - 1], pd[l], d, nd, act[l - 1], dn, threads);
            for (int i = 0; i < pd[l - 1]; i++) dn[i] *= act[l - 1][i] * (1.0f - act[l - 1][i]);
            for (int o = 0; o < pd[l]; o++) q->b[l - 1][o] += nd[o];
            float *tmp = d;
            d = dn, dn = tmp;
        }
        for (int o = 0; o < pd[1]; o++) nd[o] = -lr * d[o], q->b[0][o] += nd[o];
        if (sp) { /* this sample's update over its list, then the next sample's product over its own */
            const sp_t row = sp_from(sp, s);
            sp_upd(sp, wt1, s, nd, 1.0f, 0, pd[1]);
            sp_upd_rows(&row, pd[1], 1, d, lr);
            if (s + 1 < n_steps) sp_fwd(sp, wt1, pd[1], s + 1, z1);
            continue;
        }
        /* this sample's layer-1 update, and the next sample's layer-1 product in the same pass */
        const float *xs = x + (long)s * D0;
        vm_pass(wt1, pd[1], D0, pd[1] / 16, xs, nd, s + 1 < n_steps ? xs + D0 : 0, z1, threads);
    }
}

/* ---- Batch 1 of a narrow network, sparse: every layer one group of 16 columns -----------------

Where every hidden layer is at most 16 wide (mlp-16-16, the default network, among them) a step
past layer 1 is a few hundred multiply-adds, less than the general path's per-layer calls,
passes and thread checks cost. This path keeps the small layers in local arrays for the whole
call, in both layouts as small_step does (Wt_l for the forward product, a row per input; W_l for
the backward product, a row per output; both get the same update, the product computed once per
element in either layout, so they stay bit-identical), and runs a step straight through. Layer
1 is the sparse section's, as in net_steps_bs1. Pads stay exactly 0: activations and deltas are 0
there, so the small layers' updates, run over all 16 rows, add 0 to a pad row, and layer 1's
touches only the rows of its list. */

/* Max and sum over a 16-float row of VPR native vectors, the result in every lane (a
   broadcast, ready for the next vector operation): log2(VL) steps of swapping lanes s apart, as
   hsum / hmax, instead of a scalar pass over the lanes, which the softmax waits on. */
#if defined(__clang__)
#define VNSHUF(v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)
#else
#define VNSHUF(v, ...) __builtin_shuffle(v, (vni){__VA_ARGS__})
#endif
#if VN_BYTES == 64
#define ALL_LANES(v, op)                                                       \
    (v = op(v, VNSHUF(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)), \
     v = op(v, VNSHUF(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)), \
     v = op(v, VNSHUF(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)), \
     v = op(v, VNSHUF(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)))
#elif VN_BYTES == 32
#define ALL_LANES(v, op)                                                                    \
    (v = op(v, VNSHUF(v, 4, 5, 6, 7, 0, 1, 2, 3)), v = op(v, VNSHUF(v, 2, 3, 0, 1, 6, 7, 4, 5)), \
     v = op(v, VNSHUF(v, 1, 0, 3, 2, 5, 4, 7, 6)))
#else
#define ALL_LANES(v, op) (v = op(v, VNSHUF(v, 2, 3, 0, 1)), v = op(v, VNSHUF(v, 1, 0, 3, 2)))
#endif
static inline vn vnmax(vn a, vn b) { return vnsel(a > b, a, b); }
static inline vn vnadd(vn a, vn b) { return a + b; }

static inline vn row_max(const vn *v) {
    vn m = v[0];
    for (int i = 1; i < VPR; i++) m = vnmax(m, v[i]);
    ALL_LANES(m, vnmax);
    return m;
}

static inline vn row_sum(const vn *v) {
    vn m = v[0];
    for (int i = 1; i < VPR; i++) m += v[i];
    ALL_LANES(m, vnadd);
    return m;
}

/* z [16] = sum_i a[i] w[i] over 16 rows of 16 (four chains). */
static inline void vm16(const float *restrict a, const float *restrict w, vn *z) {
    vn c[4][VPR];
    for (int k = 0; k < 4; k++)
        for (int v = 0; v < VPR; v++) c[k][v] = (vn){0};
    for (int i = 0; i < 16; i += 4)
        for (int k = 0; k < 4; k++)
            for (int v = 0; v < VPR; v++) c[k][v] += a[i + k] * vnload(w + (i + k) * 16 + VL * v);
    for (int v = 0; v < VPR; v++) z[v] = (c[0][v] + c[1][v]) + (c[2][v] + c[3][v]);
}

static void sp_steps_narrow(const net_t *q, const float *t, int n_steps, float lr, int mse, const sp_t *sp) {
    fp_note();
    enum { G = 16 };
    static const float iota[G] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const int nl = q->nl, *sz = q->size;
    float fw[MAXLAYERS][G * G] __attribute__((aligned(64))), bw[MAXLAYERS][G * G] __attribute__((aligned(64)));
    float b[MAXLAYERS][G] __attribute__((aligned(64))), a[MAXLAYERS][G] __attribute__((aligned(64)));
    float d[G] __attribute__((aligned(64))), nd[G] __attribute__((aligned(64))), tt[G] __attribute__((aligned(64)));
    for (int l = 0; l < nl; l++) memcpy(b[l], q->b[l], sizeof b[l]);
    for (int l = 1; l < nl; l++) {
        memcpy(fw[l], q->wt[l], sizeof fw[l]);
        for (int i = 0; i < G; i++)
            for (int o = 0; o < G; o++) bw[l][o * G + i] = fw[l][i * G + o];
    }
    float z1[G] __attribute__((aligned(64)));
    vn lanes[VPR];
    for (int v = 0; v < VPR; v++) lanes[v] = vnload(iota + VL * v);
    memset(tt, 0, sizeof tt);
    float *wt1 = q->wt[0];
    sp_fwd(sp, wt1, G, 0, z1);
    for (int s = 0; s < n_steps; s++) {
        vn z[VPR];
        for (int v = 0; v < VPR; v++) z[v] = vnload(z1 + VL * v);
        for (int l = 1; l < nl; l++) { /* a[l-1] = sigmoid(z_l + b_l) on the real lanes, then z_{l+1} */
            for (int v = 0; v < VPR; v++) {
                vn h = 1.0f / (1.0f + vnexp(-(z[v] + vnload(b[l - 1] + VL * v))));
                vnstore(a[l - 1] + VL * v, vnsel(lanes[v] < (float)sz[l], h, (vn){0}));
            }
            vm16(a[l - 1], fw[l], z);
        }
        { /* the output: softmax over the 10 lanes of z + b, then dL/dz (as out_delta) */
            vn e[VPR], tv[VPR];
            memcpy(tt, t + (long)s * D3, D3 * sizeof(float));
            for (int v = 0; v < VPR; v++) {
                e[v] = vnsel(lanes[v] < (float)D3, z[v] + vnload(b[nl - 1] + VL * v), (vn){0} - 1e30f);
                tv[v] = vnload(tt + VL * v);
            }
            vn m = row_max(e);
            for (int v = 0; v < VPR; v++) e[v] = vnsel(lanes[v] < (float)D3, vnexp(e[v] - m), (vn){0});
            vn inv = 1.0f / row_sum(e);
            for (int v = 0; v < VPR; v++) e[v] *= inv;
            if (mse) {
                vn g[VPR], gs[VPR];
                for (int v = 0; v < VPR; v++) g[v] = 2.0f * (e[v] - tv[v]), gs[v] = g[v] * e[v];
                vn sg = row_sum(gs);
                for (int v = 0; v < VPR; v++) vnstore(d + VL * v, e[v] * (g[v] - sg));
            } else {
                for (int v = 0; v < VPR; v++) vnstore(d + VL * v, e[v] - tv[v]);
            }
        }
        for (int l = nl; l >= 2; l--) { /* d = D_l: D_{l-1} from the weights before this step, then the update */
            const float *al = a[l - 2];
            vn back[VPR], ndv[VPR];
            vm16(d, bw[l - 1], back);
            for (int v = 0; v < VPR; v++) {
                ndv[v] = -lr * vnload(d + VL * v);
                vnstore(nd + VL * v, ndv[v]);
                vnstore(b[l - 1] + VL * v, vnload(b[l - 1] + VL * v) + ndv[v]);
                vn av = vnload(al + VL * v);
                vnstore(d + VL * v, back[v] * av * (1.0f - av));
            }
            /* all G rows of both layouts, unrolled: on a pad row a_i = 0 or nd_o = 0, which leaves
               its weights exactly as they were (0) */
            for (int i = 0; i < G; i++) /* Wt_l[i] += a_i nd */
                for (int v = 0; v < VPR; v++) {
                    float *w = fw[l - 1] + i * G + VL * v;
                    vnstore(w, vnload(w) + al[i] * ndv[v]);
                }
            for (int o = 0; o < G; o++) /* W_l[o] += nd_o a */
                for (int v = 0; v < VPR; v++) {
                    float *w = bw[l - 1] + o * G + VL * v;
                    vnstore(w, vnload(w) + nd[o] * vnload(al + VL * v));
                }
        }
        for (int o = 0; o < G; o++) nd[o] = -lr * d[o], b[0][o] += nd[o];
        /* layer 1: this sample's update over its list, then the next sample's product over its own */
        const sp_t row = sp_from(sp, s);
        sp_upd(sp, wt1, s, nd, 1.0f, 0, G);
        sp_upd_rows(&row, G, 1, d, lr);
        if (s + 1 < n_steps) sp_fwd(sp, wt1, G, s + 1, z1);
    }
    for (int l = 0; l < nl; l++) memcpy(q->b[l], b[l], sizeof b[l]);
    for (int l = 1; l < nl; l++) memcpy(q->wt[l], fw[l], sizeof fw[l]);
}

/* Floats of work memory mlp_steps needs for `batch` rows per step on up to `threads` threads (a
   call on fewer threads needs no more), or -1 if the sizes are not a network of the family. */
long mlp_work_floats(int batch, int n_layers, const int *sizes, int threads) {
    net_t q;
    if (batch < 1 || net_init(&q, n_layers, sizes, 0, 0)) return -1;
    return net_work(&q, batch, threads < 1 ? 1 : threads > MAXT ? MAXT : threads);
}

/* n_steps consecutive SGD steps of the network 784 -> sizes[1] -> ... -> 10 (n_layers layers with
   weights, sizes[] their n_layers + 1 real sizes): step s trains on rows [s*batch, (s+1)*batch)
   of x [.][784] and t [.][10] (one-hot), contiguous. wt[l] and b[l] are layer l+1's weights in
   the layout at the top of this section (Wt [pad in][pad out], b [pad out], zeros in every pad),
   updated in place; loss: mse (squared error of softmax) or cross-entropy. Threads: up to
   `threads` of OpenMP's pool (torch's, as for sgd_step), fewer where a product is small. work:
   mlp_work_floats(batch, n_layers, sizes, t) floats for some t >= threads. Returns 0, or -1
   (nothing done) if the sizes are not a network of the family. */
int mlp_steps(const float *x, const float *t, int n_steps, int batch, int n_layers, const int *sizes,
              float *const *wt, float *const *b, float lr, int mse, int threads, float *work) {
    net_t q;
    if (net_init(&q, n_layers, sizes, wt, b)) return -1;
    if (n_steps < 1 || batch < 1) return 0;
    threads = threads < 1 ? 1 : threads > MAXT ? MAXT : threads;
    const fp_t was = fp_enter();
    if (batch == 1)
        net_steps_bs1(&q, x, t, n_steps, lr, mse, threads, work, 0);
    else
        for (int s = 0; s < n_steps; s++)
            net_step(&q, x + (long)s * batch * D0, t + (long)s * batch * D3, batch, lr, mse, threads, work, 0);
    fp_leave(was);
    return 0;
}

/* mlp_steps for the `sparse` mode (the sparse layer-1 section above), on the nonzero lists of the
   rows instead of x: step i trains on rows [i*batch, (i+1)*batch), row r's list the entries
   off[r] .. off[r+1] of idx (each its row's offset in A, pixel x pad w1) and val (x - c there),
   sum[r] the sum of its val; wt[0] holds A, u [pad w1] and s [pad w1] (S, recomputed from A
   here first: the running sum is never carried from one call to the next) and c the background
   value. The same function as mlp_steps on the dense rows. work: mlp_work_floats(batch,
   n_layers, sizes, t) floats for some t >= threads. On return s holds the running S as the
   call's updates left it (tests compare it with A's sum: the drift). Returns 0, or -1 (nothing
   done) if the sizes are not a network of the family. */
int sparse_steps(const long *off, const int *idx, const float *val, const float *sum, const float *t, int n_steps,
                 int batch, int n_layers, const int *sizes, float *const *wt, float *const *b, float *u, float *s,
                 float c, float lr, int mse, int threads, float *work) {
    net_t q;
    if (net_init(&q, n_layers, sizes, wt, b)) return -1;
    if (n_steps < 1 || batch < 1) return 0;
    threads = threads < 1 ? 1 : threads > MAXT ? MAXT : threads;
    const fp_t was = fp_enter();
    const sp_t sp = {c, u, s, off, idx, val, sum};
    sp_resync(&sp, wt[0], q.pad[1]);
    int narrow = 1;
    for (int l = 1; l < q.nl; l++) narrow &= q.pad[l] == 16;
    if (batch == 1 && narrow)
        sp_steps_narrow(&q, t, n_steps, lr, mse, &sp);
    else if (batch == 1)
        net_steps_bs1(&q, 0, t, n_steps, lr, mse, threads, work, &sp);
    else
        for (int i = 0; i < n_steps; i++) {
            const sp_t rows = sp_from(&sp, (long)i * batch);
            net_step(&q, 0, t + (long)i * batch * D3, batch, lr, mse, threads, work, &rows);
        }
    fp_leave(was);
    return 0;
}
