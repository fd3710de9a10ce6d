/* cpu_relu.h — relu and relu6 on one AVX-512 or AVX2 vector, in the
 * registers of the blocked conv tiles, depthwise strips and Winograd
 * output transforms, with ref's values on every input (ref_unary.c):
 * max and min return their second operand when either is NaN or both are
 * zeros, so NaN passes and -0.0 stays; +inf gives 6 under relu6 (the
 * integer-mask form these replace built its 6 as v * 0 + 6, NaN for +inf).
 * Two instructions where the masks took about seven. */
#ifndef MGE_CPU_RELU_H
#define MGE_CPU_RELU_H

#include "cpu.h"

#if CPU_X86 && defined(__GNUC__)
#include <immintrin.h>

/* six: relu6, else relu */
static inline __attribute__((always_inline, target("avx512f"))) __m512 cpu_relu16(__m512 v, int six)
{
    v = _mm512_max_ps(_mm512_setzero_ps(), v);
    return six ? _mm512_min_ps(_mm512_set1_ps(6.0f), v) : v;
}

static inline __attribute__((always_inline, target("avx"))) __m256 cpu_relu8(__m256 v, int six)
{
    v = _mm256_max_ps(_mm256_setzero_ps(), v);
    return six ? _mm256_min_ps(_mm256_set1_ps(6.0f), v) : v;
}
#endif

#endif
