/* cpu_plane.c — plane staging shared by the direct kernels (depthwise
 * conv, pooling): a padded copy so no tap needs a bounds test, and the
 * even/odd column split that makes stride-2 taps read contiguous memory.
 * Plain copies: the memory system, not the ISA, sets their speed. */
#include "cpu.h"

void cpu_plane_pad(const float *restrict x, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp, int64_t Wp,
                   float padv, float *restrict pad)
{
    for (int64_t i = 0; i < ph * Wp; i++)
        pad[i] = padv;
    for (int64_t h = 0; h < H; h++) {
        float *restrict r = pad + (h + ph) * Wp;
        for (int64_t j = 0; j < pw; j++)
            r[j] = padv;
        for (int64_t j = 0; j < W; j++)
            r[pw + j] = x[h * W + j];
        for (int64_t j = pw + W; j < Wp; j++)
            r[j] = padv;
    }
    for (int64_t i = (H + ph) * Wp; i < Hp * Wp; i++)
        pad[i] = padv;
}

void cpu_plane_deinterleave(const float *restrict pad, int64_t Hp, int64_t Wp, float padv, float *restrict de)
{
    const int64_t We = (Wp + 1) / 2;
    for (int64_t r = 0; r < Hp; r++) {
        const float *restrict src = pad + r * Wp;
        float *restrict e = de + r * 2 * We, *restrict o = e + We;
        for (int64_t k = 0; k < Wp / 2; k++) {
            e[k] = src[2 * k];
            o[k] = src[2 * k + 1];
        }
        if (Wp % 2) {
            e[We - 1] = src[Wp - 1];
            o[We - 1] = padv;
        }
    }
}
