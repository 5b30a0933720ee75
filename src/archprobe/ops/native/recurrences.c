/* The linear recurrences, forward, float32, each fused into one pass over its state per token.
 *
 * The gated delta rule (KDA: one decay per key channel; Gated DeltaNet: one per head). Per (batch, head),
 * state S [K, V], for t = 0 .. T-1 (ops/kda/naive.py; d_t = exp(g_t), 0 below a floor):
 *     S = diag(d_t) S;  u_t = beta_t (v_t - S^T k_t);  S = S + k_t u_t^T;  o_t = scale S^T q_t
 * Row i of the pass for token t does
 *     S_i += k_{t-1,i} u_{t-1};  o_{t-1} += q_{t-1,i} S_i;  S_i *= d_{t,i};  kS_t += k_{t,i} S_i
 * and u_t follows from kS_t after the pass.
 *
 * Mamba-2's SSD (ops/ssd.py). Per (batch, head), state S [P, N], scalar log-decay a_t = dt_t A:
 *     S = exp(a_t) S + (dt_t x_t) B_t^T;  y_t = S C_t
 * The state is held as c R (c a scalar per head), so a decay only scales c, and each token is two
 * multiply-adds per state element: R += (B_t,n / c) u_t and y_t += (C_t,n c) R, two tokens per pass.
 * Where c would leave [2^-10, 2^10], that pass multiplies R by c and the decays instead (three per
 * element and token) and c starts again at 1. A decay below the floor is 0.
 *
 * Both work column by column of their state's second factor (V; P), which are independent of each other:
 * the state is cut into strips of columns, each copied to contiguous rows that stay in cache for all T
 * tokens; threads take whole strips (narrower ones where there would be fewer strips than threads).
 * These are the recurrences themselves, not rewrites: no chunk, no triangular solve, no factored decay
 * that could overflow or underflow. Threads started here set flush-to-zero and denormals-are-zero for
 * themselves (and the caller's thread only while it runs a share, restored after): a value below
 * float32's smallest normal (1.2e-38) counts as 0 instead of taking x86's microcode path.
 */
#include <math.h>
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
/* The most vectors per delta-rule strip: u and the two sums take 3 registers each, the broadcasts 4 (32
 * registers with AVX-512; 16 with AVX, where 4 vectors fill them) */
#if defined(__AVX512F__)
#define MAX_NV 8
#else
#define MAX_NV 4
#endif


typedef float vf __attribute__((vector_size(4 * LANES)));
typedef float vf_unaligned __attribute__((vector_size(4 * LANES), aligned(4), may_alias));

#define ALWAYS static inline __attribute__((always_inline))
ALWAYS vf splat(float x) { return (vf){0} + x; }
ALWAYS vf load(const float *p) { return *(const vf_unaligned *)p; }
ALWAYS void store(float *p, vf x) { *(vf_unaligned *)p = x; }
/* the first w < LANES floats, the rest 0 (a strip narrower than its vectors) */
ALWAYS vf load_part(const float *p, int64_t w) { float t[LANES] = {0}; memcpy(t, p, w * sizeof(float)); return load(t); }
ALWAYS void store_part(float *p, vf x, int64_t w) { float t[LANES]; store(t, x); memcpy(p, t, w * sizeof(float)); }
/* a vector at p of which only `left` floats are the strip's (all of them, some, or none: zeros) */
ALWAYS vf load_upto(const float *p, int64_t left) {
    return left >= LANES ? load(p) : left > 0 ? load_part(p, left) : splat(0.f);
}
ALWAYS void store_upto(float *p, vf x, int64_t left) {
    if (left >= LANES) store(p, x);
    else if (left > 0) store_part(p, x, left);
}
/* n floats, 64-byte aligned (C11's aligned_alloc wants the size a multiple of the alignment) */
static float *floats(int64_t n) { return aligned_alloc(64, ((size_t)n * sizeof(float) + 63) / 64 * 64); }

/* exp(max(x, floor)), x <= 88, vectorised: x = m ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to
 * r^7 (truncation below 5e-9, under float32's rounding), 2^m put into the exponent bits. m >= floor / ln2 - 1
 * stays a normal exponent for any floor above -87, so no factor is ever subnormal. NaN stays NaN. */
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

/* a decay exp(x), 0 below the floor (a decay that small forgets the state, as exp(-inf) does) */
ALWAYS vf decays(vf x, float floor) { return blend(x < floor, splat(0.f), vexp(x, floor)); }

/* out[i] = the decay of x[i], i < n; out has room for n rounded up to whole vectors */
ALWAYS void exps(const float *x, float *out, int64_t n, float floor) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) store(out + i, decays(load(x + i), floor));
    if (i < n) store_part(out + i, decays(load_part(x + i, n - i), floor), n - i);
}

/* out[i] = the decay of x for every i < n: one decay per head */
ALWAYS void splat_exp(float x, float *out, int64_t n, float floor) {
    const vf e = decays(splat(x), floor);
    for (int64_t i = 0; i < n; i += LANES) store(out + i, e);
}

#define UNROLL _Pragma("GCC unroll 16")
#define MAX_THREADS 256

/* ---- strips over threads ---- */

typedef int (*strip_fn)(const void *args, int64_t strip);   /* one strip, all tokens; nonzero: out of memory */

typedef struct {
    strip_fn run;
    const void *args;
    int64_t first, last;   /* this share's strips */
    char *touch;           /* this share's part of the output, written once per page before the strips */
    size_t touch_bytes;
    int failed;
} share_t;

static void *toucher(void *arg) {
    share_t *s = arg;
    for (size_t b = 0; b < s->touch_bytes; b += 4096) s->touch[b] = 0;
    return 0;
}

static void *worker(void *arg) {
    share_t *s = arg;
#ifdef HAVE_MXCSR
    const unsigned int saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040);   /* FTZ | DAZ, this thread only */
#endif
    for (int64_t i = s->first; i < s->last && !s->failed; i++) s->failed = s->run(s->args, i);
#ifdef HAVE_MXCSR
    _mm_setcsr(saved);
#endif
    return 0;
}

/* fn over the shares, the caller's thread taking the first (and any whose thread did not start) */
static void fan_out(void *(*fn)(void *), share_t *shares, int64_t threads) {
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int64_t w = 1; w < threads; w++) started[w] = pthread_create(&ids[w], 0, fn, &shares[w]) == 0;
    fn(&shares[0]);
    for (int64_t w = 1; w < threads; w++) {
        if (started[w]) pthread_join(ids[w], 0);
        else fn(&shares[w]);
    }
}

/* n strips over up to `threads` threads (the caller's among them), out (out_bytes) their output; nonzero if
 * any strip failed. A fresh output's pages are mapped on first write, and strips write every page of it,
 * so threads faulting the same pages would wait on each other: each first maps a contiguous part of its
 * own (writing a 0 that the strips, started after all of that, overwrite). */
static int run_strips(strip_fn run, const void *args, int64_t n, int64_t threads, void *out, size_t out_bytes) {
    if (threads > n) threads = n;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads < 1) threads = 1;
    share_t shares[MAX_THREADS];
    for (int64_t w = 0; w < threads; w++) {
        const size_t lo = out_bytes * w / threads, hi = out_bytes * (w + 1) / threads;
        shares[w] = (share_t){run, args, n * w / threads, n * (w + 1) / threads, (char *)out + lo, hi - lo, 0};
    }
    if (threads > 1) fan_out(toucher, shares, threads);
    fan_out(worker, shares, threads);
    int failed = 0;
    for (int64_t w = 0; w < threads; w++) failed |= shares[w].failed;
    return failed;
}

static int64_t strips_per_head(int64_t width, int64_t cols) { return (width + cols - 1) / cols; }

/* strip s of H heads of `width` columns cut every `cols`: its batch, head, first column and width */
typedef struct { int64_t b, h, c0, w; } strip_at_t;
static strip_at_t strip_at(int64_t s, int64_t H, int64_t width, int64_t cols) {
    const int64_t per_head = strips_per_head(width, cols), bh = s / per_head, c0 = (s % per_head) * cols;
    return (strip_at_t){bh / H, bh % H, c0, width - c0 < cols ? width - c0 : cols};
}

/* the widest strips up to max_cols (fewest passes over the per-token inputs), narrowed while threads would idle */
static int64_t strip_columns(int64_t heads, int64_t width, int64_t max_cols, int64_t threads) {
    int64_t cols = max_cols;
    while (cols > LANES && heads * strips_per_head(width, cols) < threads) cols /= 2;
    return cols;
}

/* ---- the gated delta rule ---- */

typedef struct {
    const float *q, *k, *v, *g, *beta;   /* q, k [B,T,H,K]; v [B,T,H,V]; g [B,T,H,K] or [B,T,H]; beta [B,T,H] */
    float *S, *o;                        /* S [B,H,K,V], in and out; o [B,T,H,V] */
    int64_t B, T, H, K, V, per_channel;  /* per_channel: g holds K log-decays per token and head, else one */
    float scale, floor;                  /* floor: a log-decay below it is a decay of 0 (ops.chunking's exp floor) */
    int64_t cols;                        /* columns per strip (a multiple of LANES) */
} delta_rule_t;

/* Columns [c0, c0 + w) of head (b, h), w <= NV * LANES, for all T tokens. NV is a constant at every call,
 * and every loop over it is unrolled, so u and the two sums stay in registers. Nonzero if out of memory. */
ALWAYS int delta_rule_strip(const delta_rule_t *j, int64_t b, int64_t h, int64_t c0, int64_t w, const int NV) {
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
    float *S = floats(K * W + 2 * Kr);
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
            UNROLL for (int n = 0; n < NV; n++) store_upto(op + LANES * n, ao[n] * sc, w - LANES * n);
        }
        if (t < T) {   /* u_t = beta_t (v_t - S^T k_t) */
            const vf bt = splat(beta[t * H]);
            const float *vt = v + t * tokv;
            UNROLL for (int n = 0; n < NV; n++) u[n] = bt * (load_upto(vt + LANES * n, w - LANES * n) - ak[n]);
        }
    }
    for (int64_t i = 0; i < K; i++) memcpy(S_io + i * V, S + i * W, w * sizeof(float));
    free(S);
    return 0;
}

static int delta_rule_run(const void *args, int64_t s) {
    const delta_rule_t *j = args;
    const strip_at_t a = strip_at(s, j->H, j->V, j->cols);
    const int64_t b = a.b, h = a.h, c0 = a.c0, w = a.w;
    /* the fewest vectors (1, 2, 4 or 8) that hold the strip's columns */
    if (w > 4 * LANES) return delta_rule_strip(j, b, h, c0, w, MAX_NV);
    if (w > 2 * LANES) return delta_rule_strip(j, b, h, c0, w, MAX_NV < 4 ? MAX_NV : 4);
    if (w > LANES) return delta_rule_strip(j, b, h, c0, w, 2);
    return delta_rule_strip(j, b, h, c0, w, 1);
}

/* Returns 0, or 1 where memory for a strip could not be had. Shapes are the caller's to check. */
int delta_rule_forward(const float *q, const float *k, const float *v, const float *g, int64_t per_channel,
                       const float *beta, float *S, float *o, int64_t B, int64_t T, int64_t H, int64_t K,
                       int64_t V, float scale, float floor, int64_t threads) {
    if (T <= 0 || B <= 0 || H <= 0 || K <= 0 || V <= 0) return 0;
    if (threads < 1) threads = 1;
    const int64_t cols = strip_columns(B * H, V, MAX_NV * LANES, threads);
    const delta_rule_t j = {q, k, v, g, beta, S, o, B, T, H, K, V, per_channel, scale, floor, cols};
    return run_strips(delta_rule_run, &j, B * H * strips_per_head(V, cols), threads, o,
                      (size_t)(B * T * H * V) * sizeof(float));
}

/* ---- Mamba-2's SSD ---- */

/* vectors per SSD strip: two tokens' u and y take 4 registers per vector of columns */
#if defined(__AVX512F__)
#define SSD_NV 4
#else
#define SSD_NV 2
#endif
/* c stays within [2^-10, 2^10]: R = S / c and the scalars B / c, C c are then within 2^10 of S, B and C, so
 * they stay finite and normal wherever S stays below ~3e35 (float32's own limit is 3.4e38) and C's entries
 * are above ~1e-35 or exactly 0 */
#define FOLD_LOW 9.765625e-4f
#define FOLD_HIGH 1024.f

typedef struct {
    const float *x, *dt, *A, *Bm, *Cm;   /* x [B,T,H,P]; dt [B,T,H]; A [H]; Bm, Cm [B,T,H,N] */
    float *S, *y;                        /* S [B,H,P,N], in and out; y [B,T,H,P] */
    int64_t B, T, H, P, N;
    float floor;                         /* a log-decay below this is a decay of 0 */
    int64_t cols;
} ssd_t;

/* one token's decay; NaN stays NaN */
ALWAYS float decay_of(float a, float floor) { return decays(splat(a), floor)[0]; }

ALWAYS int fits(float c) { return c >= FOLD_LOW && c <= FOLD_HIGH; }

/* Columns [c0, c0 + w) of head (b, h), w <= NV * LANES, all T tokens. R holds N rows of the strip (S^T). */
ALWAYS int ssd_strip(const ssd_t *j, int64_t b, int64_t h, int64_t c0, int64_t w, const int NV) {
    const int64_t P = j->P, N = j->N, H = j->H, T = j->T, W = NV * LANES;
    const int64_t tokp = H * P, tokn = H * N;
    const float *x = j->x + (b * T * H + h) * P + c0, *dt = j->dt + b * T * H + h;
    const float *Bm = j->Bm + (b * T * H + h) * N, *Cm = j->Cm + (b * T * H + h) * N;
    float *y = j->y + (b * T * H + h) * P + c0;
    float *S_io = j->S + (b * H + h) * P * N + c0 * N;
    const float A = j->A[h];
    const int64_t Nr = (N + LANES - 1) / LANES * LANES;
    float *R = floats(N * W + 4 * Nr);
    if (!R) return 1;
    float *b1 = R + N * W, *c1 = b1 + Nr, *b2 = c1 + Nr, *c2 = b2 + Nr;   /* per-row scalars of two tokens */
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < W; p++) R[n * W + p] = p < w ? S_io[p * N + n] : 0.f;
    const vf zero = splat(0.f);

    /* the per-row scalars of token t at scale ct: B_n / ct and C_n ct */
#define ROW_SCALARS(t, ct, bo, co)                                             \
    do {                                                                      \
        const vf inv = splat(1.f / (ct)), cs = splat(ct);                     \
        for (int64_t n = 0; n < Nr; n += LANES) {                             \
            store((bo) + n, load_upto(Bm + (t) * tokn + n, N - n) * inv);     \
            store((co) + n, load_upto(Cm + (t) * tokn + n, N - n) * cs);      \
        }                                                                     \
    } while (0)

    /* u_t = dt_t x_t on the strip's columns */
#define LOAD_U(t, u)                                                          \
    do {                                                                      \
        const vf dv = splat(dt[(t) * H]);                                     \
        UNROLL for (int v_ = 0; v_ < NV; v_++)                                \
            u[v_] = dv * load_upto(x + (t) * tokp + LANES * v_, w - LANES * v_); \
    } while (0)

#define STORE_Y(t, acc)                                                       \
    do {                                                                      \
        UNROLL for (int v_ = 0; v_ < NV; v_++)                                \
            store_upto(y + (t) * tokp + LANES * v_, acc[v_], w - LANES * v_); \
    } while (0)

    vf u[MAX_NV], u2[MAX_NV], acc[MAX_NV], acc2[MAX_NV];
    UNROLL for (int v_ = 0; v_ < NV; v_++) u2[v_] = zero;
    double L = 0.0;   /* log c, summed in double: decays within 1e-6 of 1 do not drift over 1e5 tokens */
    int64_t t = 0;
    while (t < T) {
        const int two = t + 1 < T;
        const float a1 = dt[t * H] * A, a2 = two ? dt[(t + 1) * H] * A : 0.f;
        const float d1 = decay_of(a1, j->floor), d2 = two ? decay_of(a2, j->floor) : 1.f;
        const float c = (float)exp(L), ca_ = (float)exp(L + a1), cb_ = (float)exp(L + a1 + a2);
        /* scaled: the decays only move c (two multiply-adds per element and token); direct, where c would
         * leave its range or a decay is 0 (below the floor) or not a number: c and the decays multiply R in
         * the pass (three), and c is 1 after it */
        const int scaled = two && d1 > 0.f && d2 > 0.f && fits(ca_) && fits(cb_);
        const float ca = scaled ? ca_ : 1.f, cb = scaled ? cb_ : 1.f;
        const vf f1 = splat(c * d1), f2 = splat(d2);
        ROW_SCALARS(t, ca, b1, c1);
        LOAD_U(t, u);
        if (two) {
            ROW_SCALARS(t + 1, cb, b2, c2);
            LOAD_U(t + 1, u2);
        }
        UNROLL for (int v_ = 0; v_ < NV; v_++) acc[v_] = acc2[v_] = zero;
        if (scaled) {
            for (int64_t n = 0; n < N; n++) {
                float *row = R + n * W;
                const vf p1 = splat(b1[n]), q1 = splat(c1[n]), p2 = splat(b2[n]), q2 = splat(c2[n]);
                UNROLL for (int v_ = 0; v_ < NV; v_++) {
                    vf s = load(row + LANES * v_) + p1 * u[v_];
                    acc[v_] += q1 * s;
                    s += p2 * u2[v_];
                    acc2[v_] += q2 * s;
                    store(row + LANES * v_, s);
                }
            }
        } else if (two) {
            for (int64_t n = 0; n < N; n++) {
                float *row = R + n * W;
                const vf p1 = splat(b1[n]), q1 = splat(c1[n]), p2 = splat(b2[n]), q2 = splat(c2[n]);
                UNROLL for (int v_ = 0; v_ < NV; v_++) {
                    vf s = load(row + LANES * v_) * f1 + p1 * u[v_];
                    acc[v_] += q1 * s;
                    s = s * f2 + p2 * u2[v_];
                    acc2[v_] += q2 * s;
                    store(row + LANES * v_, s);
                }
            }
        } else {   /* the last token alone, direct */
            for (int64_t n = 0; n < N; n++) {
                float *row = R + n * W;
                const vf p1 = splat(b1[n]), q1 = splat(c1[n]);
                UNROLL for (int v_ = 0; v_ < NV; v_++) {
                    const vf s = load(row + LANES * v_) * f1 + p1 * u[v_];
                    acc[v_] += q1 * s;
                    store(row + LANES * v_, s);
                }
            }
        }
        STORE_Y(t, acc);
        if (two) STORE_Y(t + 1, acc2);
        L = scaled ? L + (double)a1 + (double)a2 : 0.0;
        t += two ? 2 : 1;
    }
#undef ROW_SCALARS
#undef LOAD_U
#undef STORE_Y
    const float c_end = (float)exp(L);
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < w; p++) S_io[p * N + n] = R[n * W + p] * c_end;
    free(R);
    return 0;
}

static int ssd_run(const void *args, int64_t s) {
    const ssd_t *j = args;
    const strip_at_t a = strip_at(s, j->H, j->P, j->cols);
    const int64_t b = a.b, h = a.h, c0 = a.c0, w = a.w;
    if (w > 2 * LANES) return ssd_strip(j, b, h, c0, w, SSD_NV);
    if (w > LANES) return ssd_strip(j, b, h, c0, w, 2);
    return ssd_strip(j, b, h, c0, w, 1);
}

/* Returns 0, or 1 where memory for a strip could not be had. Shapes are the caller's to check. */
int ssd_forward(const float *x, const float *dt, const float *A, const float *Bm, const float *Cm, float *S,
                float *y, int64_t B, int64_t T, int64_t H, int64_t P, int64_t N, float floor, int64_t threads) {
    if (T <= 0 || B <= 0 || H <= 0 || P <= 0 || N <= 0) return 0;
    if (threads < 1) threads = 1;
    const int64_t cols = strip_columns(B * H, P, SSD_NV * LANES, threads);
    const ssd_t j = {x, dt, A, Bm, Cm, S, y, B, T, H, P, N, floor, cols};
    return run_strips(ssd_run, &j, B * H * strips_per_head(P, cols), threads, y,
                      (size_t)(B * T * H * P) * sizeof(float));
}
