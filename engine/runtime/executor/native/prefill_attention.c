/*
 * A prefill's attention: T new queries of each row over its past + T keys, causal, with
 * the row's left padding masked, computed in float32 a block of queries against a block
 * of keys at a time with the running softmax of FlashAttention (Dao et al., 2022).
 *
 * Part of RAGDoll (engine/runtime/executor/prefill_attention.py calls it). Torch's CPU
 * scaled_dot_product_attention ran the real 1.5B's 1,505-token prefill at about 120
 * GFLOP/s on 2 cores, a fifth of the prefill; here a task is one row's KV head and 64
 * queries: the block of keys is transposed once for all the query heads of its group,
 * the scores of 4 queries × 64 keys are 16 registers of multiply-adds, and each value
 * row is added into 2 queries' outputs held in registers.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

int rd_parallel(void (*task)(const void *, int64_t), const void *ctx, int64_t total, int threads);

#define QB 64 /* queries a task */
#define KB 64 /* keys a block */

typedef struct {
    const float *q;   /* (B, heads, T, d) */
    const float *kc, *vc; /* row r, KV head g, position j: r*kv_row + g*kv_stride + j*d */
    const uint8_t *keymask; /* (B, past + T): 0 at a row's padding, or NULL: none */
    int64_t rows, heads, kv_heads, T, past, d, kv_row, kv_stride, qblocks;
    float scale;
    float *out; /* (B, T, heads, d) */
    _Atomic int failed;
} pa_job;

#if defined(__AVX512F__)
/* e^x for 16 floats, 0 below -87.3 (the masked scores are -inf): Cephes' polynomial on
 * x = n·ln2 + r, about 1e-7 relative, as expf. */
static inline __m512 exp16(__m512 x) {
    __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(~under, p, _mm512_castsi512_ps(e));
}

/* S[i][0..KB) = scale · q_i · kt[·][0..KB) for `count` (1 or 4) queries q_i d apart. */
static inline __attribute__((always_inline)) void scores_rows(const float *q, int64_t d,
                                                              const float *kt, float *s,
                                                              __m512 scale, const int count) {
    __m512 acc[4][4];
    for (int r = 0; r < count; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t x = 0; x < d; x++) {
        const float *k = kt + x * KB;
        __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16), k2 = _mm512_loadu_ps(k + 32),
               k3 = _mm512_loadu_ps(k + 48);
        for (int r = 0; r < count; r++) {
            __m512 a = _mm512_set1_ps(q[r * d + x]);
            acc[r][0] = _mm512_fmadd_ps(a, k0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, k1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(a, k2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(a, k3, acc[r][3]);
        }
    }
    for (int r = 0; r < count; r++)
        for (int c = 0; c < 4; c++) _mm512_storeu_ps(s + r * KB + 16 * c, _mm512_mul_ps(acc[r][c], scale));
}

/* o_i = alpha_i · o_i + Σ_k p_i[k] · v_k for `count` (1 or 2) queries, D = d / 16 ≤ 8. */
static inline __attribute__((always_inline)) void add_values(float *o, int64_t d, const float *p,
                                                             const float *v, int64_t nk,
                                                             const float *alpha, const int count,
                                                             const int D) {
    __m512 acc[2][8];
    for (int r = 0; r < count; r++) {
        __m512 a = _mm512_set1_ps(alpha[r]);
        for (int t = 0; t < D; t++) acc[r][t] = _mm512_mul_ps(a, _mm512_loadu_ps(o + r * d + 16 * t));
    }
    for (int64_t k = 0; k < nk; k++) {
        const float *vk = v + k * d;
        __m512 w0 = _mm512_set1_ps(p[k]), w1 = count > 1 ? _mm512_set1_ps(p[KB + k]) : w0;
        for (int t = 0; t < D; t++) {
            __m512 x = _mm512_loadu_ps(vk + 16 * t);
            acc[0][t] = _mm512_fmadd_ps(w0, x, acc[0][t]);
            if (count > 1) acc[1][t] = _mm512_fmadd_ps(w1, x, acc[1][t]);
        }
    }
    for (int r = 0; r < count; r++)
        for (int t = 0; t < D; t++) _mm512_storeu_ps(o + r * d + 16 * t, acc[r][t]);
}

static void add_values_d(float *o, int64_t d, const float *p, const float *v, int64_t nk,
                         const float *alpha, int count) {
    if (d == 128) {
        if (count == 2) add_values(o, d, p, v, nk, alpha, 2, 8);
        else add_values(o, d, p, v, nk, alpha, 1, 8);
    } else if (d == 64) {
        if (count == 2) add_values(o, d, p, v, nk, alpha, 2, 4);
        else add_values(o, d, p, v, nk, alpha, 1, 4);
    } else {
        if (count == 2) add_values(o, d, p, v, nk, alpha, 2, 6);
        else add_values(o, d, p, v, nk, alpha, 1, 6);
    }
}

static void pa_task(const void *ctx, int64_t c) {
    const pa_job *J = ctx;
    int64_t qb = c % J->qblocks, g = (c / J->qblocks) % J->kv_heads, b = c / (J->qblocks * J->kv_heads);
    int64_t d = J->d, T = J->T, past = J->past, S = past + T;
    int64_t group = J->heads / J->kv_heads;
    int64_t t0 = qb * QB, mq = T - t0 < QB ? T - t0 : QB;
    size_t floats = (size_t)(d * KB + QB * KB + group * QB * d + 2 * group * QB + QB);
    float *mem = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!mem) {
        atomic_store(&((pa_job *)J)->failed, 1);
        return;
    }
    float *kt = mem, *s = kt + d * KB, *o = s + QB * KB, *m = o + group * QB * d, *l = m + group * QB,
          *alpha = l + group * QB;
    memset(o, 0, sizeof(float) * group * QB * d);
    for (int64_t i = 0; i < group * QB; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    const float *kc = J->kc + b * J->kv_row + g * J->kv_stride;
    const float *vc = J->vc + b * J->kv_row + g * J->kv_stride;
    const uint8_t *keys = J->keymask ? J->keymask + b * S : NULL;
    const __m512 scale = _mm512_set1_ps(J->scale);
    int64_t last = past + t0 + mq - 1; /* the last key any query of the block sees */
    for (int64_t j0 = 0; j0 <= last; j0 += KB) {
        int64_t nk = last + 1 - j0 < KB ? last + 1 - j0 : KB;
        for (int64_t x = 0; x < d; x++)
            for (int64_t k = 0; k < KB; k++) kt[x * KB + k] = k < nk ? kc[(j0 + k) * d + x] : 0.0f;
        /* a query at position p sees keys j <= p that are not padding, and itself */
        int masked = keys != NULL || j0 + nk - 1 > past + t0;
        for (int64_t h = 0; h < group; h++) {
            const float *q = J->q + ((b * J->heads + g * group + h) * T + t0) * d;
            float *oh = o + h * QB * d, *mh = m + h * QB, *lh = l + h * QB;
            int64_t i = 0;
            for (; i + 4 <= mq; i += 4) scores_rows(q + i * d, d, kt, s + i * KB, scale, 4);
            for (; i < mq; i++) scores_rows(q + i * d, d, kt, s + i * KB, scale, 1);
            for (i = 0; i < mq; i++) {
                float *si = s + i * KB;
                int64_t p = past + t0 + i;
                if (masked)
                    for (int64_t k = 0; k < KB; k++) {
                        int64_t j = j0 + k;
                        if (k >= nk || j > p || (keys && !keys[j] && j != p)) si[k] = -INFINITY;
                    }
                else
                    for (int64_t k = nk; k < KB; k++) si[k] = -INFINITY;
                float top = _mm512_reduce_max_ps(_mm512_max_ps(
                    _mm512_max_ps(_mm512_loadu_ps(si), _mm512_loadu_ps(si + 16)),
                    _mm512_max_ps(_mm512_loadu_ps(si + 32), _mm512_loadu_ps(si + 48))));
                float now = top > mh[i] ? top : mh[i];
                if (now == -INFINITY) { /* nothing seen yet: no weight, no change */
                    alpha[i] = 1.0f;
                    memset(si, 0, sizeof(float) * KB);
                    continue;
                }
                alpha[i] = mh[i] == -INFINITY ? 0.0f : expf(mh[i] - now);
                __m512 shift = _mm512_set1_ps(now), sum = _mm512_setzero_ps();
                for (int64_t k = 0; k < KB; k += 16) {
                    __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(si + k), shift));
                    _mm512_storeu_ps(si + k, e);
                    sum = _mm512_add_ps(sum, e);
                }
                lh[i] = lh[i] * alpha[i] + _mm512_reduce_add_ps(sum);
                mh[i] = now;
            }
            const float *v = vc + j0 * d;
            for (i = 0; i + 2 <= mq; i += 2)
                add_values_d(oh + i * d, d, s + i * KB, v, nk, alpha + i, 2);
            for (; i < mq; i++) add_values_d(oh + i * d, d, s + i * KB, v, nk, alpha + i, 1);
        }
    }
    for (int64_t h = 0; h < group; h++)
        for (int64_t i = 0; i < mq; i++) {
            float inv = 1.0f / l[h * QB + i];
            const float *src = o + (h * QB + i) * d;
            float *dst = J->out + ((b * T + t0 + i) * J->heads + g * group + h) * d;
            for (int64_t x = 0; x < d; x++) dst[x] = src[x] * inv;
        }
    free(mem);
}
#endif

/* 1 where this build has the kernel (AVX-512), 0: the caller uses torch's attention. */
int rd_prefill_attention_built(void) {
#if defined(__AVX512F__)
    return 1;
#else
    return 0;
#endif
}

/* out (rows, T, heads, d) = softmax(scale · q kᵀ) v for each row's T queries at positions
 * past .. past + T - 1 over its keys 0 .. past + T - 1 (see pa_job for the layouts);
 * d a multiple of 16 up to 128, heads a multiple of kv_heads. Returns 0, -1 for a shape
 * not handled, -2 for want of memory. */
int rd_prefill_attention(const float *q, const float *kc, const float *vc, int64_t kv_row,
                         int64_t kv_stride, const uint8_t *keymask, int64_t rows, int64_t heads,
                         int64_t kv_heads, int64_t T, int64_t past, int64_t d, float scale,
                         float *out, int threads) {
#if defined(__AVX512F__)
    if (rows < 1 || T < 1 || past < 0 || kv_heads < 1 || heads % kv_heads != 0 || d % 16 != 0 ||
        d > 128 || (d != 128 && d != 64 && d != 96))
        return -1;
    pa_job job = {.q = q, .kc = kc, .vc = vc, .keymask = keymask, .rows = rows, .heads = heads,
                  .kv_heads = kv_heads, .T = T, .past = past, .d = d, .kv_row = kv_row,
                  .kv_stride = kv_stride, .qblocks = (T + QB - 1) / QB, .scale = scale, .out = out,
                  .failed = 0};
    if (rd_parallel(pa_task, &job, rows * kv_heads * job.qblocks, threads) != 0) return -1;
    return job.failed ? -2 : 0;
#else
    (void)q, (void)kc, (void)vc, (void)kv_row, (void)kv_stride, (void)keymask, (void)rows;
    (void)heads, (void)kv_heads, (void)T, (void)past, (void)d, (void)scale, (void)out, (void)threads;
    return -1;
#endif
}
