/*
 * y = x · Wᵀ for a prefill's many rows of x, computed on integers: W's 4- and 6-bit
 * values exactly as a Q4_K or Q6_K block holds them, x quantized to int8 per group of
 * values sharing a scale in W (32 or 16), the products summed by AVX-512 VNNI
 * (vpdpbusd: 64 byte products an instruction, about twice the rate of a bfloat16 matmul
 * on this project's CPU).
 *
 * A matrix is first unpacked (rd_vnni_pack) into panels of 16 rows, four values of each
 * row side by side ([n/16][k/4][16][4] bytes), so that one 64-byte load feeds 16 rows'
 * sums and one broadcast of four of x's values feeds them all. Each group of values that
 * shares a scale (32 in Q4_K, 16 in Q6_K) is summed in int32, then scaled in float32;
 * what a group subtracts (Q4_K's minimum, Q6_K's offset of 32) is taken off once per
 * group from x's own sum. The result equals the dequantize-then-matmul product up to
 * x's quantization, as the decode step's kernels (ggml_dot.c) do.
 */
#include <stdlib.h>

#include "ggml_blocks.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define RD_HAS_VNNI 1
#else
#define RD_HAS_VNNI 0
#endif

int rd_parallel(void (*task)(const void *, int64_t), const void *ctx, int64_t total, int threads);

#define PANEL 16
#define TM 4 /* rows of x a tile computes at once */

/* 1 when this build has the VNNI GEMM, 0: rd_vnni_pack and rd_vnni_gemm refuse. */
int rd_vnni(void) { return RD_HAS_VNNI; }

/* The values sharing a scale in a type this GEMM takes; 0 for any other type. */
int rd_vnni_group(int type) { return type == T_Q4_K ? 32 : type == T_Q6_K ? 16 : 0; }

/* One row's unsigned values (k bytes), and per group its scale and what it subtracts
 * per unit of x's sum. */
static void unpack_row(int type, const uint8_t *w, int64_t k, uint8_t *q, float *s, float *mn) {
    for (int64_t i = 0; i < k / QKK; i++) {
        uint8_t *qi = q + i * QKK;
        if (type == T_Q4_K) {
            const uint8_t *b = w + i * 144, *ql = b + 16;
            float d = half_to_float(b), dmin = half_to_float(b + 2);
            for (int j = 0; j < 4; j++) {
                uint8_t s1, m1, s2, m2;
                scale_min(2 * j, b + 4, &s1, &m1);
                scale_min(2 * j + 1, b + 4, &s2, &m2);
                for (int l = 0; l < 32; l++) {
                    qi[64 * j + l] = ql[l] & 0xF;
                    qi[64 * j + 32 + l] = ql[l] >> 4;
                }
                ql += 32;
                s[8 * i + 2 * j] = d * s1;
                mn[8 * i + 2 * j] = dmin * m1;
                s[8 * i + 2 * j + 1] = d * s2;
                mn[8 * i + 2 * j + 1] = dmin * m2;
            }
        } else { /* T_Q6_K: value d·sc·(q − 32), a scale per 16 values */
            const uint8_t *b = w + i * 210, *ql = b, *qh = b + 128;
            const int8_t *sc = (const int8_t *)(b + 192);
            float d = half_to_float(b + 208);
            for (int h = 0; h < 2; h++) {
                uint8_t *y = qi + 128 * h;
                for (int l = 0; l < 32; l++) {
                    y[l] = (uint8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
                    y[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
                    y[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                    y[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                }
                ql += 64;
                qh += 32;
            }
            for (int g = 0; g < 16; g++) {
                s[16 * i + g] = d * sc[g];
                mn[16 * i + g] = 32.0f * d * sc[g];
            }
        }
    }
}

typedef struct {
    int type, group;
    const uint8_t *w;
    int64_t n, k, row_bytes;
    uint8_t *q;
    float *s, *mn;
} pack_t;

static void pack_panel(const void *ctx, int64_t p) {
    const pack_t *P = ctx;
    const int64_t k = P->k, groups = k / P->group;
    /* The panel's 16 rows unpacked first, then written in the panel's order: one pass
     * over the output instead of 16 passes of 4-byte pieces. */
    uint8_t *rows = malloc((size_t)(PANEL * k));
    float *s = malloc(sizeof(float) * (size_t)groups * 2);
    if (!rows || !s) abort(); /* ~150 KB: the caller's tensors hold the real memory */
    float *mn = s + groups;
    for (int r = 0; r < PANEL; r++) {
        unpack_row(P->type, P->w + (p * PANEL + r) * P->row_bytes, k, rows + r * k, s, mn);
        for (int64_t j = 0; j < groups; j++) {
            P->s[(p * groups + j) * PANEL + r] = s[j];
            P->mn[(p * groups + j) * PANEL + r] = mn[j];
        }
    }
    uint8_t *panel = P->q + p * k * PANEL;
    for (int64_t k4 = 0; k4 < k / 4; k4++)
        for (int r = 0; r < PANEL; r++) memcpy(panel + (k4 * PANEL + r) * 4, rows + r * k + 4 * k4, 4);
    free(rows);
    free(s);
}

/*
 * Rows [0, n) of W (GGML type `type`, rows row_bytes apart) unpacked for rd_vnni_gemm:
 * q (n·k bytes), s and mn ((n/16)·(k/g)·16 floats each, g = rd_vnni_group(type)).
 * Returns g, or -1 for a type, n or k not handled (or a build without VNNI).
 */
int rd_vnni_pack(int type, const uint8_t *w, int64_t n, int64_t k, int64_t row_bytes, uint8_t *q,
                 float *s, float *mn, int threads) {
    int group = rd_vnni_group(type);
    if (!RD_HAS_VNNI || group == 0 || n % PANEL != 0 || k % QKK != 0) return -1;
    pack_t P = {type, group, w, n, k, row_bytes, q, s, mn};
    if (rd_parallel(pack_panel, &P, n / PANEL, threads) != 0) return -1;
    return group;
}

#if RD_HAS_VNNI
typedef struct {
    int group;
    const uint8_t *q;
    const float *s, *mn;
    int64_t n, k, m, mp;
    const int8_t *xq;  /* mp × k */
    const float *xd;   /* mp × k/group: each group's scale */
    const float *xsum; /* mp × k/group: each group's sum of values, scaled */
    float *x;          /* the caller's activations (quantizing reads them) */
    float *y;
    int64_t ldy;
} gemm_t;

/* Rows [c·TM, c·TM + TM) of x quantized per group of values (the matrix's: a group's
 * sums are scaled once for both), with each group's sum of values, scaled. */
static void quantize_rows(const void *ctx, int64_t c) {
    const gemm_t *G = ctx;
    const int64_t k = G->k, g = G->group, groups = k / g;
    for (int64_t r = c * TM; r < c * TM + TM; r++) {
        int8_t *q = (int8_t *)G->xq + r * k;
        float *xd = (float *)G->xd + r * groups, *xs = (float *)G->xsum + r * groups;
        if (r >= G->m) { /* the padding of the last tile: zeros */
            memset(q, 0, (size_t)k);
            memset(xd, 0, sizeof(float) * (size_t)groups);
            memset(xs, 0, sizeof(float) * (size_t)groups);
            continue;
        }
        const float *x = G->x + r * k;
        for (int64_t j = 0; j < groups; j++) {
            const float *v = x + j * g;
            __m512 amax = _mm512_setzero_ps();
            for (int i = 0; i < g; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(v + i)));
            const float top = _mm512_reduce_max_ps(amax);
            const float d = top / 127.0f, id = top > 0.0f ? 127.0f / top : 0.0f;
            const __m512 scale = _mm512_set1_ps(id);
            __m512i sum = _mm512_setzero_si512();
            for (int i = 0; i < g; i += 16) {
                __m512i n = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(v + i), scale));
                sum = _mm512_add_epi32(sum, n);
                _mm_storeu_si128((__m128i *)(q + j * g + i), _mm512_cvtsepi32_epi8(n));
            }
            xd[j] = d;
            xs[j] = d * (float)_mm512_reduce_add_epi32(sum);
        }
    }
}

/* One group of G values (a compile-time 16 or 32: the loop unrolls and the sums stay in
 * registers): four rows of x (r0..r3, their int8 values) times panels w0 and w1, 16
 * int32 sums each, added into a00..a31. */
#define RD_GROUP_SUMS(G)                                                                      \
    do {                                                                                      \
        _Pragma("GCC unroll 8") for (int kk = 0; kk < (G); kk += 4) {                        \
            const __m512i x0 = _mm512_loadu_si512(w0 + kk * PANEL);                           \
            const __m512i x1 = _mm512_loadu_si512(w1 + kk * PANEL);                           \
            int32_t v0, v1, v2, v3;                                                           \
            memcpy(&v0, r0 + kk, 4);                                                          \
            memcpy(&v1, r1 + kk, 4);                                                          \
            memcpy(&v2, r2 + kk, 4);                                                          \
            memcpy(&v3, r3 + kk, 4);                                                          \
            const __m512i b0 = _mm512_set1_epi32(v0), b1 = _mm512_set1_epi32(v1);            \
            const __m512i b2 = _mm512_set1_epi32(v2), b3 = _mm512_set1_epi32(v3);            \
            a00 = _mm512_dpbusd_epi32(a00, x0, b0);                                           \
            a01 = _mm512_dpbusd_epi32(a01, x1, b0);                                           \
            a10 = _mm512_dpbusd_epi32(a10, x0, b1);                                           \
            a11 = _mm512_dpbusd_epi32(a11, x1, b1);                                           \
            a20 = _mm512_dpbusd_epi32(a20, x0, b2);                                           \
            a21 = _mm512_dpbusd_epi32(a21, x1, b2);                                           \
            a30 = _mm512_dpbusd_epi32(a30, x0, b3);                                           \
            a31 = _mm512_dpbusd_epi32(a31, x1, b3);                                           \
        }                                                                                     \
    } while (0)

/* Row t of the tile: the group's sums times the row's scale and x's, and the group's
 * subtraction (per unit of x's scaled sum) taken off. */
#define RD_GROUP_SCALE(t)                                                                     \
    do {                                                                                      \
        const __m512 xd = _mm512_set1_ps(xd##t[j]), xs = _mm512_set1_ps(xs##t[j]);           \
        f##t##0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a##t##0), _mm512_mul_ps(c0, xd), f##t##0); \
        f##t##1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a##t##1), _mm512_mul_ps(c1, xd), f##t##1); \
        f##t##0 = _mm512_fnmadd_ps(d0, xs, f##t##0);                                          \
        f##t##1 = _mm512_fnmadd_ps(d1, xs, f##t##1);                                          \
    } while (0)

#define RD_STORE(t)                                                                           \
    do {                                                                                      \
        if (m0 + t < m) {                                                                     \
            float *y = out + (m0 + t) * ldy;                                                  \
            _mm512_storeu_ps(y, f##t##0);                                                     \
            if (two) _mm512_storeu_ps(y + PANEL, f##t##1);                                    \
        }                                                                                     \
    } while (0)

/* Panels p and p + 1 (`two`; else p alone, computed twice and stored once) times every
 * tile of x, for groups of G values. */
#define RD_PANELS(NAME, G)                                                                    \
    static void NAME(const gemm_t *P, int64_t p, int two) {                                   \
        const int64_t k = P->k, groups = k / (G), m = P->m, ldy = P->ldy;                     \
        const uint8_t *const w0s = P->q + p * k * PANEL;                                      \
        const uint8_t *const w1s = two ? w0s + k * PANEL : w0s;                               \
        const float *s0 = P->s + p * groups * PANEL, *s1 = two ? s0 + groups * PANEL : s0;    \
        const float *n0 = P->mn + p * groups * PANEL, *n1 = two ? n0 + groups * PANEL : n0;   \
        float *const out = P->y + p * PANEL;                                                  \
        for (int64_t m0 = 0; m0 < P->mp; m0 += TM) {                                          \
            __m512 f00 = _mm512_setzero_ps(), f01 = f00, f10 = f00, f11 = f00, f20 = f00,     \
                   f21 = f00, f30 = f00, f31 = f00;                                           \
            const int8_t *r0 = P->xq + m0 * k, *r1 = r0 + k, *r2 = r1 + k, *r3 = r2 + k;      \
            const float *xs0 = P->xsum + m0 * groups, *xs1 = xs0 + groups,                    \
                        *xs2 = xs1 + groups, *xs3 = xs2 + groups;                             \
            const float *xd0 = P->xd + m0 * groups, *xd1 = xd0 + groups,                      \
                        *xd2 = xd1 + groups, *xd3 = xd2 + groups;                             \
            const uint8_t *w0 = w0s, *w1 = w1s;                                               \
            for (int64_t j = 0; j < groups; j++) {                                            \
                __m512i a00 = _mm512_setzero_si512(), a01 = a00, a10 = a00, a11 = a00,        \
                        a20 = a00, a21 = a00, a30 = a00, a31 = a00;                           \
                RD_GROUP_SUMS(G);                                                             \
                w0 += (G) * PANEL;                                                            \
                w1 += (G) * PANEL;                                                            \
                r0 += (G);                                                                    \
                r1 += (G);                                                                    \
                r2 += (G);                                                                    \
                r3 += (G);                                                                    \
                const __m512 c0 = _mm512_loadu_ps(s0 + j * PANEL);                            \
                const __m512 c1 = _mm512_loadu_ps(s1 + j * PANEL);                            \
                const __m512 d0 = _mm512_loadu_ps(n0 + j * PANEL);                            \
                const __m512 d1 = _mm512_loadu_ps(n1 + j * PANEL);                            \
                RD_GROUP_SCALE(0);                                                            \
                RD_GROUP_SCALE(1);                                                            \
                RD_GROUP_SCALE(2);                                                            \
                RD_GROUP_SCALE(3);                                                            \
            }                                                                                 \
            RD_STORE(0);                                                                      \
            RD_STORE(1);                                                                      \
            RD_STORE(2);                                                                      \
            RD_STORE(3);                                                                      \
        }                                                                                     \
    }

RD_PANELS(panels_32, 32)
RD_PANELS(panels_16, 16)

static void gemm_pair(const void *ctx, int64_t c) {
    const gemm_t *G = ctx;
    int64_t p = 2 * c, total = G->n / PANEL;
    if (G->group == 32) panels_32(G, p, p + 1 < total);
    else panels_16(G, p, p + 1 < total);
}
#endif

/*
 * y (m × n, rows ldy floats apart) = x (m × k float32, contiguous) · Wᵀ for W unpacked by
 * rd_vnni_pack (groups of g values). Returns 0, -1 for sizes not handled, -2 when out of
 * memory.
 */
int rd_vnni_gemm(int g, const uint8_t *q, const float *s, const float *mn, int64_t n, int64_t k,
                 const float *x, int64_t m, float *y, int64_t ldy, int threads) {
#if RD_HAS_VNNI
    if ((g != 16 && g != 32) || n % PANEL != 0 || k % QKK != 0 || m < 1) return -1;
    int64_t mp = (m + TM - 1) / TM * TM;
    int8_t *xq = aligned_alloc(64, (size_t)(mp * k + 64) / 64 * 64);
    float *xd = malloc(sizeof(float) * (size_t)(mp * (k / g)));
    float *xs = malloc(sizeof(float) * (size_t)(mp * (k / g)));
    if (!xq || !xd || !xs) {
        free(xq);
        free(xd);
        free(xs);
        return -2;
    }
    gemm_t G = {g, q, s, mn, n, k, m, mp, xq, xd, xs, (float *)x, y, ldy};
    int rc = rd_parallel(quantize_rows, &G, mp / TM, threads);
    if (rc == 0) rc = rd_parallel(gemm_pair, &G, (n / PANEL + 1) / 2, threads);
    free(xq);
    free(xd);
    free(xs);
    return rc;
#else
    (void)g, (void)q, (void)s, (void)mn, (void)n, (void)k, (void)x, (void)m, (void)y, (void)ldy,
        (void)threads;
    return -1;
#endif
}
