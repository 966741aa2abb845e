/* The `kernel` mode: one SGD step of the 784-16-16-10 sigmoid MLP in one pass over the batch.

Why a hand-written kernel: at large batch on the cpu the step is bound by reading the batch from
memory. Library GEMMs read it twice (x.W1^T forward, d1^T.x for W1's gradient) and pack it on
the way; this kernel takes R rows at a time through forward, backward and both W1 products
while they are in cache, so every sample is read from memory once. bench/README.md has the
measurements that led here. Built by kernel.py with the machine's C compiler; plain C with GCC /
Clang vector extensions, so it compiles for any cpu (the speed was tuned on AVX-512).

Same function as model.grads + SGD: true gradient of the mean loss over the batch, every
gradient computed before any weight changes. Float32 throughout; exp is a polynomial within
~1 ulp (tests/test_modes.py holds the result to float64 autograd).
*/
#include <string.h>

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

static inline v16 vexp(v16 x) {
    /* exp(x) = 2^n exp(r) with n = round(x log2 e), |r| <= ln2/2; Taylor to r^7 is within 1 ulp */
    for (int l = 0; l < L; l++) x[l] = x[l] < -87.0f ? -87.0f : (x[l] > 88.0f ? 88.0f : x[l]);
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
