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
void sgd_step(const float *x, const float *t, int n, float *w1t, float *b1, float *w2, float *b2,
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
#pragma omp parallel for num_threads(threads) schedule(static, 1) if (threads > 1)
    for (int i = 0; i < threads; i++) run_part(&parts[i]);
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
    if (batch == 1) {
        steps_bs1(x, t, n_steps, w1t, b1, w2, b2, w3, b3, lr, mse);
        return;
    }
    for (int s = 0; s < n_steps; s++)
        sgd_step(x + (long)s * batch * D0, t + (long)s * batch * D3, batch, w1t, b1, w2, b2, w3, b3, lr, mse,
                 threads, work);
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
