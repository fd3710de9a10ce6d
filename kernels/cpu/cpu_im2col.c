/* cpu_im2col.c — the im2col matrix of a convolution (cpu.h, cpu_im2col).
 *
 * Row r of the matrix is input channel r / ksz at tap r % ksz; its columns
 * are output pixels, so each row is a run of output-row segments, each a
 * (strided) copy of one input row with zeros where the tap reads padding.
 * The segments are short (OW floats: 14 on a 14x14 plane), so the copy is
 * done inline with masked vector loads and stores: calling memcpy and a
 * scalar zero loop per segment cost more than the sgemm that follows on
 * LeNet's and resnet's late layers (perf: 36% of a 3x3 conv's time on a
 * 14x14 plane, against 48% in the micro-kernel). Stride 2 takes pairs of
 * vectors and keeps the even lanes; other strides copy scalars. */
#include "cpu.h"

#include <string.h>

#if CPU_X86 && defined(__GNUC__)
#include <immintrin.h>
#define I2C_VEC 1
#else
#define I2C_VEC 0
#endif

/* The loop over rows and output-row segments, around SEG(dst, src, n, a,
 * b): dst[t] for t in [0, n) is src[t * sw] for t in [a, b) and 0 outside,
 * where src is the input row at the segment's first output column (only
 * src[a * sw ...] is ever formed, so no pointer leaves the plane). */
#define I2C_LOOP(SEG)                                                                                  \
    const int64_t OW = c->OW, H = c->H, W = c->W, kw = c->kw, ksz = c->ksz, ld = p1 - p0;              \
    const int64_t sh = c->sh, sw = c->sw, ph = c->ph, pw = c->pw, dh = c->dh, dw = c->dw;              \
    const int64_t oh00 = p0 / OW, ow00 = p0 % OW;                                                      \
    int64_t ch = r0 / ksz, i = (r0 % ksz) / kw, j = r0 % kw;                                           \
    for (int64_t r = r0; r < r1; r++) {                                                                \
        const float *xc = x + ch * H * W;                                                              \
        int64_t lo, hi;                                                                                \
        cpu_valid_range(OW, W, sw, pw, j * dw, &lo, &hi);                                              \
        float *d = col + (r - r0) * ld;                                                                \
        int64_t ow0 = ow00, ih = oh00 * sh - ph + i * dh;                                              \
        for (int64_t left = ld; left > 0; ih += sh, ow0 = 0) {                                         \
            int64_t n = OW - ow0 < left ? OW - ow0 : left, ow1 = ow0 + n;                              \
            int64_t a = 0, b = 0;                                                                      \
            if (ih >= 0 && ih < H) {                                                                   \
                a = lo < ow0 ? 0 : lo > ow1 ? n : lo - ow0;                                            \
                b = hi < ow0 + a ? a : hi > ow1 ? n : hi - ow0;                                        \
            }                                                                                          \
            /* input column of output column ow0 + t: (ow0 + t) * sw - pw + j * dw */                  \
            const float *src = xc + (ih >= 0 && ih < H ? ih * W : 0);                                  \
            SEG(d, src, ow0 * sw - pw + j * dw, n, a, b);                                              \
            d += n;                                                                                    \
            left -= n;                                                                                 \
        }                                                                                              \
        if (++j == kw) {                                                                               \
            j = 0;                                                                                     \
            if (++i == c->kh) {                                                                        \
                i = 0;                                                                                 \
                ch++;                                                                                  \
            }                                                                                          \
        }                                                                                              \
    }

/* Scalar segment: src + s0 + t * sw for t in [a, b). */
#define I2C_SEG_SCALAR(d, src, s0, n, a, b)                \
    do {                                                   \
        for (int64_t t = 0; t < (a); t++)                  \
            (d)[t] = 0.0f;                                 \
        if (sw == 1 && (b) > (a))                          \
            memcpy((d) + (a), (src) + (s0) + (a), sizeof(float) * (size_t)((b) - (a))); \
        else                                               \
            for (int64_t t = (a); t < (b); t++)            \
                (d)[t] = (src)[(s0) + t * sw];             \
        for (int64_t t = (b); t < (n); t++)                \
            (d)[t] = 0.0f;                                 \
    } while (0)

static CPU_BASE void im2col_base(const cpu_conv *c, const float *x, float *col, int64_t p0, int64_t p1, int64_t r0,
                                 int64_t r1)
{
    I2C_LOOP(I2C_SEG_SCALAR)
}

#if I2C_VEC
static inline __attribute__((always_inline)) __mmask16 i2c_m16(int64_t k)
{
    return k >= 16 ? (__mmask16)0xFFFF : k <= 0 ? (__mmask16)0 : (__mmask16)((1u << k) - 1);
}

/* d[t] = 0 for t in [0, n) */
static inline __attribute__((always_inline, target("avx512f"))) void i2c_zero512(float *d, int64_t n)
{
    for (int64_t t = 0; t < n; t += 16)
        _mm512_mask_storeu_ps(d + t, i2c_m16(n - t), _mm512_setzero_ps());
}

static inline __attribute__((always_inline, target("avx512f"))) void i2c_seg512(float *d, const float *src,
                                                                              int64_t s0, int64_t n, int64_t a,
                                                                              int64_t b, int64_t sw)
{
    i2c_zero512(d, a);
    if (b > a) {
        const float *s = src + s0 + a * sw;
        float *o = d + a;
        int64_t m = b - a;
        if (sw == 1) {
            for (int64_t t = 0; t < m; t += 16) {
                __mmask16 k = i2c_m16(m - t);
                _mm512_mask_storeu_ps(o + t, k, _mm512_maskz_loadu_ps(k, s + t));
            }
        } else if (sw == 2) {
            /* outputs t..t+15 read inputs 2t..2t+30: two loads, even lanes */
            const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
            for (int64_t t = 0; t < m; t += 16) {
                int64_t in = 2 * (m - t) - 1;   /* inputs left from s[2t] */
                __m512 v0 = _mm512_maskz_loadu_ps(i2c_m16(in), s + 2 * t);
                __m512 v1 = _mm512_maskz_loadu_ps(i2c_m16(in - 16), s + 2 * t + 16);
                _mm512_mask_storeu_ps(o + t, i2c_m16(m - t), _mm512_permutex2var_ps(v0, ev, v1));
            }
        } else {
            for (int64_t t = 0; t < m; t++)
                o[t] = s[t * sw];
        }
    }
    i2c_zero512(d + b, n - b);
}

#define I2C_SEG512(d, src, s0, n, a, b) i2c_seg512(d, src, s0, n, a, b, sw)

static __attribute__((target("avx512f"))) void im2col_avx512(const cpu_conv *c, const float *x, float *col,
                                                             int64_t p0, int64_t p1, int64_t r0, int64_t r1)
{
    I2C_LOOP(I2C_SEG512)
}

static inline __attribute__((always_inline, target("avx2"))) __m256i i2c_m8(int64_t k)
{
    const __m256i idx = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    int kk = k > 8 ? 8 : k < 0 ? 0 : (int)k;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(kk), idx);
}

static inline __attribute__((always_inline, target("avx2"))) void i2c_seg256(float *d, const float *src, int64_t s0,
                                                                           int64_t n, int64_t a, int64_t b,
                                                                           int64_t sw)
{
    const __m256 z = _mm256_setzero_ps();
    for (int64_t t = 0; t < a; t += 8)
        _mm256_maskstore_ps(d + t, i2c_m8(a - t), z);
    if (b > a) {
        const float *s = src + s0 + a * sw;
        float *o = d + a;
        int64_t m = b - a;
        if (sw == 1) {
            for (int64_t t = 0; t < m; t += 8) {
                __m256i k = i2c_m8(m - t);
                _mm256_maskstore_ps(o + t, k, _mm256_maskload_ps(s + t, k));
            }
        } else {
            for (int64_t t = 0; t < m; t++)
                o[t] = s[t * sw];
        }
    }
    for (int64_t t = b; t < n; t += 8)
        _mm256_maskstore_ps(d + t, i2c_m8(n - t), z);
}

#define I2C_SEG256(d, src, s0, n, a, b) i2c_seg256(d, src, s0, n, a, b, sw)

static __attribute__((target("avx2"))) void im2col_avx2(const cpu_conv *c, const float *x, float *col, int64_t p0,
                                                        int64_t p1, int64_t r0, int64_t r1)
{
    I2C_LOOP(I2C_SEG256)
}
#endif

void cpu_im2col(const cpu_conv *c, const float *x, float *col, int64_t p0, int64_t p1, int64_t r0, int64_t r1)
{
#if I2C_VEC
    int isa = mge_cpu_isa();
    if (isa >= MGE_ISA_AVX512) {
        im2col_avx512(c, x, col, p0, p1, r0, r1);
        CPU_VZEROUPPER();
        return;
    }
    if (isa >= MGE_ISA_AVX2) {
        im2col_avx2(c, x, col, p0, p1, r0, r1);
        CPU_VZEROUPPER();
        return;
    }
#endif
    im2col_base(c, x, col, p0, p1, r0, r1);
}
