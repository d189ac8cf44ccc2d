/*
 * y = x · Wᵀ for a matrix W held as GGML blocks exactly as a GGUF file stores them.
 *
 * Part of RAGDoll (engine/executor/ggml_native.py builds and loads it). The block
 * layouts and the way activations are quantized before a dot product (per 256 values
 * with 16-value sums for the K-quants, per 32 values for the legacy types) follow
 * ggml's (llama.cpp, MIT licence, Copyright (c) 2023-2024 The ggml authors):
 *
 *   Permission is hereby granted, free of charge, to any person obtaining a copy of
 *   this software and associated documentation files (the "Software"), to deal in the
 *   Software without restriction, including without limitation the rights to use,
 *   copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the
 *   Software, and to permit persons to whom the Software is furnished to do so,
 *   subject to the following conditions: The above copyright notice and this
 *   permission notice shall be included in all copies or substantial portions of the
 *   Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.
 *
 * Rows of W are shared among a pool of threads in chunks taken from one atomic counter,
 * and the caller waits for the chunks to be done, not for the threads to arrive: a
 * thread the OS deschedules (two cores shared with other programs) delays only a chunk
 * it holds, and one that wakes late finds no work and goes back to sleep. A static
 * split with a barrier (OpenMP's parallel for) waits for the slowest thread instead.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ggml_blocks.h"

/* Activations quantized per 256 values (K-quants): the bsums are the sums of each 16. */
typedef struct { float d; int16_t bsums[16]; int8_t qs[QKK]; } act_k;
/* Activations quantized per 32 values (legacy types): `sum` is the sum of qs. */
typedef struct { float d; int32_t sum; int8_t qs[QK]; } act_32;

/* Values per block and bytes per block of a type; 0 when not handled here. */
static int block_of(int type, int *values) {
    switch (type) {
    case T_Q4_0: *values = QK; return 18;
    case T_Q4_1: *values = QK; return 20;
    case T_Q5_0: *values = QK; return 22;
    case T_Q5_1: *values = QK; return 24;
    case T_Q8_0: *values = QK; return 34;
    case T_Q4_K: *values = QKK; return 144;
    case T_Q5_K: *values = QKK; return 176;
    case T_Q6_K: *values = QKK; return 210;
    default: *values = 0; return 0;
    }
}

/* One row of `k` values decoded to float32. */
static void decode_row(int type, const uint8_t *w, int64_t k, float *out) {
    int per;
    int size = block_of(type, &per);
    int64_t nb = k / per;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w + i * size;
        float *y = out + i * per;
        switch (type) {
        case T_Q4_0: {
            float d = half_to_float(b);
            for (int j = 0; j < 16; j++) {
                y[j] = ((b[2 + j] & 0xF) - 8) * d;
                y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
            }
            break;
        }
        case T_Q4_1: {
            float d = half_to_float(b), m = half_to_float(b + 2);
            for (int j = 0; j < 16; j++) {
                y[j] = (b[4 + j] & 0xF) * d + m;
                y[j + 16] = (b[4 + j] >> 4) * d + m;
            }
            break;
        }
        case T_Q5_0:
        case T_Q5_1: {
            int one = type == T_Q5_1;
            float d = half_to_float(b), m = one ? half_to_float(b + 2) : 0.0f;
            uint32_t qh;
            memcpy(&qh, b + (one ? 4 : 2), 4);
            const uint8_t *qs = b + (one ? 8 : 6);
            for (int j = 0; j < 16; j++) {
                int lo = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
                int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
                y[j] = one ? lo * d + m : (lo - 16) * d;
                y[j + 16] = one ? hi * d + m : (hi - 16) * d;
            }
            break;
        }
        case T_Q8_0: {
            float d = half_to_float(b);
            const int8_t *qs = (const int8_t *)(b + 2);
            for (int j = 0; j < QK; j++) y[j] = qs[j] * d;
            break;
        }
        case T_Q4_K:
        case T_Q5_K: {
            int five = type == T_Q5_K;
            float d = half_to_float(b), dmin = half_to_float(b + 2);
            const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + (five ? 48 : 16);
            for (int j = 0; j < 4; j++) {
                uint8_t s1, m1, s2, m2;
                scale_min(2 * j, scales, &s1, &m1);
                scale_min(2 * j + 1, scales, &s2, &m2);
                float d1 = d * s1, c1 = dmin * m1, d2 = d * s2, c2 = dmin * m2;
                for (int l = 0; l < 32; l++) {
                    int lo = ql[l] & 0xF, hi = ql[l] >> 4;
                    if (five) {
                        lo += ((qh[l] >> (2 * j)) & 1) << 4;
                        hi += ((qh[l] >> (2 * j + 1)) & 1) << 4;
                    }
                    y[64 * j + l] = d1 * lo - c1;
                    y[64 * j + 32 + l] = d2 * hi - c2;
                }
                ql += 32;
            }
            break;
        }
        case T_Q6_K: {
            const uint8_t *ql = b, *qh = b + 128;
            const int8_t *sc = (const int8_t *)(b + 192);
            float d = half_to_float(b + 208);
            for (int n = 0; n < 2; n++) {
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = d * sc[is] * q1;
                    y[l + 32] = d * sc[is + 2] * q2;
                    y[l + 64] = d * sc[is + 4] * q3;
                    y[l + 96] = d * sc[is + 6] * q4;
                }
                y += 128;
                ql += 64;
                qh += 32;
                sc += 8;
            }
            break;
        }
        }
    }
}

static void quantize_k(const float *x, int64_t k, act_k *out) {
    for (int64_t i = 0; i < k / QKK; i++) {
        const float *v = x + i * QKK;
#if defined(__AVX512F__) && defined(__AVX512BW__)
        /* The arithmetic of the loop below 16 values at a time: a decode step quantizes
         * each layer's activations on the calling thread while the pool waits. */
        __m512 top = _mm512_setzero_ps();
        for (int j = 0; j < QKK; j += 16) top = _mm512_max_ps(top, _mm512_abs_ps(_mm512_loadu_ps(v + j)));
        float amax = _mm512_reduce_max_ps(top);
        float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        out[i].d = d;
        const __m512 scale = _mm512_set1_ps(id);
        const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
        for (int g = 0; g < 16; g++) {
            /* rounds to nearest even, as lrintf in the default rounding mode */
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(v + 16 * g), scale));
            q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
            _mm_storeu_si128((__m128i *)(out[i].qs + 16 * g), _mm512_cvtepi32_epi8(q));
            out[i].bsums[g] = (int16_t)_mm512_reduce_add_epi32(q);
        }
#else
        float amax = 0.0f;
        for (int j = 0; j < QKK; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        out[i].d = d;
        for (int j = 0; j < QKK; j++) {
            int q = (int)lrintf(v[j] * id);
            out[i].qs[j] = (int8_t)(q > 127 ? 127 : (q < -127 ? -127 : q));
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += out[i].qs[16 * g + j];
            out[i].bsums[g] = (int16_t)s;
        }
#endif
    }
}

static void quantize_32(const float *x, int64_t k, act_32 *out) {
    for (int64_t i = 0; i < k / QK; i++) {
        const float *v = x + i * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int s = 0;
        for (int j = 0; j < QK; j++) {
            int q = (int)lrintf(v[j] * id);
            q = q > 127 ? 127 : (q < -127 ? -127 : q);
            out[i].qs[j] = (int8_t)q;
            s += q;
        }
        out[i].d = d;
        out[i].sum = s;
    }
}

#if defined(__AVX2__)
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sums of 4 products each of unsigned bytes u and signed bytes s: 8 int32. */
static inline __m256i dot_us(__m256i u, __m256i s) {
#if defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* u·s in pairs (int16, no saturation for |u| < 64 or u < 16 as used here) times a
 * scale per 16 bytes (lo for bytes 0..15, hi for 16..31): 8 int32. */
static inline __m256i dot_scaled(__m256i u, __m256i s, int16_t lo, int16_t hi) {
    __m256i scale = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale);
}

/* 32 bytes, 0xFF where bit i of x is set, 0 elsewhere. */
static inline __m256i bits_to_bytes(uint32_t x) {
    const __m256i pick = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                            0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), pick);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

/* The eight six-bit scales and minimums of a Q4_K/Q5_K block's 12 bytes, four at a time
 * (scale_min's arithmetic on 32-bit words). */
static inline void unpack_scales(const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    uint32_t w[3], out[4];
    memcpy(w, q, 12);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, top2 = 0x03030303u;
    out[0] = w[0] & low6;                                     /* scales 0..3 */
    out[1] = (w[2] & low4) | (((w[0] >> 6) & top2) << 4);     /* scales 4..7 */
    out[2] = w[1] & low6;                                     /* mins 0..3 */
    out[3] = ((w[2] >> 4) & low4) | (((w[1] >> 6) & top2) << 4); /* mins 4..7 */
    memcpy(sc, out, 8);
    memcpy(mn, out + 2, 8);
}

/* Σ_j mn[j] · (bsums[2j] + bsums[2j+1]). */
static inline int32_t mins_dot(const uint8_t *mn, const int16_t *bsums) {
    __m128i sums = _mm_loadu_si128((const __m128i *)bsums);
    __m128i sums2 = _mm_loadu_si128((const __m128i *)(bsums + 8));
    __m128i pairs = _mm_hadd_epi16(sums, sums2); /* 8 sums of 32 */
    __m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn));
    __m128i prod = _mm_madd_epi16(pairs, m); /* 4 int32 */
    prod = _mm_add_epi32(prod, _mm_shuffle_epi32(prod, 0x4E));
    prod = _mm_add_epi32(prod, _mm_shuffle_epi32(prod, 0xB1));
    return _mm_cvtsi128_si32(prod);
}

static float dot_q4_k(const uint8_t *w, const act_k *y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w + i * 144;
        float d = half_to_float(b) * y[i].d, dmin = half_to_float(b + 2) * y[i].d;
        uint8_t sc[8], mn[8];
        unpack_scales(b + 4, sc, mn);
        mins += dmin * (float)mins_dot(mn, y[i].bsums);
        const uint8_t *q = b + 16;
        const int8_t *yq = y[i].qs;
        __m256i sum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i packed = _mm256_loadu_si256((const __m256i *)(q + 32 * j));
            __m256i lo = _mm256_and_si256(packed, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), m4);
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(yq + 64 * j));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(yq + 64 * j + 32));
            sum = _mm256_add_epi32(sum, dot_scaled(lo, y0, sc[2 * j], sc[2 * j]));
            sum = _mm256_add_epi32(sum, dot_scaled(hi, y1, sc[2 * j + 1], sc[2 * j + 1]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum(acc) - mins;
}

static float dot_q5_k(const uint8_t *w, const act_k *y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m16 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w + i * 176;
        float d = half_to_float(b) * y[i].d, dmin = half_to_float(b + 2) * y[i].d;
        uint8_t sc[8], mn[8];
        unpack_scales(b + 4, sc, mn);
        mins += dmin * (float)mins_dot(mn, y[i].bsums);
        __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
        const uint8_t *q = b + 48;
        const int8_t *yq = y[i].qs;
        __m256i sum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i packed = _mm256_loadu_si256((const __m256i *)(q + 32 * j));
            __m256i bl = _mm256_set1_epi8((char)(1 << (2 * j)));
            __m256i bh = _mm256_set1_epi8((char)(2 << (2 * j)));
            __m256i lo = _mm256_or_si256(
                _mm256_and_si256(packed, m4),
                _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), m16));
            __m256i hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(packed, 4), m4),
                _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), m16));
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(yq + 64 * j));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(yq + 64 * j + 32));
            sum = _mm256_add_epi32(sum, dot_scaled(lo, y0, sc[2 * j], sc[2 * j]));
            sum = _mm256_add_epi32(sum, dot_scaled(hi, y1, sc[2 * j + 1], sc[2 * j + 1]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum(acc) - mins;
}

static float dot_q6_k(const uint8_t *w, const act_k *y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    float offsets = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = w + i * 210, *qh = ql + 128;
        const int8_t *sc = (const int8_t *)(ql + 192);
        float d = half_to_float(ql + 208) * y[i].d;
        /* The stored integers are q + 32: their sum against y, less 32 times each
         * group's scale times the group's sum. */
        __m256i prod = _mm256_madd_epi16(
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc)),
            _mm256_loadu_si256((const __m256i *)y[i].bsums));
        __m128i half = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
        half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4E));
        half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0xB1));
        offsets += d * 32.0f * (float)_mm_cvtsi128_si32(half);
        const int8_t *yq = y[i].qs;
        __m256i sum = _mm256_setzero_si256();
        for (int n = 0; n < 2; n++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(ql + 64 * n));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 64 * n + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)(qh + 32 * n));
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                         _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                         _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                         _mm256_and_si256(h, m30));
            __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                         _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
            const int8_t *yy = yq + 128 * n;
            const int8_t *s = sc + 8 * n;
            sum = _mm256_add_epi32(sum, dot_scaled(q1, _mm256_loadu_si256((const __m256i *)yy), s[0], s[1]));
            sum = _mm256_add_epi32(sum, dot_scaled(q2, _mm256_loadu_si256((const __m256i *)(yy + 32)), s[2], s[3]));
            sum = _mm256_add_epi32(sum, dot_scaled(q3, _mm256_loadu_si256((const __m256i *)(yy + 64)), s[4], s[5]));
            sum = _mm256_add_epi32(sum, dot_scaled(q4, _mm256_loadu_si256((const __m256i *)(yy + 96)), s[6], s[7]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum(acc) - offsets;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
/* The K-quants' dot products on 512-bit vectors, where a decode step's time goes: with
 * 256-bit vectors a Q4_K row ran at 22-26 GB/s on 2 cores (compute-bound: each 32
 * values built its scale from scalars), where Q6_K's lm_head read 39 GB/s. Here each
 * 64 values are one unsigned-by-signed byte product (vpmaddubsw) and one int16
 * multiply-add by their sub-blocks' scales (vpdpwssd), the scales spread once a block
 * from one register. */
#define RD_K512 1
#define ROWS_512 4 /* activation rows a call of the many-row kernels takes */

static float dot_q4_k_512(const uint8_t *w, const act_k *y, int64_t nb) {
    const __m512i m4 = _mm512_set1_epi8(0xF);
    /* for sub-blocks (2j, 2j+1): the permutation that spreads their two scales */
    const __m512i idx[4] = {
        _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(1), 1),
        _mm512_inserti64x4(_mm512_set1_epi16(2), _mm256_set1_epi16(3), 1),
        _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(5), 1),
        _mm512_inserti64x4(_mm512_set1_epi16(6), _mm256_set1_epi16(7), 1),
    };
    __m512 acc = _mm512_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w + i * 144;
        float d = half_to_float(b) * y[i].d, dmin = half_to_float(b + 2) * y[i].d;
        uint8_t sc[8], mn[8];
        unpack_scales(b + 4, sc, mn);
        mins += dmin * (float)mins_dot(mn, y[i].bsums);
        __m512i s16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
        const uint8_t *q = b + 16;
        const int8_t *yq = y[i].qs;
        __m512i sum = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            /* 32 bytes: low nibbles are values 64j..64j+31, high ones the next 32 */
            __m256i packed = _mm256_loadu_si256((const __m256i *)(q + 32 * j));
            __m512i both = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(packed), _mm256_srli_epi16(packed, 4), 1),
                m4);
            __m512i prod = _mm512_maddubs_epi16(both, _mm512_loadu_si512((const void *)(yq + 64 * j)));
            sum = _mm512_dpwssd_epi32(sum, prod, _mm512_permutexvar_epi16(idx[j], s16));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sum), acc);
    }
    return _mm512_reduce_add_ps(acc) - mins;
}

static float dot_q6_k_512(const uint8_t *w, const act_k *y, int64_t nb) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    /* values 64h..64h+63 of a half n: sub-blocks 8n + 4h .. + 3, a 128-bit lane each */
    const __m512i idx[4] = {
        _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                         0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0),
        _mm512_set_epi64(0x0007000700070007LL, 0x0007000700070007LL, 0x0006000600060006LL,
                         0x0006000600060006LL, 0x0005000500050005LL, 0x0005000500050005LL,
                         0x0004000400040004LL, 0x0004000400040004LL),
        _mm512_set_epi64(0x000B000B000B000BLL, 0x000B000B000B000BLL, 0x000A000A000A000ALL,
                         0x000A000A000A000ALL, 0x0009000900090009LL, 0x0009000900090009LL,
                         0x0008000800080008LL, 0x0008000800080008LL),
        _mm512_set_epi64(0x000F000F000F000FLL, 0x000F000F000F000FLL, 0x000E000E000E000ELL,
                         0x000E000E000E000ELL, 0x000D000D000D000DLL, 0x000D000D000D000DLL,
                         0x000C000C000C000CLL, 0x000C000C000C000CLL),
    };
    __m512 acc = _mm512_setzero_ps();
    float offsets = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = w + i * 210, *qh = ql + 128;
        const int8_t *sc = (const int8_t *)(ql + 192);
        float d = half_to_float(ql + 208) * y[i].d;
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        __m256i prod16 = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[i].bsums));
        __m128i half = _mm_add_epi32(_mm256_castsi256_si128(prod16), _mm256_extracti128_si256(prod16, 1));
        half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4E));
        half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0xB1));
        offsets += d * 32.0f * (float)_mm_cvtsi128_si32(half);
        __m512i s16 = _mm512_castsi256_si512(sc16);
        const int8_t *yq = y[i].qs;
        __m512i sum = _mm512_setzero_si512();
        for (int n = 0; n < 2; n++) {
            /* low nibbles of the 64 bytes are values 0..63 of this half, high ones 64..127;
             * the two top bits of value v are bits 2(v/32 % 4) of qh[v % 32] */
            __m512i l = _mm512_loadu_si512((const void *)(ql + 64 * n));
            __m256i h = _mm256_loadu_si256((const __m256i *)(qh + 32 * n));
            __m512i hlo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(h, 4)),
                                             _mm256_slli_epi16(h, 2), 1);
            __m512i hhi = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
            __m512i lo = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(hlo, m30));
            __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                         _mm512_and_si512(hhi, m30));
            const int8_t *yy = yq + 128 * n;
            __m512i p0 = _mm512_maddubs_epi16(lo, _mm512_loadu_si512((const void *)yy));
            __m512i p1 = _mm512_maddubs_epi16(hi, _mm512_loadu_si512((const void *)(yy + 64)));
            sum = _mm512_dpwssd_epi32(sum, p0, _mm512_permutexvar_epi16(idx[2 * n], s16));
            sum = _mm512_dpwssd_epi32(sum, p1, _mm512_permutexvar_epi16(idx[2 * n + 1], s16));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sum), acc);
    }
    return _mm512_reduce_add_ps(acc) - offsets;
}

/* The same dot products for R rows of activations (a batch's decode step) at once: a
 * block's values and scales are unpacked once and each row takes its two byte
 * products from them, where R calls of the one-row kernels unpacked them R times
 * (at 4 rows the unpacking was most of a row's instructions). R is a constant of each
 * call (rows_512), so the accumulators stay in registers. The one-row kernels above stay
 * their own: as these at R = 1 (the same sums, to the bit) a decode step of one row took
 * 1.13x as long (39.1 against 34.6 ms, the real 1.5B, load 1.3), their unpacking no
 * longer interleaved with the products. */
static inline __attribute__((always_inline)) void q4_k_rows_512(const uint8_t *w, const act_k *y,
                                                                int64_t nb, const int R, float *v) {
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const __m512i idx[4] = {
        _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(1), 1),
        _mm512_inserti64x4(_mm512_set1_epi16(2), _mm256_set1_epi16(3), 1),
        _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(5), 1),
        _mm512_inserti64x4(_mm512_set1_epi16(6), _mm256_set1_epi16(7), 1),
    };
    __m512 acc[ROWS_512];
    float mins[ROWS_512];
    for (int r = 0; r < R; r++) {
        acc[r] = _mm512_setzero_ps();
        mins[r] = 0.0f;
    }
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w + i * 144;
        float d = half_to_float(b), dmin = half_to_float(b + 2);
        uint8_t sc[8], mn[8];
        unpack_scales(b + 4, sc, mn);
        __m512i s16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
        __m512i both[4], scales[4];
        for (int j = 0; j < 4; j++) {
            __m256i packed = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));
            both[j] = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(packed), _mm256_srli_epi16(packed, 4), 1),
                m4);
            scales[j] = _mm512_permutexvar_epi16(idx[j], s16);
        }
        for (int r = 0; r < R; r++) {
            const act_k *yr = y + r * nb + i;
            __m512i sum = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++)
                sum = _mm512_dpwssd_epi32(
                    sum, _mm512_maddubs_epi16(both[j], _mm512_loadu_si512((const void *)(yr->qs + 64 * j))),
                    scales[j]);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(d * yr->d), _mm512_cvtepi32_ps(sum), acc[r]);
            mins[r] += dmin * yr->d * (float)mins_dot(mn, yr->bsums);
        }
    }
    for (int r = 0; r < R; r++) v[r] = _mm512_reduce_add_ps(acc[r]) - mins[r];
}

static inline __attribute__((always_inline)) void q6_k_rows_512(const uint8_t *w, const act_k *y,
                                                                int64_t nb, const int R, float *v) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    const __m512i idx[4] = {
        _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                         0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0),
        _mm512_set_epi64(0x0007000700070007LL, 0x0007000700070007LL, 0x0006000600060006LL,
                         0x0006000600060006LL, 0x0005000500050005LL, 0x0005000500050005LL,
                         0x0004000400040004LL, 0x0004000400040004LL),
        _mm512_set_epi64(0x000B000B000B000BLL, 0x000B000B000B000BLL, 0x000A000A000A000ALL,
                         0x000A000A000A000ALL, 0x0009000900090009LL, 0x0009000900090009LL,
                         0x0008000800080008LL, 0x0008000800080008LL),
        _mm512_set_epi64(0x000F000F000F000FLL, 0x000F000F000F000FLL, 0x000E000E000E000ELL,
                         0x000E000E000E000ELL, 0x000D000D000D000DLL, 0x000D000D000D000DLL,
                         0x000C000C000C000CLL, 0x000C000C000C000CLL),
    };
    __m512 acc[ROWS_512];
    float offsets[ROWS_512];
    for (int r = 0; r < R; r++) {
        acc[r] = _mm512_setzero_ps();
        offsets[r] = 0.0f;
    }
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = w + i * 210, *qh = ql + 128;
        const int8_t *sc = (const int8_t *)(ql + 192);
        float d = half_to_float(ql + 208);
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        __m512i s16 = _mm512_castsi256_si512(sc16);
        __m512i vals[4], scales[4];
        for (int n = 0; n < 2; n++) {
            __m512i l = _mm512_loadu_si512((const void *)(ql + 64 * n));
            __m256i h = _mm256_loadu_si256((const __m256i *)(qh + 32 * n));
            __m512i hlo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(h, 4)),
                                             _mm256_slli_epi16(h, 2), 1);
            __m512i hhi = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
            vals[2 * n] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(hlo, m30));
            vals[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                              _mm512_and_si512(hhi, m30));
            scales[2 * n] = _mm512_permutexvar_epi16(idx[2 * n], s16);
            scales[2 * n + 1] = _mm512_permutexvar_epi16(idx[2 * n + 1], s16);
        }
        for (int r = 0; r < R; r++) {
            const act_k *yr = y + r * nb + i;
            __m256i prod16 = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)yr->bsums));
            __m128i half = _mm_add_epi32(_mm256_castsi256_si128(prod16), _mm256_extracti128_si256(prod16, 1));
            half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4E));
            half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0xB1));
            float dy = d * yr->d;
            offsets[r] += dy * 32.0f * (float)_mm_cvtsi128_si32(half);
            __m512i sum = _mm512_setzero_si512();
            for (int q = 0; q < 4; q++)
                sum = _mm512_dpwssd_epi32(
                    sum, _mm512_maddubs_epi16(vals[q], _mm512_loadu_si512((const void *)(yr->qs + 64 * q))),
                    scales[q]);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dy), _mm512_cvtepi32_ps(sum), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) v[r] = _mm512_reduce_add_ps(acc[r]) - offsets[r];
}

/* One weight row's dot products with m rows of activations (m > 1), ROWS_512 at a time;
 * row r's into out[r * stride]. */
static void rows_512(int type, const uint8_t *w, const act_k *y, int64_t nb, int64_t m, float *out,
                     int64_t stride) {
    for (int64_t r = 0; r < m; r += ROWS_512) {
        int64_t left = m - r;
        const act_k *yr = y + r * nb;
        float vr[ROWS_512];
#define RD_ROWS_CASE(n)                                                                    \
    case n:                                                                                \
        if (type == T_Q4_K) q4_k_rows_512(w, yr, nb, n, vr);                               \
        else q6_k_rows_512(w, yr, nb, n, vr);                                              \
        break;
        switch (left < ROWS_512 ? left : ROWS_512) {
            RD_ROWS_CASE(1)
            RD_ROWS_CASE(2)
            RD_ROWS_CASE(3)
            RD_ROWS_CASE(4)
        }
#undef RD_ROWS_CASE
        for (int64_t i = 0; i < ROWS_512 && r + i < m; i++) out[(r + i) * stride] = vr[i];
    }
}
#endif

/* Legacy types: w·y = dw·dy·Σ q·yq + (offset per block)·dy·Σ yq, q unsigned. */
static float dot_legacy(int type, const uint8_t *w, const act_32 *y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m16 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    float rest = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        __m256i yq = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256i p;
        float d;
        if (type == T_Q8_0) {
            const uint8_t *b = w + i * 34;
            d = half_to_float(b) * y[i].d;
            __m256i q = _mm256_loadu_si256((const __m256i *)(b + 2));
            p = dot_us(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yq, q));
        } else {
            int size = type == T_Q4_0 ? 18 : type == T_Q4_1 ? 20 : type == T_Q5_0 ? 22 : 24;
            const uint8_t *b = w + i * size;
            const uint8_t *qs = b + size - 16;
            __m128i raw = _mm_loadu_si128((const __m128i *)qs);
            __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
            float dw = half_to_float(b);
            d = dw * y[i].d;
            float offset;
            if (type == T_Q5_0 || type == T_Q5_1) {
                uint32_t qh;
                memcpy(&qh, b + (type == T_Q5_0 ? 2 : 4), 4);
                q = _mm256_or_si256(q, _mm256_and_si256(bits_to_bytes(qh), m16));
            }
            if (type == T_Q4_0) offset = -8.0f * dw;
            else if (type == T_Q5_0) offset = -16.0f * dw;
            else offset = half_to_float(b + 2);
            rest += offset * y[i].d * (float)y[i].sum;
            p = dot_us(q, yq);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum(acc) + rest;
}
#endif

static int is_k(int type) { return type == T_Q4_K || type == T_Q5_K || type == T_Q6_K; }

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* 1 when this build computes on quantized activations (AVX2), 0: float fallback. */
int rd_simd(void) {
#if defined(__AVX2__)
    return 1;
#else
    return 0;
#endif
}

int rd_row_bytes(int type, int64_t k) {
    int per;
    int size = block_of(type, &per);
    if (size == 0 || k % per != 0) return -1;
    return (int)(k / per * size);
}

#define MAX_PARTS 4
#define MAX_THREADS 64
/* Rows of W a chunk holds at least (16 floats of output: one cache line a row of x),
 * and about how many chunks each thread gets of a job: a chunk is taken and counted with
 * atomics on lines the threads share, which cost more than 16 rows' dot products when
 * two cores take turns with them; a dozen chunks a thread still lets a thread the OS
 * deschedules hold up only its own. */
#define CHUNK 16
#define CHUNKS_PER_THREAD 12
#define DECODE_CHUNK 64
/* Pauses a worker spins for the next job before it sleeps: about 0.1 ms, longer than
 * the Python between two matmuls of a decode step. */
#define SPINS 4000

/* One call's work: `parts` matrices sharing the activations, or rows to decode. */
typedef struct {
    /* a task of another source file's (rd_parallel): chunk c of `ctx` */
    void (*task)(const void *ctx, int64_t c);
    const void *ctx;
    int decode, bf16, count;
    int64_t chunk_rows;
    /* attention (a decode layer's, one row): q heads × n positions of the KV buffers */
    int attend, per_kv;
    int64_t heads, kv_heads, group, head_dim, n, kv_row, kv_stride;
    const uint8_t *visible;
    const float *q, *kc, *vc;
    float *att_out, *scores;
    int types[MAX_PARTS];
    const uint8_t *ws[MAX_PARTS];
    int64_t ns[MAX_PARTS], row_bytes[MAX_PARTS], ldys[MAX_PARTS];
    int64_t first_chunk[MAX_PARTS + 1];
    float *ys[MAX_PARTS];
    void *out;
    int64_t k, m;
    const float *x;
    const act_k *act_k;
    const act_32 *act_32;
} job_t;

static void attend_head(const job_t *job, int64_t h);

static void run_chunk(const job_t *job, int64_t c) {
    if (job->task) {
        job->task(job->ctx, c);
        return;
    }
    if (job->attend) {
        attend_head(job, c);
        return;
    }
    int p = 0;
    while (c >= job->first_chunk[p + 1]) p++;
    int64_t at = c - job->first_chunk[p];
    int type = job->types[p];
    int64_t per = job->decode ? DECODE_CHUNK : job->chunk_rows;
    int64_t start = at * per, stop = start + per < job->ns[p] ? start + per : job->ns[p];
    int64_t k = job->k;
    if (job->decode) {
        float row[k > 0 ? k : 1];
        for (int64_t j = start; j < stop; j++) {
            const uint8_t *wr = job->ws[p] + j * job->row_bytes[p];
            if (!job->bf16) {
                decode_row(type, wr, k, (float *)job->out + j * k);
                continue;
            }
            decode_row(type, wr, k, row);
            uint16_t *o = (uint16_t *)job->out + j * k;
            for (int64_t i = 0; i < k; i++) {
                uint32_t u;
                memcpy(&u, &row[i], 4);
                u += 0x7FFFu + ((u >> 16) & 1u);
                o[i] = (uint16_t)(u >> 16);
            }
        }
        return;
    }
    int per_block;
    block_of(type, &per_block);
    int64_t nb = k / per_block;
    float *y = job->ys[p];
    int64_t ldy = job->ldys[p];
    for (int64_t j = start; j < stop; j++) {
        const uint8_t *wr = job->ws[p] + j * job->row_bytes[p];
#if defined(__AVX2__)
#if defined(RD_K512)
        if (job->m > 1 && (type == T_Q4_K || type == T_Q6_K)) {
            rows_512(type, wr, job->act_k, nb, job->m, y + j, ldy);
            continue;
        }
#endif
        for (int64_t r = 0; r < job->m; r++) {
            float v;
#if defined(RD_K512)
            if (type == T_Q4_K) v = dot_q4_k_512(wr, job->act_k + r * nb, nb);
            else if (type == T_Q6_K) v = dot_q6_k_512(wr, job->act_k + r * nb, nb);
#else
            if (type == T_Q4_K) v = dot_q4_k(wr, job->act_k + r * nb, nb);
            else if (type == T_Q6_K) v = dot_q6_k(wr, job->act_k + r * nb, nb);
#endif
            else if (type == T_Q5_K) v = dot_q5_k(wr, job->act_k + r * nb, nb);
            else v = dot_legacy(type, wr, job->act_32 + r * nb, nb);
            y[r * ldy + j] = v;
        }
#else
        float row[k];
        decode_row(type, wr, k, row);
        for (int64_t r = 0; r < job->m; r++) {
            const float *xr = job->x + r * k;
            float s = 0.0f;
            for (int64_t i = 0; i < k; i++) s += row[i] * xr[i];
            y[r * ldy + j] = s;
        }
#endif
    }
}

/* The ticket: generation (24 bits) | chunks of the job (20 bits) | next chunk (20 bits).
 * A chunk is taken by a compare-and-swap that succeeds only while its generation is
 * current and chunks remain, so the job it belongs to stays in place until it is done. */
#define NEXT_BITS 20
#define TOTAL_BITS 20
#define FIELD ((1ULL << 20) - 1)

static struct {
    pthread_mutex_t lock, call;
    pthread_cond_t wake;
    int started;
    _Atomic uint64_t ticket;
    _Atomic uint32_t gen;
    _Atomic int64_t done;
    _Atomic int want; /* workers that join the current job */
    job_t job;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .call = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void take_chunks(uint64_t gen) {
    /* Chunks done are counted once, when this thread finds none left: one write to the
     * shared counter a job, not one a chunk. */
    int64_t ran = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
        uint64_t next = t & FIELD, total = (t >> NEXT_BITS) & FIELD;
        if ((t >> (NEXT_BITS + TOTAL_BITS)) != gen || next >= total) {
            if (ran) atomic_fetch_add_explicit(&pool.done, ran, memory_order_release);
            return;
        }
        if (!atomic_compare_exchange_weak_explicit(&pool.ticket, &t, t + 1,
                                                   memory_order_acq_rel, memory_order_relaxed))
            continue;
        run_chunk(&pool.job, (int64_t)next);
        ran++;
    }
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen) {
            if (++spins < SPINS) {
                relax();
                continue;
            }
            pthread_mutex_lock(&pool.lock);
            while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = g;
        if (id < atomic_load(&pool.want)) take_chunks(g & ((1u << 24) - 1));
    }
    return NULL;
}

/* A forked child has none of the workers and may have copied a held lock: it starts a
 * pool of its own. */
static void after_fork_in_child(void) {
    pool.started = 0;
    pthread_mutex_init(&pool.lock, NULL);
    pthread_mutex_init(&pool.call, NULL);
    pthread_cond_init(&pool.wake, NULL);
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

static void ensure_workers(int n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    pthread_mutex_lock(&pool.lock);
    while (pool.started < n && pool.started < MAX_THREADS - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker, (void *)(intptr_t)pool.started) != 0) {
            pthread_attr_destroy(&attr);
            break;
        }
        pthread_attr_destroy(&attr);
        pool.started++;
    }
    pthread_mutex_unlock(&pool.lock);
}

/* Runs `job` (already in pool.job) over `total` chunks on `threads` threads, the caller
 * among them; returns when every chunk is done. */
static void run_job(int64_t total, int threads) {
    if (threads <= 1 || total <= 1) {
        for (int64_t c = 0; c < total; c++) run_chunk(&pool.job, c);
        return;
    }
    ensure_workers(threads - 1);
    atomic_store(&pool.done, 0);
    atomic_store(&pool.want, threads - 1);
    pthread_mutex_lock(&pool.lock);
    uint32_t g = (atomic_load(&pool.gen) + 1) & ((1u << 24) - 1);
    if (g == 0) g = 1; /* workers start having seen 0 */
    atomic_store_explicit(&pool.ticket,
                          ((uint64_t)g << (NEXT_BITS + TOTAL_BITS)) | ((uint64_t)total << NEXT_BITS),
                          memory_order_release);
    atomic_store_explicit(&pool.gen, g, memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    take_chunks(g);
    int spins = 0;
    while (atomic_load_explicit(&pool.done, memory_order_acquire) < total) {
        /* A chunk is still held by a thread the OS has set aside: give it the core. */
        if (++spins > 256) sched_yield();
        else relax();
    }
}

/*
 * For each of `count` matrices W_p (n_p rows of k values in GGML type types[p], rows
 * row_bytes[p] apart): y_p (m × n_p, row stride ldys[p]) = x (m × k, float32) · W_pᵀ.
 * Returns 0, or -1 for a type, k or size not handled.
 */
int rd_matmul_many(int count, const int *types, const uint8_t *const *ws, const int64_t *ns,
                   const int64_t *row_bytes, int64_t k, const float *x, int64_t m,
                   float *const *ys, const int64_t *ldys, int threads) {
    if (count < 1 || count > MAX_PARTS) return -1;
    int need_k = 0, need_32 = 0;
    int64_t total = 0, rows = 0;
    for (int p = 0; p < count; p++) {
        int per;
        if (block_of(types[p], &per) == 0 || k % per != 0) return -1;
        if (is_k(types[p])) need_k = 1;
        else need_32 = 1;
        rows += ns[p];
    }
    int64_t want = (int64_t)(threads > 1 ? threads : 1) * CHUNKS_PER_THREAD;
    int64_t chunk = (rows + want - 1) / want;
    chunk = (chunk + CHUNK - 1) / CHUNK * CHUNK;
    if (chunk < CHUNK) chunk = CHUNK;
    for (int p = 0; p < count; p++) total += (ns[p] + chunk - 1) / chunk;
    if (total >= (int64_t)FIELD) return -1;
    pthread_mutex_lock(&pool.call);
    job_t *job = &pool.job;
    memset(job, 0, sizeof(*job));
    job->count = count;
    job->chunk_rows = chunk;
    job->k = k;
    job->m = m;
    job->x = x;
    job->first_chunk[0] = 0;
    for (int p = 0; p < count; p++) {
        job->types[p] = types[p];
        job->ws[p] = ws[p];
        job->ns[p] = ns[p];
        job->row_bytes[p] = row_bytes[p];
        job->ys[p] = ys[p];
        job->ldys[p] = ldys[p];
        job->first_chunk[p + 1] = job->first_chunk[p] + (ns[p] + chunk - 1) / chunk;
    }
    for (int p = count; p < MAX_PARTS; p++) job->first_chunk[p + 1] = INT64_MAX;
    act_k *ak = NULL;
    act_32 *a32 = NULL;
#if defined(__AVX2__)
    if (need_k) {
        ak = malloc(sizeof(act_k) * (k / QKK) * m);
        for (int64_t r = 0; r < m && ak; r++) quantize_k(x + r * k, k, ak + r * (k / QKK));
    }
    if (need_32) {
        a32 = malloc(sizeof(act_32) * (k / QK) * m);
        for (int64_t r = 0; r < m && a32; r++) quantize_32(x + r * k, k, a32 + r * (k / QK));
    }
    if ((need_k && !ak) || (need_32 && !a32)) {
        free(ak);
        free(a32);
        pthread_mutex_unlock(&pool.call);
        return -2;
    }
#else
    (void)need_k;
    (void)need_32;
#endif
    job->act_k = ak;
    job->act_32 = a32;
    run_job(total, threads);
    free(ak);
    free(a32);
    pthread_mutex_unlock(&pool.call);
    return 0;
}

/* task(ctx, c) for every c in [0, total) on the pool's `threads` threads, one call at a
 * time (other source files' kernels share the pool). Returns 0, or -1 for too many. */
int rd_parallel(void (*task)(const void *, int64_t), const void *ctx, int64_t total, int threads) {
    if (total >= (int64_t)FIELD) return -1;
    pthread_mutex_lock(&pool.call);
    job_t *job = &pool.job;
    memset(job, 0, sizeof(*job));
    job->task = task;
    job->ctx = ctx;
    run_job(total, threads);
    pthread_mutex_unlock(&pool.call);
    return 0;
}

int rd_matmul(int type, const uint8_t *w, int64_t n, int64_t k, int64_t row_bytes,
              const float *x, int64_t m, float *y, int64_t ldy, int threads) {
    return rd_matmul_many(1, &type, &w, &n, &row_bytes, k, x, m, &y, &ldy, threads);
}

/* Rows [0, n) of W decoded, as bfloat16 (round to nearest even) when `bf16`, else
 * float32, into `out` (n × k). Returns 0, or -1 for a type or k not handled. */
int rd_decode(int type, const uint8_t *w, int64_t n, int64_t k, int64_t row_bytes, void *out,
              int bf16, int threads) {
    int per;
    if (block_of(type, &per) == 0 || k % per != 0) return -1;
    int64_t total = (n + DECODE_CHUNK - 1) / DECODE_CHUNK;
    if (total >= (int64_t)FIELD) return -1;
    pthread_mutex_lock(&pool.call);
    job_t *job = &pool.job;
    memset(job, 0, sizeof(*job));
    job->decode = 1;
    job->bf16 = bf16;
    job->count = 1;
    job->types[0] = type;
    job->ws[0] = w;
    job->ns[0] = n;
    job->row_bytes[0] = row_bytes;
    job->k = k;
    job->out = out;
    job->first_chunk[0] = 0;
    job->first_chunk[1] = INT64_MAX;
    run_job(total, threads);
    pthread_mutex_unlock(&pool.call);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* One decoder layer of a Llama-family model for one new position (a decode step's row),
 * the arithmetic of engine/runtime/executor/decoder.py `layer` (RMSNorm in float32, rotary
 * embeddings by halves, grouped-query attention over the KV buffers, SiLU-gated MLP): the
 * step is a few hundred small tensor operations in Python, each costing more than its
 * arithmetic; here it is two calls. The KV buffers stay the caller's (it appends the new
 * key and value between the two calls). */

enum { W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN, W_COUNT };

typedef struct {
    int64_t hidden, heads, kv_heads, head_dim, inter;
    float eps;
    const float *attn_norm, *ffn_norm;
    const float *bias[3]; /* q, k, v: NULL where the model has none */
    int types[W_COUNT];
    const uint8_t *ws[W_COUNT];
    int64_t rows[W_COUNT], row_bytes[W_COUNT];
    const int64_t *order[W_COUNT]; /* the file's row of each output (q/k of a Llama file) */
} layer_t;

static inline float dotf(const float *a, const float *b, int64_t n) {
    int64_t i = 0;
    float s = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    s = hsum(acc);
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline void axpy(float *y, float a, const float *x, int64_t n) {
    int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
    __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] += a * x[i];
}

#if defined(__AVX2__) && defined(__FMA__)
/* e^x for 8 floats (x <= 0 here: scores less their maximum), Cephes' polynomial on
 * x = n·ln2 + r: about 1e-7 relative, as expf. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

/* sc[j] = e^(sc[j] - top); returns their sum. */
static float exp_shifted(float *sc, int64_t n, float top) {
    int64_t j = 0;
    float total = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
    __m256 sum = _mm256_setzero_ps(), t = _mm256_set1_ps(top);
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + j), t));
        _mm256_storeu_ps(sc + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    total = hsum(sum);
#endif
    for (; j < n; j++) {
        sc[j] = expf(sc[j] - top);
        total += sc[j];
    }
    return total;
}

#if defined(RD_K512)
/* Lane i of the result: the sum of v[i]'s 16 lanes. */
static inline __m512 sums16(const __m512 *v) {
    __m512 a[8], b[4];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                             _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) {
        __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
        b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xDD));
    __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], 0x88), _mm512_shuffle_f32x4(b[2], b[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xDD));
}

/* attend_head's arithmetic for heads of D = 64 or 128 values (Qwen, Llama, SmolLM2),
 * where a decode step spends its time once the matrices run at the memory's rate. Keys
 * and values are read in blocks that stay in L1 while every query head of the chunk uses
 * them (head by head over the whole context read them from memory once a head: 15% of
 * the 1.5B's step at 1,600 positions); 16 keys' scores are summed together; each value
 * row is added into a head's output, held in registers over the block, with one
 * multiply-add per 16 values. */
static inline __attribute__((always_inline)) void attend_512(const job_t *job, int64_t first,
                                                             int64_t count, const float *q,
                                                             const float *kc, const float *vc,
                                                             const uint8_t *seen, float *scores,
                                                             float *att, const int D) {
    const int V = D / 16;
    int64_t n = job->n;
    const float scale = 1.0f / sqrtf((float)D);
    const __m512 vscale = _mm512_set1_ps(scale);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int64_t h = first; h < first + count; h++) {
            const float *qh = q + h * D;
            __m512 part[16];
            for (int u = 0; u < 16; u++) {
                const float *kj = kc + (j + u) * D;
                __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qh), _mm512_loadu_ps(kj));
                for (int t = 1; t < V; t++)
                    acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * t), _mm512_loadu_ps(kj + 16 * t), acc);
                part[u] = acc;
            }
            _mm512_storeu_ps(scores + h * n + j, _mm512_mul_ps(sums16(part), vscale));
        }
    for (; j < n; j++)
        for (int64_t h = first; h < first + count; h++) {
            const float *qh = q + h * D, *kj = kc + j * D;
            __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qh), _mm512_loadu_ps(kj));
            for (int t = 1; t < V; t++)
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * t), _mm512_loadu_ps(kj + 16 * t), acc);
            scores[h * n + j] = _mm512_reduce_add_ps(acc) * scale;
        }
    float inv[count > 0 ? count : 1];
    for (int64_t h = first; h < first + count; h++) {
        float *sc = scores + h * n;
        if (seen)
            for (j = 0; j < n; j++)
                if (!seen[j]) sc[j] = -INFINITY;
        float top = -INFINITY;
        for (j = 0; j < n; j++) top = sc[j] > top ? sc[j] : top;
        inv[h - first] = 1.0f / exp_shifted(sc, n, top);
        memset(att + h * D, 0, sizeof(float) * D);
    }
    for (int64_t j0 = 0; j0 < n; j0 += 64) {
        int64_t j1 = j0 + 64 < n ? j0 + 64 : n;
        for (int64_t h = first; h < first + count; h++) {
            const float *sc = scores + h * n;
            float *oh = att + h * D;
            __m512 out[8];
            for (int t = 0; t < V; t++) out[t] = _mm512_loadu_ps(oh + 16 * t);
            for (j = j0; j < j1; j++) {
                if (seen && !seen[j]) continue;
                const float *vj = vc + j * D;
                __m512 p = _mm512_set1_ps(sc[j]);
                for (int t = 0; t < V; t++) out[t] = _mm512_fmadd_ps(p, _mm512_loadu_ps(vj + 16 * t), out[t]);
            }
            for (int t = 0; t < V; t++) _mm512_storeu_ps(oh + 16 * t, out[t]);
        }
    }
    for (int64_t h = first; h < first + count; h++) {
        const __m512 norm = _mm512_set1_ps(inv[h - first]);
        for (int t = 0; t < V; t++)
            _mm512_storeu_ps(att + h * D + 16 * t, _mm512_mul_ps(_mm512_loadu_ps(att + h * D + 16 * t), norm));
    }
}
#endif

/* Chunk c: the query heads of one row's KV head (each key and value read once for the
 * group) when chunks are KV heads, else one row's query head alone. */
static void attend_head(const job_t *job, int64_t c) {
    int64_t d = job->head_dim, n = job->n, group = job->group;
    int64_t per_row = job->per_kv ? job->kv_heads : job->heads;
    int64_t row = c / per_row, at = c % per_row;
    int64_t first = job->per_kv ? at * group : at, count = job->per_kv ? group : 1;
    int64_t g = first / group;
    const float *kc = job->kc + row * job->kv_row + g * job->kv_stride;
    const float *vc = job->vc + row * job->kv_row + g * job->kv_stride;
    const uint8_t *seen = job->visible ? job->visible + row * n : NULL;
    const float *q = job->q + row * job->heads * d;
    float *scores = job->scores + row * job->heads * n, *att = job->att_out + row * job->heads * d;
#if defined(RD_K512)
    if (d == 128) {
        attend_512(job, first, count, q, kc, vc, seen, scores, att, 128);
        return;
    }
    if (d == 64) {
        attend_512(job, first, count, q, kc, vc, seen, scores, att, 64);
        return;
    }
#endif
    float scale = 1.0f / sqrtf((float)d);
    for (int64_t j = 0; j < n; j++) {
        const float *kj = kc + j * d;
        for (int64_t h = first; h < first + count; h++)
            scores[h * n + j] = (seen && !seen[j]) ? -INFINITY : dotf(q + h * d, kj, d) * scale;
    }
    for (int64_t h = first; h < first + count; h++) {
        float *sc = scores + h * n, top = -INFINITY;
        for (int64_t j = 0; j < n; j++) top = sc[j] > top ? sc[j] : top;
        float inv = 1.0f / exp_shifted(sc, n, top);
        for (int64_t j = 0; j < n; j++) sc[j] *= inv;
        memset(att + h * d, 0, sizeof(float) * d);
    }
    for (int64_t j = 0; j < n; j++) {
        if (seen && !seen[j]) continue;
        const float *vj = vc + j * d;
        for (int64_t h = first; h < first + count; h++) axpy(att + h * d, scores[h * n + j], vj, d);
    }
}

/* gate[i] = SiLU(gate[i]) · up[i]: 8960 values a layer of the 1.5B, on the calling
 * thread while the pool waits, where expf alone took longer than a matrix. */
static void silu_mul(float *gate, const float *up, int64_t n) {
    int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 one = _mm256_set1_ps(1.0f), top = _mm256_set1_ps(88.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = exp8(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), g), top));
        __m256 y = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i));
        _mm256_storeu_ps(gate + i, y);
    }
#endif
    for (; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void rms_norm_row(const float *x, const float *w, int64_t n, float eps, float *out) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] = w[i] * (x[i] * r);
}

/* out[i] = y[order[i]] where the file keeps rows in another order, else y itself. */
static void reorder(float *y, const int64_t *order, int64_t n, float *tmp) {
    if (!order) return;
    for (int64_t i = 0; i < n; i++) tmp[i] = y[order[i]];
    memcpy(y, tmp, sizeof(float) * n);
}

static void rope(float *x, int64_t heads, int64_t d, const float *cos_, const float *sin_) {
    int64_t half = d / 2;
    for (int64_t h = 0; h < heads; h++) {
        float *v = x + h * d;
        for (int64_t i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * cos_[i] - b * sin_[i];
            v[i + half] = b * cos_[i + half] + a * sin_[i + half];
        }
    }
}

static int matmul_into(const layer_t *L, int first, int count, const float *x, int64_t k,
                       int64_t m, float *const *ys, int threads) {
    int64_t ldys[MAX_PARTS] = {0};
    for (int p = 0; p < count; p++) ldys[p] = L->rows[first + p];
    return rd_matmul_many(count, L->types + first, L->ws + first, L->rows + first,
                          L->row_bytes + first, k, x, m, ys, ldys, threads);
}

/* For m rows (one new position each): norm, q/k/v (with their biases) and rotary
 * embeddings of h (m × hidden); cos/sin are m × head_dim (each row's own position); q is
 * m × heads × head_dim, k and v m × kv_heads × head_dim. Returns 0, or <0 when refused. */
int rd_layer_qkv(const layer_t *L, int64_t m, const float *h, const float *cos_,
                 const float *sin_, float *q, float *k, float *v, int threads) {
    int64_t H = L->hidden, d = L->head_dim;
    if (m < 1) return -1;
    float *x = malloc(sizeof(float) * (m * H + L->rows[W_Q]));
    if (!x) return -2;
    float *tmp = x + m * H;
    for (int64_t r = 0; r < m; r++) rms_norm_row(h + r * H, L->attn_norm, H, L->eps, x + r * H);
    float *ys[3] = {q, k, v};
    int rc = matmul_into(L, W_Q, 3, x, H, m, ys, threads);
    if (rc == 0) {
        for (int64_t r = 0; r < m; r++) {
            for (int p = 0; p < 3; p++) {
                int64_t n = L->rows[W_Q + p];
                float *y = ys[p] + r * n;
                reorder(y, L->order[W_Q + p], n, tmp);
                if (L->bias[p])
                    for (int64_t i = 0; i < n; i++) y[i] += L->bias[p][i];
            }
            rope(q + r * L->rows[W_Q], L->heads, d, cos_ + r * d, sin_ + r * d);
            rope(k + r * L->rows[W_K], L->kv_heads, d, cos_ + r * d, sin_ + r * d);
        }
    }
    free(x);
    return rc;
}

/* The rest of the layer for m rows once their new keys and values are in the KV buffers
 * (n positions; rows kv_row floats apart, heads kv_stride apart, positions head_dim
 * apart; `visible` m × n bytes, 0 where a row may not look (its left padding), or NULL:
 * every position): attention, output projection, residual, norm, SiLU-gated MLP,
 * residual; h (m × hidden) is updated in place. */
int rd_layer_rest(const layer_t *L, int64_t m, float *h, const float *q, const float *kc,
                  const float *vc, const uint8_t *visible, int64_t n, int64_t kv_row,
                  int64_t kv_stride, int threads) {
    int64_t H = L->hidden, I = L->inter, A = L->heads * L->head_dim;
    if (m < 1 || n < 1 || L->kv_heads < 1 || L->heads % L->kv_heads != 0) return -1;
    float *buf = malloc(sizeof(float) * (m * (L->heads * n + A + H + H + 2 * I)));
    if (!buf) return -2;
    float *scores = buf, *att = scores + m * L->heads * n, *o = att + m * A, *x = o + m * H,
          *gate = x + m * H, *up = gate + m * I;
    pthread_mutex_lock(&pool.call);
    job_t *job = &pool.job;
    memset(job, 0, sizeof(*job));
    job->attend = 1;
    job->heads = L->heads;
    job->kv_heads = L->kv_heads;
    job->group = L->heads / L->kv_heads;
    job->head_dim = L->head_dim;
    job->n = n;
    job->kv_row = kv_row;
    job->kv_stride = kv_stride;
    job->visible = visible;
    job->q = q;
    job->kc = kc;
    job->vc = vc;
    job->att_out = att;
    job->scores = scores;
    job->first_chunk[0] = 0;
    for (int p = 0; p < MAX_PARTS; p++) job->first_chunk[p + 1] = INT64_MAX;
    /* A chunk per (row, KV head) reads each key and value once for its group of query
     * heads; with fewer of those than threads, a chunk per (row, query head) keeps every
     * thread busy. */
    int par = m * n * L->heads >= 4096 ? threads : 1;
    job->per_kv = m * L->kv_heads >= par;
    run_job(m * (job->per_kv ? L->kv_heads : L->heads), par);
    pthread_mutex_unlock(&pool.call);
    float *ys[2];
    ys[0] = o;
    int rc = matmul_into(L, W_O, 1, att, A, m, ys, threads);
    if (rc == 0) {
        for (int64_t i = 0; i < m * H; i++) h[i] += o[i];
        for (int64_t r = 0; r < m; r++) rms_norm_row(h + r * H, L->ffn_norm, H, L->eps, x + r * H);
        ys[0] = gate;
        ys[1] = up;
        rc = matmul_into(L, W_GATE, 2, x, H, m, ys, threads);
    }
    if (rc == 0) {
        silu_mul(gate, up, m * I);
        ys[0] = o;
        rc = matmul_into(L, W_DOWN, 1, gate, I, m, ys, threads);
    }
    if (rc == 0)
        for (int64_t i = 0; i < m * H; i++) h[i] += o[i];
    free(buf);
    return rc;
}

/* A decode step's `count` layers in one call, for m rows of one new position each: each
 * layer's q/k/v (rd_layer_qkv), its new key and value written at position `past` of
 * its KV buffers (rows kv_rows[l] floats apart, heads kv_strides[l] apart, positions
 * head_dim apart: room made by the caller), then the rest of the layer over past + 1
 * positions (rd_layer_rest); h (m × hidden) goes through them in place. Where every
 * layer is resident this is the step's whole per-layer path: one call instead of a few
 * dozen small Python operations a layer. Returns 0, or the first refusal's code. */
int rd_layers_step(const layer_t *const *layers, int64_t count, int64_t m, float *h,
                   const float *cos_, const float *sin_, float *const *kbufs,
                   float *const *vbufs, const int64_t *kv_rows, const int64_t *kv_strides,
                   int64_t past, const uint8_t *visible, int threads) {
    if (count < 1 || m < 1 || past < 0) return -1;
    int64_t most = 0;
    for (int64_t l = 0; l < count; l++) {
        const layer_t *L = layers[l];
        int64_t need = m * (L->heads + 2 * L->kv_heads) * L->head_dim;
        most = need > most ? need : most;
    }
    float *scratch = malloc(sizeof(float) * most);
    if (!scratch) return -2;
    int rc = 0;
    for (int64_t l = 0; l < count && rc == 0; l++) {
        const layer_t *L = layers[l];
        int64_t d = L->head_dim, kvh = L->kv_heads;
        float *q = scratch, *k = q + m * L->heads * d, *v = k + m * kvh * d;
        rc = rd_layer_qkv(L, m, h, cos_, sin_, q, k, v, threads);
        if (rc != 0) break;
        for (int64_t r = 0; r < m; r++)
            for (int64_t g = 0; g < kvh; g++) {
                int64_t at = r * kv_rows[l] + g * kv_strides[l] + past * d;
                memcpy(kbufs[l] + at, k + (r * kvh + g) * d, sizeof(float) * d);
                memcpy(vbufs[l] + at, v + (r * kvh + g) * d, sizeof(float) * d);
            }
        rc = rd_layer_rest(L, m, h, q, kbufs[l], vbufs[l], visible, past + 1, kv_rows[l],
                           kv_strides[l], threads);
    }
    free(scratch);
    return rc;
}
