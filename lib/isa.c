/* isa.c — which vector ISA the kernels and the layout pass may use: the
 * CPU's (by cpuid), capped by MGE_CPU_ISA=baseline|avx2 so tests and
 * benchmarks can force the portable or the AVX2 paths on any machine.
 * One decision for every caller, so a pass never plans for kernels that
 * will not run. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int level;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void decide(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const char *cap = getenv("MGE_CPU_ISA");
    int max = cap && strcmp(cap, "baseline") == 0 ? MGE_ISA_BASE : cap && strcmp(cap, "avx2") == 0 ? MGE_ISA_AVX2
                                                                                                    : MGE_ISA_AVX512;
    __builtin_cpu_init();
    int l = MGE_ISA_BASE;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        l = MGE_ISA_AVX2;
        if (__builtin_cpu_supports("avx512f"))
            l = MGE_ISA_AVX512;
    }
    level = l < max ? l : max;
#else
    level = MGE_ISA_BASE;
#endif
}

int mge_cpu_isa(void)
{
    pthread_once(&once, decide);
    return level;
}
