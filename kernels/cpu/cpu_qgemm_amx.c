/* cpu_qgemm_amx.c — the AMX level of cpu_qgemm.c's int8 GEMM: tdpbusd
 * tiles (u8 x s8 -> s32, 16 x 16 accumulators, 64 bytes of K a step).
 *
 * tdpbusd's u8 operand is the A tile (rows x 64 bytes of K), so C = W X
 * takes W as A and the packed X block ([Kq][columns][4], the vpdpbusd
 * layout) as B tiles as it is: 16 quad rows of 16 columns x 4 bytes at the
 * block's row stride. W must then be u8: it is packed per call as
 * w ^ 0x80 = w + 128, rows of Kp = K rounded up to 64 (zeros past K), 32
 * rows a block. x stays raw s8 (no flip, corr = x_zero in off), and
 *   sum (w + 128) x = sum w x + 128 colsum(x),
 * so each packed X block carries one more row holding -128 colsum(x) per
 * column as int32 (mge_cpu_qamx_colsum, once per block, not per row
 * block). acc + that + off is then sum (x - xz) w + bias mod 2^32: the
 * same int32 as the other levels, and the same epilogue (epi_zmm).
 *
 * Micro-kernel: 32 rows x 32 columns, 2 A + 2 B tiles and 4 C tiles (all
 * 8 tile registers), C stored to the stack and requantized by rows. The
 * tile config is per thread: every pool task that runs the kernel calls
 * mge_cpu_qamx_begin first (mge_cpu_int8() asked for the permission). */
#include "cpu_qint8.h"

#if QG_X86

#if defined(__clang__)
#define QA_TILE __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni")))
#else
#define QA_TILE __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni"), optimize("O3")))
#endif

/* palette 1; every tile 16 rows x 64 bytes: C 0-3, A (W) 4-5, B (X) 6-7 */
typedef struct qa_cfg {
    uint8_t palette, start_row, rsvd[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} qa_cfg;

/* in static storage: GCC 12 drops stores to a local that only ldtilecfg reads */
static const qa_cfg qa_config = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

QA_TILE void mge_cpu_qamx_begin(void)
{
    _tile_loadconfig(&qa_config);
}

QA_TILE void mge_cpu_qamx_end(void)
{
    _tile_release();
}

/* W rows src[r] (NULL: a zero row) as u8 w ^ 0x80, Kp bytes each (zeros past K) */
QG_512 void mge_cpu_qamx_pack_w(const int8_t *const *src, int rows, int64_t K, int64_t Kp, uint8_t *dst)
{
    const __m512i f = _mm512_set1_epi8((char)0x80);
    for (int r = 0; r < rows; r++, dst += Kp) {
        if (!src[r]) {
            memset(dst, 0, (size_t)Kp);
            continue;
        }
        int64_t k = 0;
        for (; k + 64 <= K; k += 64)
            _mm512_storeu_si512(dst + k, _mm512_xor_si512(_mm512_loadu_si512(src[r] + k), f));
        if (k < K) {
            __mmask64 m = (__mmask64)((1ULL << (K - k)) - 1);
            __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src[r] + k), f);
            _mm512_storeu_si512(dst + k, _mm512_maskz_mov_epi8(m, v));
            k += 64;
        }
        if (k < Kp)
            memset(dst + k, 0, (size_t)(Kp - k));
    }
}

/* the correction row of a packed block: -128 * sum over the Kq quads of
 * column m, int32 at blk + Kq * xs + m * 4, for m < len (rounded up to 16:
 * the junk columns get junk) */
QG_512 void mge_cpu_qamx_colsum(uint8_t *blk, int64_t xs, int64_t Kq, int64_t len)
{
    const __m512i ones = _mm512_set1_epi8(1);
    int32_t *cs = (int32_t *)(void *)(blk + Kq * xs);
    for (int64_t m = 0; m < len; m += 16) {
        __m512i a = _mm512_setzero_si512(), b = a;
        const uint8_t *p = blk + m * 4;
        int64_t q = 0;
        for (; q + 2 <= Kq; q += 2, p += 2 * xs) {
            a = _mm512_dpbusd_epi32(a, ones, _mm512_loadu_si512(p));
            b = _mm512_dpbusd_epi32(b, ones, _mm512_loadu_si512(p + xs));
        }
        if (q < Kq)
            a = _mm512_dpbusd_epi32(a, ones, _mm512_loadu_si512(p));
        _mm512_storeu_si512(cs + m, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_add_epi32(a, b), 7)));
    }
}

/* rows <= 32 x cols <= 32 of C: W' at wp (row stride wrs = Kp), X block
 * panel at xp (quad stride xs, Kq a multiple of 16, corrections at
 * xp + Kq * xs) */
QA_TILE void mge_cpu_qamx_ukr(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs,
                              int64_t Kq, const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y,
                              int64_t ldy)
{
    (void)wqs;
    int32_t c[32][32];
    const int8_t *w1 = wp + 16 * wrs;
    int64_t steps = Kq / 16, xstep = 16 * xs;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    /* skip the half tiles nothing stores (the last rows of O, a panel's last 1-16 columns) */
    if (rows > 16 && cols > 16) {
        for (int64_t s = 0; s < steps; s++) {
            const uint8_t *xb = xp + s * xstep;
            _tile_loadd(4, wp + s * 64, wrs);
            _tile_loadd(6, xb, xs);
            _tile_loadd(7, xb + 64, xs);
            _tile_dpbusd(0, 4, 6);
            _tile_loadd(5, w1 + s * 64, wrs);
            _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
        }
    } else if (rows > 16) {
        for (int64_t s = 0; s < steps; s++) {
            _tile_loadd(4, wp + s * 64, wrs);
            _tile_loadd(6, xp + s * xstep, xs);
            _tile_loadd(5, w1 + s * 64, wrs);
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(2, 5, 6);
        }
    } else if (cols > 16) {
        for (int64_t s = 0; s < steps; s++) {
            const uint8_t *xb = xp + s * xstep;
            _tile_loadd(4, wp + s * 64, wrs);
            _tile_loadd(6, xb, xs);
            _tile_loadd(7, xb + 64, xs);
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
        }
    } else {
        for (int64_t s = 0; s < steps; s++) {
            _tile_loadd(4, wp + s * 64, wrs);
            _tile_loadd(6, xp + s * xstep, xs);
            _tile_dpbusd(0, 4, 6);
        }
    }
    _tile_stored(0, &c[0][0], 128);
    if (cols > 16)
        _tile_stored(1, &c[0][16], 128);
    if (rows > 16) {
        _tile_stored(2, &c[16][0], 128);
        if (cols > 16)
            _tile_stored(3, &c[16][16], 128);
    }
    const int32_t *cs = (const int32_t *)(const void *)(xp + Kq * xs);
    __m512i k0 = _mm512_loadu_si512(cs), k1 = cols > 16 ? _mm512_loadu_si512(cs + 16) : k0;
    __mmask16 m0 = zmask(cols), m1 = zmask(cols - 16);
    for (int r = 0; r < rows; r++) {
        epi_zmm(_mm512_add_epi32(_mm512_loadu_si512(c[r]), k0), &rp[r], e, y + r * ldy, m0);
        if (cols > 16)
            epi_zmm(_mm512_add_epi32(_mm512_loadu_si512(c[r] + 16), k1), &rp[r], e, y + r * ldy + 16, m1);
    }
}

#endif
