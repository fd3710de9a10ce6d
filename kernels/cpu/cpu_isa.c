/* cpu_isa.c — which vector ISA the kernels and the layout pass may use: the
 * CPU's (by cpuid), capped by MGE_CPU_ISA so tests and benchmarks can force
 * the portable, AVX2 or non-VNNI paths on any machine. One decision for
 * every caller, so a pass never plans for kernels that will not run.
 *
 * MGE_CPU_ISA: baseline (portable loops), avx2 (AVX2+FMA, int8 without
 * VNNI), avx2-vnni (AVX2 plus AVX-VNNI's 256-bit vpdpbusd, where the CPU has
 * it; plain AVX2 int8 where it does not), avx512
 * (AVX-512, int8 without VNNI); unset or anything else: what the CPU has. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static int level, int8_level;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void decide(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const char *cap = getenv("MGE_CPU_ISA");
    int max = MGE_ISA_AVX512, max8 = MGE_INT8_AVX512VNNI;
    if (cap && strcmp(cap, "baseline") == 0)
        max = MGE_ISA_BASE, max8 = MGE_INT8_BASE;
    else if (cap && strcmp(cap, "avx2") == 0)
        max = MGE_ISA_AVX2, max8 = MGE_INT8_AVX2;
    else if (cap && strcmp(cap, "avx2-vnni") == 0)
        max = MGE_ISA_AVX2, max8 = MGE_INT8_AVXVNNI;
    else if (cap && strcmp(cap, "avx512") == 0)
        max8 = MGE_INT8_AVX2;
    __builtin_cpu_init();
    int l = MGE_ISA_BASE, l8 = MGE_INT8_BASE, avxvnni_cpu = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        l = l8 = MGE_ISA_AVX2;
        unsigned a, b, c, d;
        /* leaf 7: ECX bit 11 AVX512_VNNI; subleaf 1: EAX bit 4 AVX_VNNI */
        int vnni512 = 0, avxvnni = 0;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d))
            vnni512 = (c >> 11) & 1;
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d))
            avxvnni = (a >> 4) & 1;
        avxvnni_cpu = avxvnni;
        if (avxvnni)
            l8 = MGE_INT8_AVXVNNI;
        if (__builtin_cpu_supports("avx512f")) {
            l = MGE_ISA_AVX512;
            if (vnni512 && __builtin_cpu_supports("avx512bw"))
                l8 = MGE_INT8_AVX512VNNI;
        }
    }
    level = l < max ? l : max;
    int8_level = l8 < max8 ? l8 : max8;
    /* the int8 levels are not nested: AVX-512 VNNI (AMD Zen 4, say) does
     * not imply the VEX-encoded AVX-VNNI, so a cap to avx2-vnni on such a
     * CPU falls to plain AVX2 */
    if (int8_level == MGE_INT8_AVXVNNI && !avxvnni_cpu)
        int8_level = MGE_INT8_AVX2;
#else
    level = MGE_ISA_BASE;
    int8_level = MGE_INT8_BASE;
#endif
}

int mge_cpu_isa(void)
{
    pthread_once(&once, decide);
    return level;
}

int mge_cpu_int8(void)
{
    pthread_once(&once, decide);
    return int8_level;
}

const char *mge_cpu_int8_name(int l)
{
    switch (l) {
    case MGE_INT8_AVX2: return "avx2";
    case MGE_INT8_AVXVNNI: return "avx-vnni";
    case MGE_INT8_AVX512VNNI: return "avx512-vnni";
    default: return "portable";
    }
}
