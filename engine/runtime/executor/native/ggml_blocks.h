/*
 * GGML's block types as a GGUF file stores them: the type numbers, the values a block
 * holds, and the small decoders the kernels share (ggml_dot.c, vnni_gemm.c). Layouts
 * follow ggml's (llama.cpp, MIT licence, Copyright (c) 2023-2024 The ggml authors; the
 * notice is in ggml_dot.c).
 */
#ifndef RD_GGML_BLOCKS_H
#define RD_GGML_BLOCKS_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

enum {
    T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8,
    T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14,
};

#define QK 32
#define QKK 256

static inline float half_to_float(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, f;
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        memcpy(&f, &v, 4);
        f |= sign;
    } else if (exp == 31) {
        f = sign | 0x7F800000u | (man << 13);
    } else {
        f = sign | ((exp + 112) << 23) | (man << 13);
    }
    float out;
    memcpy(&out, &f, 4);
    return out;
#endif
}

/* The six-bit scale and minimum of sub-block j of a Q4_K/Q5_K block's 12 bytes. */
static inline void scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
