/* cpu_qdepthwise.c — depthwise qconv2d (groups = C = O, ops.def) without a
 * GEMM, bit-exact with the ref kernel: acc = bias + sum (x - x_zero) * w in
 * int32 (exact: |x - xz| <= 255, |w| <= 128, so a pair of taps fits in
 * int32 and wrapping sums equal the definition mod 2^32), then the
 * requantization of lib/quant_math.h lane by lane (cpu_qint8.h).
 *
 * Layout: per channel, x - x_zero as int16 padded with 0 (= x_zero) and
 * split into sh x sw phase planes of Hq x Wq, phase (py, px) holding the
 * padded pixels (r * sh + py, q * sw + px). Tap (ky, kx) of output (oy, ox)
 * is then phase ((ky dh) % sh, (kx dw) % sw) at row oy + (ky dh) / sh,
 * column ox + (kx dw) / sw. Outputs are computed on a "wide" plane of OH
 * rows by Wq columns, flattened: wide index o = oy * Wq + ox reads every
 * tap at o + a constant, so one vector run covers the whole plane (a 7x7
 * output is 63 lanes, not 7 rows of 32), the columns past OW are junk and
 * dropped when the rows are copied out. Small planes with many channels
 * (mobilenet's 7x7 and 14x14) were dominated by per-row vector waste and
 * per-row setup before.
 *
 * The phases are zeroed once per task: every channel writes the same input
 * positions, so the padding stays 0. On AVX-512, planes of at most 32
 * columns are filled a row at a time (one masked load, widened, one vpermw
 * per column phase with zeros at the padding); wider ones per phase row.
 *
 * Taps go in pairs through vpmaddwd (AVX2) or vpdpwssd (AVX-512 VNNI) on
 * interleaved int16; an odd last tap gets a zero-weight partner. Channels
 * are split over the threads in ranges; each channel's multiplier is made
 * in its task (mge_qmul_make per channel is not free at 960 channels).
 * Every output is computed by the same code whatever the split. */
#include "cpu_qint8.h"

typedef struct qdw_geom {
    int64_t Hq, Wq, L, PS;   /* phase rows, columns; wide lanes OH * Wq; phase stride (int16) */
} qdw_geom;

static void qdw_geometry(const cpu_conv *c, qdw_geom *g)
{
    g->Hq = c->OH + (c->kh - 1) * c->dh / c->sh;
    g->Wq = c->OW + (c->kw - 1) * c->dw / c->sw;
    g->L = c->OH * g->Wq;
    /* vector reads run up to Wq + 31 lanes past a phase's Hq * Wq */
    g->PS = (g->Hq * g->Wq + g->Wq + 32 + 31) / 32 * 32;
}

/* per thread: the phases, the wide int32 acc (portable), the wide int8
 * rows, the tap offsets and weight pairs */
static size_t qdw_parts(const cpu_conv *c, const qdw_geom *g, size_t *o_acc, size_t *o_tmp, size_t *o_tap,
                        size_t *o_w2)
{
    size_t lanes = (size_t)((g->L + 31) / 32 * 32);
    *o_acc = QG_AL((size_t)(c->sh * c->sw * g->PS) * 2);
    *o_tmp = *o_acc + QG_AL(lanes * 4);
    *o_tap = *o_tmp + QG_AL(lanes + 64);
    *o_w2 = *o_tap + QG_AL((size_t)(c->ksz + 2) * 8);
    return *o_w2 + QG_AL((size_t)(c->ksz / 2 + 2) * 4);
}

void mge_cpu_qdw_bytes(const cpu_conv *c, size_t *shared, size_t *per)
{
    qdw_geom g;
    size_t a, b, t, w;
    qdw_geometry(c, &g);
    *shared = 0;
    *per = QG_AL(qdw_parts(c, &g, &a, &b, &t, &w));
}

typedef struct qdw_job {
    const cpu_conv *c;
    qdw_geom g;
    const int8_t *x, *w;
    const int32_t *bias;
    int8_t *y;
    char *tws;
    size_t per;
    int32_t xz;
    double xs, ys;
    const float *wscale;
    int per_channel;
    qg_epi e;
    int level;
} qdw_job;

/* d[i] = x[i * s] - xz for i in [0, n) */
CPU_MULTI(qdw_widen, (int16_t *restrict d, const int8_t *restrict x, int64_t n, int64_t s, int32_t xz),
          (d, x, n, s, xz), {
              if (s == 1)
                  for (int64_t i = 0; i < n; i++)
                      d[i] = (int16_t)(x[i] - xz);
              else
                  for (int64_t i = 0; i < n; i++)
                      d[i] = (int16_t)(x[i * s] - xz);
          })

CPU_MULTI(qdw_acc_run, (int32_t *restrict acc, const int16_t *restrict r, int64_t n, int32_t wv), (acc, r, n, wv), {
    for (int64_t i = 0; i < n; i++)
        acc[i] += r[i] * wv;
})

#if QG_X86
/* qdw_widen for s = 1 or 2, 32 outputs a step with masked (fault-free)
 * loads: rows of small planes are short */
static QG_512 void qdw_widen_512(int16_t *d, const int8_t *x, int64_t n, int64_t s, int32_t xz)
{
    const __m512i z = _mm512_set1_epi16((short)xz);
    for (int64_t i = 0; i < n; i += 32) {
        int64_t k = n - i < 32 ? n - i : 32;
        __mmask32 m = (__mmask32)(k >= 32 ? 0xFFFFFFFFu : (1u << k) - 1);
        __m256i b;
        if (s == 1) {
            b = _mm256_maskz_loadu_epi8(m, x + i);
        } else {   /* the even bytes of 2k - 1: the low byte of each int16 */
            __mmask64 m2 = (__mmask64)(2 * k - 1 >= 64 ? ~0ULL : (1ULL << (2 * k - 1)) - 1);
            b = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(m2, x + 2 * i));
        }
        _mm512_mask_storeu_epi16(d + i, m, _mm512_sub_epi16(_mm512_cvtepi8_epi16(b), z));
    }
}

/* small planes (a row and a phase row in one zmm of int16): per input row
 * one masked load, widened, then each column phase picked by vpermw with
 * zeros at the padding; a whole phase row is stored (its padding is 0) */
static int qdw_small(const cpu_conv *c, const qdw_geom *g)
{
    return c->W <= 32 && g->Wq <= 32 && c->sw <= 64 && c->sh <= 64;
}

typedef struct qdw_perm {
    int16_t idx[32];   /* phase column q <- input column idx[q] */
    uint32_t valid;    /* the columns that are inputs, not padding */
} qdw_perm;

/* the column permutation of each phase px, once per task */
static void qdw_perms(const cpu_conv *c, const qdw_geom *g, qdw_perm *pm)
{
    for (int64_t px = 0; px < c->sw; px++) {
        pm[px].valid = 0;
        for (int64_t q = 0; q < 32; q++) {
            int64_t ix = q * c->sw + px - c->pw;
            int ok = q < g->Wq && ix >= 0 && ix < c->W;
            pm[px].idx[q] = (int16_t)(ok ? ix : 0);
            pm[px].valid |= (uint32_t)ok << q;
        }
    }
}

static QG_512 void qdw_fill_small(const cpu_conv *c, const qdw_geom *g, const int8_t *x, int32_t xz,
                                  const uint8_t *usey, const uint8_t *usex, const qdw_perm *pm, int16_t *ph)
{
    int64_t sh = c->sh, sw = c->sw, Wq = g->Wq;
    __m512i idx[2];
    __mmask32 valid[2];
    for (int64_t px = 0; px < sw && px < 2; px++)
        idx[px] = _mm512_loadu_si512(pm[px].idx), valid[px] = (__mmask32)pm[px].valid;
    const __mmask32 ld = (__mmask32)(c->W >= 32 ? 0xFFFFFFFFu : (1u << c->W) - 1);
    const __mmask32 st = (__mmask32)(Wq >= 32 ? 0xFFFFFFFFu : (1u << Wq) - 1);
    const __m512i z = _mm512_set1_epi16((short)xz);
    /* padded row iy + ph is row r of phase py (no division per row: idiv is slow) */
    for (int64_t iy = 0, py = c->ph % sh, r = c->ph / sh; iy < c->H && r < g->Hq; iy++, py = py + 1 < sh ? py + 1 : 0,
                 r += py == 0) {
        if (!usey[py])
            continue;
        __m512i v = _mm512_sub_epi16(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(ld, x + iy * c->W)), z);
        int16_t *d = ph + py * sw * g->PS + r * Wq;
        for (int64_t px = 0; px < sw; px++)
            if (usex[px]) {
                __m512i ix = px < 2 ? idx[px] : _mm512_loadu_si512(pm[px].idx);
                __mmask32 ok = px < 2 ? valid[px] : (__mmask32)pm[px].valid;
                _mm512_mask_storeu_epi16(d + px * g->PS, st, _mm512_maskz_permutexvar_epi16(ok, ix, v));
            }
    }
}

/* the OW outputs of each wide row (OW <= Wq <= 32) to y */
static QG_512 void qdw_rows_512(const int8_t *tmp, int64_t Wq, int64_t OH, int64_t OW, int8_t *y)
{
    const __mmask32 m = (__mmask32)(OW >= 32 ? 0xFFFFFFFFu : (1u << OW) - 1);
    for (int64_t oy = 0; oy < OH; oy++)
        _mm256_mask_storeu_epi8(y + oy * OW, m, _mm256_maskz_loadu_epi8(m, tmp + oy * Wq));
}

/* the wide plane, 32 lanes a step: pairs of taps into int32 with vpdpwssd */
static QG_512 void qdw_plane_512(const int16_t *ph, const int64_t *tap, const int32_t *w2, int64_t npair, int64_t L,
                                 const qg_row *rp, const qg_epi *e, int8_t *tmp)
{
    const __m512i i0 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), i1 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (int64_t o0 = 0; o0 < L; o0 += 32) {
        __m512i lo = _mm512_setzero_si512(), hi = lo;
        for (int64_t t = 0; t < npair; t++) {
            __m512i va = _mm512_loadu_si512(ph + tap[2 * t] + o0), vb = _mm512_loadu_si512(ph + tap[2 * t + 1] + o0);
            __m512i wv = _mm512_set1_epi32(w2[t]);
            lo = _mm512_dpwssd_epi32(lo, _mm512_unpacklo_epi16(va, vb), wv);
            hi = _mm512_dpwssd_epi32(hi, _mm512_unpackhi_epi16(va, vb), wv);
        }
        /* per 128-bit lane k: lo holds outputs 8k..8k+3, hi 8k+4..8k+7 */
        __m512i v0 = _mm512_permutex2var_epi64(lo, i0, hi), v1 = _mm512_permutex2var_epi64(lo, i1, hi);
        int n = (int)(L - o0 < 32 ? L - o0 : 32);
        epi_zmm(v0, rp, e, tmp + o0, zmask(n));   /* adds off itself */
        epi_zmm(v1, rp, e, tmp + o0 + 16, zmask(n - 16));
    }
}

static QG_AVX2 void qdw_plane_avx2(const int16_t *ph, const int64_t *tap, const int32_t *w2, int64_t npair, int64_t L,
                                   const qg_row *rp, const qg_epi *e, int8_t *tmp)
{
    const __m256i off = _mm256_set1_epi32(rp->off);
    for (int64_t o0 = 0; o0 < L; o0 += 16) {
        __m256i lo = _mm256_setzero_si256(), hi = lo;
        for (int64_t t = 0; t < npair; t++) {
            __m256i va = _mm256_loadu_si256((const __m256i *)(ph + tap[2 * t] + o0));
            __m256i vb = _mm256_loadu_si256((const __m256i *)(ph + tap[2 * t + 1] + o0));
            __m256i wv = _mm256_set1_epi32(w2[t]);
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(va, vb), wv));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(va, vb), wv));
        }
        /* unpacks work within 128-bit lanes: lo = outputs 0-3, 8-11, hi = 4-7, 12-15 */
        __m256i v0 = _mm256_permute2x128_si256(lo, hi, 0x20), v1 = _mm256_permute2x128_si256(lo, hi, 0x31);
        int n = (int)(L - o0 < 16 ? L - o0 : 16);
        epi_ymm(_mm256_add_epi32(v0, off), rp, e, tmp + o0, n < 8 ? n : 8);
        epi_ymm(_mm256_add_epi32(v1, off), rp, e, tmp + o0 + 8, n - 8);
    }
}
#endif

static void qdw_tasks(void *arg, int64_t t0, int64_t t1, int thread)
{
    const qdw_job *j = arg;
    const cpu_conv *c = j->c;
    const qdw_geom *g = &j->g;
    size_t o_acc, o_tmp, o_tap, o_w2;
    qdw_parts(c, g, &o_acc, &o_tmp, &o_tap, &o_w2);
    char *ws = j->tws + (size_t)thread * j->per;
    int16_t *ph = (int16_t *)(void *)ws;
    int32_t *acc = (int32_t *)(void *)(ws + o_acc);
    int8_t *tmp = (int8_t *)(ws + o_tmp);
    int64_t *tap = (int64_t *)(void *)(ws + o_tap);
    int32_t *w2 = (int32_t *)(void *)(ws + o_w2);
    int64_t sh = c->sh, sw = c->sw, Hq = g->Hq, Wq = g->Wq, L = g->L, PS = g->PS;
    /* the slack past each phase is read (junk lanes), never written: zero it once */
    memset(ph, 0, (size_t)(sh * sw * PS) * 2);
    /* the phases some tap reads, and where each tap starts */
    uint8_t usey[64] = {0}, usex[64] = {0};
    int64_t npair = (c->ksz + 1) / 2;
    for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
            int64_t py = ky * c->dh % sh, px = kx * c->dw % sw;
            if (py < 64 && px < 64)
                usey[py] = usex[px] = 1;
            tap[ky * c->kw + kx] = (py * sw + px) * PS + (ky * c->dh / sh) * Wq + kx * c->dw / sw;
        }
    tap[c->ksz] = tap[0];   /* the zero-weight partner of an odd last tap */
    int small = 0;
#if QG_X86
    qdw_perm pm[64];
    small = j->level >= MGE_INT8_AVX512VNNI && qdw_small(c, g);
    if (small)
        qdw_perms(c, g, pm);
#endif
    (void)small;
    for (int64_t t = t0; t < t1; t++) {
        int64_t ch = t % c->C, img = t / c->C;
        const int8_t *xc = j->x + (img * c->C + ch) * c->H * c->W;
#if QG_X86
        if (small) {
            qdw_fill_small(c, g, xc, j->xz, usey, usex, pm, ph);
            CPU_VZEROUPPER();   /* cpu.h: GCC leaves the upper halves dirty */
        } else
#endif
            for (int64_t py = 0; py < sh; py++)
                for (int64_t px = 0; px < sw; px++) {
                    if ((py < 64 && !usey[py]) || (px < 64 && !usex[px]))
                        continue;
                    int64_t lo, hi;
                    cpu_valid_range(Wq, c->W, sw, c->pw, px, &lo, &hi);
                    for (int64_t r = 0; r < Hq && lo < hi; r++) {
                        /* the padding stays 0 from the memset above: only the inputs are written */
                        int64_t iy = r * sh + py - c->ph;
                        if (iy < 0 || iy >= c->H)
                            continue;
                        int16_t *d = ph + (py * sw + px) * PS + r * Wq;
                        const int8_t *xr = xc + iy * c->W + lo * sw + px - c->pw;
#if QG_X86
                        if (j->level >= MGE_INT8_AVX512VNNI && sw <= 2) {
                            qdw_widen_512(d + lo, xr, hi - lo, sw, j->xz);
                            continue;
                        }
#endif
                        qdw_widen(d + lo, xr, hi - lo, sw, j->xz);
                    }
                }
#if QG_X86
        if (!small && j->level >= MGE_INT8_AVX512VNNI)
            CPU_VZEROUPPER();   /* after qdw_widen_512 */
#endif
        const int8_t *wc = j->w + ch * c->ksz;
        for (int64_t k = 0; k < c->ksz; k += 2) {
            uint32_t hiw = k + 1 < c->ksz ? (uint32_t)(uint16_t)(int16_t)wc[k + 1] << 16 : 0;
            w2[k / 2] = (int32_t)((uint32_t)(uint16_t)(int16_t)wc[k] | hiw);
        }
        qg_row row;
        mge_qmul q;
        /* the range was checked for every channel before the tasks ran */
        mge_qmul_make(j->xs * (double)j->wscale[j->per_channel ? ch : 0] / j->ys, &q);
        row.mult = q.mult, row.shift = q.shift, row.off = j->bias ? j->bias[ch] : 0;
        int done = 0;
#if QG_X86
        if (j->level >= MGE_INT8_AVX512VNNI)
            qdw_plane_512(ph, tap, w2, npair, L, &row, &j->e, tmp), done = 1;
        else if (j->level >= MGE_INT8_AVX2)
            qdw_plane_avx2(ph, tap, w2, npair, L, &row, &j->e, tmp), done = 1;
        if (done)
            CPU_VZEROUPPER();
#endif
        if (!done) {
            for (int64_t o = 0; o < L; o++)
                acc[o] = 0;
            for (int64_t k = 0; k < c->ksz; k++)
                qdw_acc_run(acc, ph + tap[k], L, wc[k]);
            for (int64_t o = 0; o < L; o++)
                tmp[o] = qg_out((int32_t)((uint32_t)acc[o] + (uint32_t)row.off), &row, &j->e);
        }
        int8_t *yc = j->y + (img * c->O + ch) * c->P;
#if QG_X86
        if (small) {   /* rows of at most 32: one masked move each, not a memcpy call */
            qdw_rows_512(tmp, Wq, c->OH, c->OW, yc);
            continue;
        }
#endif
        for (int64_t oy = 0; oy < c->OH; oy++)
            memcpy(yc + oy * c->OW, tmp + oy * Wq, (size_t)c->OW);
    }
}

int mge_cpu_qdw_run(const mge_kctx *ctx, const mge_node *n, const cpu_conv *c, mge_tensor *const *in,
                    mge_tensor *const *out, char *shared, char *tws, size_t per)
{
    (void)shared;
    const mge_tensor *w = in[1];
    qdw_job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    qdw_geometry(c, &j.g);
    j.x = in[0]->data, j.w = w->data, j.y = out[0]->data;
    j.bias = n->nin > 2 ? in[2]->data : NULL;
    j.tws = tws, j.per = per;
    j.xz = (int32_t)mge_node_int(n, MGE_KEY_x_zero, 0);
    j.xs = mge_node_float(n, MGE_KEY_x_scale, 1), j.ys = mge_node_float(n, MGE_KEY_y_scale, 1);
    j.wscale = w->q.scale;
    j.per_channel = w->q.axis == 0;
    j.e.yz = (int32_t)mge_node_int(n, MGE_KEY_y_zero, 0);
    mge_q_act_bounds(mge_node_int(n, MGE_KEY_act, -1), j.ys, j.e.yz, &j.e.lo, &j.e.hi);
    j.level = QG_X86 ? mge_cpu_int8() : 0;
    /* mge_qmul_make's range, for every channel, before anything runs */
    for (int64_t ch = 0; ch < (j.per_channel ? c->C : 1); ch++) {
        double m = j.xs * (double)j.wscale[ch] / j.ys;
        if (!(m >= 0) || !(m < 1))
            return 0;
    }
    cpu_parallel(ctx, c->N * c->C, 1, qdw_tasks, &j);
    return 1;
}
