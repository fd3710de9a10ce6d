/* cpu_isa.c — which vector ISA the kernels and the layout pass may use: the
 * CPU's (by cpuid), capped by MGE_CPU_ISA so tests and benchmarks can force
 * the portable, AVX2 or non-VNNI paths on any machine. One decision for
 * every caller, so a pass never plans for kernels that will not run.
 *
 * MGE_CPU_ISA: baseline (portable loops), avx2 (AVX2+FMA, int8 without
 * VNNI), avx2-vnni (AVX2 plus AVX-VNNI's 256-bit vpdpbusd, where the CPU has
 * it; plain AVX2 int8 where it does not), avx512 (AVX-512, int8 without
 * VNNI, no bf16), avx512-vnni (AVX-512 with VNNI int8, no bf16),
 * avx512-bf16 (AVX-512 VNNI and AVX512-BF16's vdpbf16ps, no AMX), amx (the
 * same as unset: everything the CPU has); unset or anything else: what the
 * CPU has.
 *
 * bf16 has its own level (mge_cpu_bf16): AMX tiles (tdpbf16ps), AVX512-BF16
 * (vdpbf16ps), or none (the f32 kernels). AMX's tile data is off by default
 * under Linux: the process asks for it once (arch_prctl
 * ARCH_REQ_XCOMP_PERM); if the kernel refuses, the level falls to
 * AVX512-BF16 and mge_cpu_bf16_note says why, for -v. The int8 level
 * gains AMX (tdpbusd) on the same terms. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#define ISA_ARCH_REQ_XCOMP_PERM 0x1023
#define ISA_XFEATURE_XTILEDATA 18
#endif

static int level, int8_level, bf16_level;
static char bf16_note[160];

/* Linux keeps AMX's tile state off until the process asks for it; the
 * permission is per process and lasts, so one request covers every thread
 * started later. 0: granted. */
static int amx_permit(void)
{
#if defined(__linux__) && defined(__x86_64__) && defined(SYS_arch_prctl)
    if (syscall(SYS_arch_prctl, ISA_ARCH_REQ_XCOMP_PERM, ISA_XFEATURE_XTILEDATA) == 0)
        return 0;
    snprintf(bf16_note, sizeof bf16_note, "the kernel refused AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)");
#else
    snprintf(bf16_note, sizeof bf16_note, "AMX needs Linux on x86-64");
#endif
    return -1;
}
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void decide(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const char *cap = getenv("MGE_CPU_ISA");
    int max = MGE_ISA_AVX512, max8 = MGE_INT8_AMX, maxb = MGE_BF16_AMX;
    if (cap && strcmp(cap, "baseline") == 0)
        max = MGE_ISA_BASE, max8 = MGE_INT8_BASE, maxb = MGE_BF16_NONE;
    else if (cap && strcmp(cap, "avx2") == 0)
        max = MGE_ISA_AVX2, max8 = MGE_INT8_AVX2, maxb = MGE_BF16_NONE;
    else if (cap && strcmp(cap, "avx2-vnni") == 0)
        max = MGE_ISA_AVX2, max8 = MGE_INT8_AVXVNNI, maxb = MGE_BF16_NONE;
    else if (cap && strcmp(cap, "avx512") == 0)
        max8 = MGE_INT8_AVX2, maxb = MGE_BF16_NONE;
    else if (cap && strcmp(cap, "avx512-vnni") == 0)
        max8 = MGE_INT8_AVX512VNNI, maxb = MGE_BF16_NONE;
    else if (cap && strcmp(cap, "avx512-bf16") == 0)
        max8 = MGE_INT8_AVX512VNNI, maxb = MGE_BF16_AVX512;
    __builtin_cpu_init();
    int l = MGE_ISA_BASE, l8 = MGE_INT8_BASE, lb = MGE_BF16_NONE, avxvnni_cpu = 0, amx_bf16 = 0, amx_int8 = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        l = l8 = MGE_ISA_AVX2;
        unsigned a, b, c, d;
        /* leaf 7: ECX bit 11 AVX512_VNNI, EDX bit 22 AMX-BF16, bit 24
         * AMX-TILE, bit 25 AMX-INT8; subleaf 1: EAX bit 4 AVX_VNNI, bit 5
         * AVX512_BF16 */
        int vnni512 = 0, avxvnni = 0, bf16 = 0;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            vnni512 = (c >> 11) & 1;
            amx_bf16 = ((d >> 22) & 1) && ((d >> 24) & 1);
            amx_int8 = ((d >> 25) & 1) && ((d >> 24) & 1);
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            avxvnni = (a >> 4) & 1;
            bf16 = (a >> 5) & 1;
        }
        avxvnni_cpu = avxvnni;
        if (avxvnni)
            l8 = MGE_INT8_AVXVNNI;
        if (__builtin_cpu_supports("avx512f")) {
            l = MGE_ISA_AVX512;
            int bw = __builtin_cpu_supports("avx512bw");
            if (vnni512 && bw)
                l8 = MGE_INT8_AVX512VNNI;
            if (bf16 && bw)
                lb = MGE_BF16_AVX512;
            if (lb == MGE_BF16_AVX512 && amx_bf16)
                lb = MGE_BF16_AMX;
            if (l8 == MGE_INT8_AVX512VNNI && amx_int8)
                l8 = MGE_INT8_AMX;
        }
    }
    level = l < max ? l : max;
    int8_level = l8 < max8 ? l8 : max8;
    bf16_level = lb < maxb ? lb : maxb;
    /* ask for the tiles only when a kernel would use them */
    if ((bf16_level == MGE_BF16_AMX || int8_level == MGE_INT8_AMX) && amx_permit() != 0) {
        if (bf16_level == MGE_BF16_AMX)
            bf16_level = MGE_BF16_AVX512;
        if (int8_level == MGE_INT8_AMX)
            int8_level = MGE_INT8_AVX512VNNI;
    }
    if (!bf16_note[0]) {
        if (bf16_level == MGE_BF16_NONE && lb != MGE_BF16_NONE)
            snprintf(bf16_note, sizeof bf16_note, "MGE_CPU_ISA=%s turns bf16 off", cap ? cap : "");
        else if (bf16_level == MGE_BF16_NONE)
            snprintf(bf16_note, sizeof bf16_note, "this CPU has neither AMX-BF16 nor AVX512-BF16");
        else if (bf16_level == MGE_BF16_AVX512 && amx_bf16)
            snprintf(bf16_note, sizeof bf16_note, "MGE_CPU_ISA=%s leaves AMX off", cap ? cap : "");
        else if (bf16_level == MGE_BF16_AVX512)
            snprintf(bf16_note, sizeof bf16_note, "this CPU has AVX512-BF16 but no AMX");
    }
    /* the int8 levels are not nested: AVX-512 VNNI (AMD Zen 4, say) does
     * not imply the VEX-encoded AVX-VNNI, so a cap to avx2-vnni on such a
     * CPU falls to plain AVX2 */
    if (int8_level == MGE_INT8_AVXVNNI && !avxvnni_cpu)
        int8_level = MGE_INT8_AVX2;
#else
    level = MGE_ISA_BASE;
    int8_level = MGE_INT8_BASE;
    bf16_level = MGE_BF16_NONE;
    snprintf(bf16_note, sizeof bf16_note, "bf16 kernels are x86 only");
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

int mge_cpu_bf16(void)
{
    pthread_once(&once, decide);
    return bf16_level;
}

const char *mge_cpu_bf16_note(void)
{
    pthread_once(&once, decide);
    return bf16_note;
}

const char *mge_cpu_bf16_name(int l)
{
    switch (l) {
    case MGE_BF16_AVX512: return "avx512-bf16";
    case MGE_BF16_AMX: return "amx-bf16";
    default: return "none (f32)";
    }
}

const char *mge_cpu_int8_name(int l)
{
    switch (l) {
    case MGE_INT8_AMX: return "amx-int8";
    case MGE_INT8_AVX2: return "avx2";
    case MGE_INT8_AVXVNNI: return "avx-vnni";
    case MGE_INT8_AVX512VNNI: return "avx512-vnni";
    default: return "portable";
    }
}
