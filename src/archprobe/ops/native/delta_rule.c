/* The gated delta rule (KDA: one decay per key channel; Gated DeltaNet: one per head), forward, float32.
 *
 * Per (batch, head), state S [K, V], for t = 0 .. T-1:
 *     S = diag(d_t) S;  u_t = beta_t (v_t - S^T k_t);  S = S + k_t u_t^T;  o_t = scale S^T q_t
 * (ops/kda/naive.py, d_t = exp(g_t), each g raised to a floor first). Fused into one pass over S per token: row i does
 *     S_i += k_{t-1,i} u_{t-1};  o_{t-1} += q_{t-1,i} S_i;  S_i *= d_{t,i};  kS_t += k_{t,i} S_i
 * and u_t follows from kS_t after the pass. Every column of V is independent of the others, so S is cut
 * into strips of up to 128 columns (AVX-512; 32 elsewhere), each copied to K contiguous rows that stay in
 * cache for all T tokens; threads take whole strips (narrower ones where there would be fewer strips
 * than threads). It is the recurrence itself, not a rewrite of it: no chunk, no triangular solve, no
 * factored decay that could overflow or underflow. Threads started here set flush-to-zero and denormals-are-zero for
 * themselves (and the caller's thread only while it runs a share, restored after): a value below
 * float32's smallest normal (1.2e-38) counts as 0 instead of taking x86's microcode path.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

/* The widest vectors the target has, so the compiler never splits one (a split vector spills) */
#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX__)
#define LANES 8
#else
#define LANES 4
#endif
/* The most vectors per strip: u and the two sums take 3 registers each, the broadcasts 4 (32 registers
 * with AVX-512; 16 with AVX, where 4 vectors fill them; 8 is out of reach for 128-bit targets anyway) */
#if defined(__AVX512F__)
#define MAX_NV 8
#else
#define MAX_NV 4
#endif

typedef struct {
    const float *q, *k, *v, *g, *beta;   /* q, k [B,T,H,K]; v [B,T,H,V]; g [B,T,H,K] or [B,T,H]; beta [B,T,H] */
    float *S, *o;                        /* S [B,H,K,V], in and out; o [B,T,H,V] */
    int64_t B, T, H, K, V, per_channel;  /* per_channel: g holds K log-decays per token and head, else one */
    float scale, floor;                  /* floor: the least log-decay a token keeps (ops.chunking's exp floor) */
    int64_t cols;                        /* columns per strip (a multiple of LANES) */
    int64_t first, last;                 /* this share's strips */
    int failed;
} job_t;

typedef float vf __attribute__((vector_size(4 * LANES)));
typedef float vf_unaligned __attribute__((vector_size(4 * LANES), aligned(4), may_alias));

#define ALWAYS static inline __attribute__((always_inline))
ALWAYS vf splat(float x) { return (vf){0} + x; }
ALWAYS vf load(const float *p) { return *(const vf_unaligned *)p; }
ALWAYS void store(float *p, vf x) { *(vf_unaligned *)p = x; }
/* the first w < LANES floats, the rest 0 (a strip narrower than its vectors) */
ALWAYS vf load_part(const float *p, int64_t w) { float t[LANES] = {0}; memcpy(t, p, w * sizeof(float)); return load(t); }
ALWAYS void store_part(float *p, vf x, int64_t w) { float t[LANES]; store(t, x); memcpy(p, t, w * sizeof(float)); }

/* exp(max(x, floor)) for n floats, x <= 88, vectorised: x = m ln2 + r with |r| <= ln2 / 2, e^r by its
 * Taylor series to r^7 (truncation below 5e-9, under float32's rounding), 2^m put into the exponent bits.
 * m >= floor / ln2 - 1 stays a normal exponent for any floor above -87. NaN stays NaN. */
typedef int32_t vi __attribute__((vector_size(4 * LANES)));

ALWAYS vf blend(vi mask, vf yes, vf no) { return (vf)(((vi)yes & mask) | ((vi)no & ~mask)); }

ALWAYS vf vexp(vf x, float floor) {
    x = blend(x < floor, splat(floor), x);
    x = blend(x > 88.f, splat(88.f), x);
    const vf shifter = splat(12582912.f);             /* 1.5 * 2^23: adding it rounds to an integer */
    const vf t = x * 1.44269504f + shifter;
    const vf m = t - shifter;
    const vf r = (x - m * 0.693145752f) - m * 1.42860677e-6f;   /* ln 2 in two parts, exact products */
    vf p = splat(1.f / 5040.f);
    p = p * r + 1.f / 720.f;
    p = p * r + 1.f / 120.f;
    p = p * r + 1.f / 24.f;
    p = p * r + 1.f / 6.f;
    p = p * r + 0.5f;
    p = p * r + 1.f;
    p = p * r + 1.f;
    const vi e = (__builtin_convertvector(m, vi) + 127) << 23;
    return p * (vf)e;
}

/* out[i] = exp(max(x[i], floor)), i < n; out has room for n rounded up to whole vectors. */
ALWAYS void exps(const float *x, float *out, int64_t n, float floor) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) store(out + i, vexp(load(x + i), floor));
    if (i < n) store_part(out + i, vexp(load_part(x + i, n - i), floor), n - i);
}

/* out[i] = exp(max(x, floor)) for every i < n: one decay per head */
ALWAYS void splat_exp(float x, float *out, int64_t n, float floor) {
    const vf e = vexp(splat(x), floor);
    for (int64_t i = 0; i < n; i += LANES) store(out + i, e);
}

#define UNROLL _Pragma("GCC unroll 16")

/* Columns [c0, c0 + w) of head (b, h), w <= NV * LANES, for all T tokens. NV is a constant at every call,
 * and every loop over it is unrolled, so u and the two sums stay in registers. Nonzero if out of memory. */
ALWAYS int strip(const job_t *j, int64_t b, int64_t h, int64_t c0, int64_t w, const int NV) {
    const int64_t K = j->K, V = j->V, H = j->H, T = j->T, W = NV * LANES;
    const int64_t tok = H * K, tokv = H * V, dk = j->per_channel ? K : 1, tokd = H * dk;
    const float *q = j->q + (b * T * H + h) * K, *k = j->k + (b * T * H + h) * K;
    const float *g = j->g + (b * T * H + h) * dk;
    const float *v = j->v + (b * T * H + h) * V + c0, *beta = j->beta + b * T * H + h;
    float *o = j->o + (b * T * H + h) * V + c0;
    float *S_io = j->S + (b * H + h) * K * V + c0;
    /* the strip as K contiguous rows (rows V apart would crowd a few cache sets), then a zero row that stands
     * in for token -1 (nothing to add or read) and token T's keys (nothing to sum), and the token's decays */
    const int64_t Kr = (K + LANES - 1) / LANES * LANES;
    float *S = aligned_alloc(64, (size_t)(K * W + 2 * Kr) * sizeof(float));
    if (!S) return 1;
    float *zero_row = S + K * W, *decay = zero_row + Kr;
    for (int64_t i = 0; i < K; i++) {
        memset(S + i * W, 0, W * sizeof(float));
        memcpy(S + i * W, S_io + i * V, w * sizeof(float));
        zero_row[i] = 0.f;
    }
    const vf zero = splat(0.f), sc = splat(j->scale);
    vf u[MAX_NV], ao[MAX_NV], ak[MAX_NV];
    UNROLL for (int n = 0; n < NV; n++) u[n] = zero;
    for (int64_t t = 0; t <= T; t++) {
        const float *kp = t ? k + (t - 1) * tok : zero_row, *qp = t ? q + (t - 1) * tok : zero_row;
        const float *kt = t < T ? k + t * tok : zero_row;
        if (t == T) exps(zero_row, decay, K, j->floor);                   /* exp(0) = 1: no decay */
        else if (dk == K) exps(g + t * tokd, decay, K, j->floor);
        else splat_exp(g[t * tokd], decay, K, j->floor);
        UNROLL for (int n = 0; n < NV; n++) ao[n] = ak[n] = zero;
        for (int64_t i = 0; i < K; i++) {   /* row i: S += k_{t-1,i} u; o += q_{t-1,i} S; S *= d_{t,i}; kS += k_{t,i} S */
            float *row = S + i * W;
            const vf a = splat(kp[i]), qi = splat(qp[i]), di = splat(decay[i]), ki = splat(kt[i]);
            UNROLL for (int n = 0; n < NV; n++) {
                vf s = load(row + LANES * n) + a * u[n];
                ao[n] += qi * s;
                s *= di;
                store(row + LANES * n, s);
                ak[n] += ki * s;
            }
        }
        if (t) {   /* o_{t-1}, this strip's columns */
            float *op = o + (t - 1) * tokv;
            UNROLL for (int n = 0; n < NV; n++) {
                const int64_t left = w - LANES * n;
                if (left >= LANES) store(op + LANES * n, ao[n] * sc);
                else if (left > 0) store_part(op + LANES * n, ao[n] * sc, left);
            }
        }
        if (t < T) {   /* u_t = beta_t (v_t - S^T k_t) */
            const vf bt = splat(beta[t * H]);
            const float *vt = v + t * tokv;
            UNROLL for (int n = 0; n < NV; n++) {
                const int64_t left = w - LANES * n;
                const vf x = left >= LANES ? load(vt + LANES * n) : left > 0 ? load_part(vt + LANES * n, left) : zero;
                u[n] = bt * (x - ak[n]);
            }
        }
    }
    for (int64_t i = 0; i < K; i++) memcpy(S_io + i * V, S + i * W, w * sizeof(float));
    free(S);
    return 0;
}

static int64_t strips_per_head(int64_t V, int64_t cols) { return (V + cols - 1) / cols; }

static int run_strip(const job_t *j, int64_t s) {
    const int64_t per_head = strips_per_head(j->V, j->cols), bh = s / per_head, c0 = (s % per_head) * j->cols;
    const int64_t b = bh / j->H, h = bh % j->H, w = j->V - c0 < j->cols ? j->V - c0 : j->cols;
    /* the fewest vectors (1, 2, 4 or 8) that hold the strip's columns */
    if (w > 4 * LANES) return strip(j, b, h, c0, w, MAX_NV);
    if (w > 2 * LANES) return strip(j, b, h, c0, w, MAX_NV < 4 ? MAX_NV : 4);
    if (w > LANES) return strip(j, b, h, c0, w, 2);
    return strip(j, b, h, c0, w, 1);
}

static void *worker(void *arg) {
    job_t *j = arg;
#ifdef HAVE_MXCSR
    const unsigned int saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040);   /* FTZ | DAZ, this thread only */
#endif
    for (int64_t s = j->first; s < j->last && !j->failed; s++) j->failed = run_strip(j, s);
#ifdef HAVE_MXCSR
    _mm_setcsr(saved);
#endif
    return 0;
}

/* Returns 0, or 1 where memory for a strip could not be had. Shapes are the caller's to check. */
int delta_rule_forward(const float *q, const float *k, const float *v, const float *g, int64_t per_channel,
                       const float *beta, float *S, float *o, int64_t B, int64_t T, int64_t H, int64_t K,
                       int64_t V, float scale, float floor, int64_t threads) {
    if (T <= 0 || B <= 0 || H <= 0 || K <= 0 || V <= 0) return 0;
    enum { MAX_THREADS = 256 };
    if (threads < 1) threads = 1;
    /* the widest strips (fewest passes over q, k and d per column), narrowed while threads would idle */
    int64_t cols = MAX_NV * LANES;
    while (cols > LANES && B * H * strips_per_head(V, cols) < threads) cols /= 2;
    const int64_t n = B * H * strips_per_head(V, cols);
    if (threads > n) threads = n;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads < 1) threads = 1;
    job_t jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int64_t w = 0; w < threads; w++) {
        jobs[w] = (job_t){q, k, v, g, beta, S, o, B, T, H, K, V, per_channel, scale, floor, cols, n * w / threads,
                          n * (w + 1) / threads, 0};
        started[w] = 0;
    }
    for (int64_t w = 1; w < threads; w++) started[w] = pthread_create(&ids[w], 0, worker, &jobs[w]) == 0;
    worker(&jobs[0]);
    int failed = jobs[0].failed;
    for (int64_t w = 1; w < threads; w++) {
        if (started[w]) pthread_join(ids[w], 0);
        else worker(&jobs[w]);
        failed |= jobs[w].failed;
    }
    return failed;
}
