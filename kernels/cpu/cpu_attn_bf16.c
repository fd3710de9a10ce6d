/* cpu_attn_bf16.c — the two products of scaled_dot_product_attention's
 * fused cpu forward (cpu_attn.c) at precision=bf16: S = scale * Q K^T and
 * O += P V with both operands rounded to bf16 (nearest even) and the sums
 * in f32. The mask, causal cut, online softmax and dropout stay in f32 in
 * cpu_attn.c; P, the f32 weights of a tile, is rounded to bf16 just before
 * P V, as flash-attention bf16 kernels do (vcvtne2ps2bf16: nearest even, a
 * denormal weight to 0).
 *
 * K and V are packed once per run (mge_cpu_attn_bf16_kv, one pool task per
 * leading index and key tile, before the query tiles start), tile by tile,
 * in pairs: the "VNNI" layout both tdpbf16ps and vdpbf16ps take, where row
 * r of a packed B holds, per column n, the two bf16 at k = 2r, 2r+1. So
 * each query tile only rounds its own Q and its weights P. Per thread, in
 * its scratch (mge_cpu_attn_bf16_ws bytes): Q and P as bf16 rows, and P V
 * in f32 before it is added to O. Every dimension is padded with zeros to
 * a multiple of 32, so one 32x32 block kernel (four 16x16 AMX tiles, or
 * 8 rows x 32 columns of zmm accumulators) covers every shape.
 *
 * Levels: MGE_BF16_AMX (tile config loaded per product, since tile state
 * is per thread and a pool task may land on any thread) and MGE_BF16_AVX512.
 * A block's sum order depends only on the level, never on the thread, so
 * results are the same for any thread count. */
#include "cpu.h"
#include "kattn.h"

#if CPU_X86 && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define ATB_X86 1
#include <immintrin.h>
#else
#define ATB_X86 0
#endif

#define ATB_BR 64    /* query rows per tile: cpu_attn.c's AT_BR */
#define ATB_BC 256   /* keys per tile: cpu_attn.c's AT_BC */

static int64_t up32(int64_t x)
{
    return (x + 31) & ~(int64_t)31;
}

static size_t al64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

/* The thread scratch: qb [BR][Dp] u16, pb [BR][BC] u16 (or, while K and V
 * are packed, a key row and two value rows rounded), t [BR][Dvp] f32. */
typedef struct atb_ws {
    uint16_t *qb, *pb;
    float *t;
    int64_t Dp, Dvp;
} atb_ws;

static size_t atb_pb_elems(int64_t D, int64_t Dv)
{
    size_t a = (size_t)ATB_BR * ATB_BC, b = (size_t)(up32(D) + 2 * up32(Dv));
    return a > b ? a : b;
}

static void atb_split(void *ws, int64_t D, int64_t Dv, atb_ws *w)
{
    char *p = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    w->Dp = up32(D), w->Dvp = up32(Dv);
    w->qb = (uint16_t *)p, p += al64(sizeof(uint16_t) * ATB_BR * (size_t)w->Dp);
    w->pb = (uint16_t *)p, p += al64(sizeof(uint16_t) * atb_pb_elems(D, Dv));
    w->t = (float *)p;
}

size_t mge_cpu_attn_bf16_ws(int64_t D, int64_t Dv)
{
    int64_t Dp = up32(D), Dvp = up32(Dv);
    return 64 + al64(sizeof(uint16_t) * ATB_BR * (size_t)Dp) + al64(sizeof(uint16_t) * atb_pb_elems(D, Dv)) +
           al64(sizeof(float) * ATB_BR * (size_t)Dvp);
}

/* One packed key tile: kp [Dp/2][BC] u32 (K^T in pairs), then vp
 * [BC/2][Dvp] u32 (V in pairs). */
static size_t atb_tile_bytes(int64_t D, int64_t Dv)
{
    return al64(sizeof(uint32_t) * (size_t)(up32(D) / 2) * ATB_BC) +
           al64(sizeof(uint32_t) * (ATB_BC / 2) * (size_t)up32(Dv));
}

size_t mge_cpu_attn_bf16_kv_size(int64_t Sk, int64_t D, int64_t Dv)
{
    return (size_t)((Sk + ATB_BC - 1) / ATB_BC) * atb_tile_bytes(D, Dv);
}

static void atb_tile(void *kv, int64_t t, int64_t D, int64_t Dv, uint32_t **kp, uint32_t **vp)
{
    char *p = (char *)kv + (size_t)t * atb_tile_bytes(D, Dv);
    *kp = (uint32_t *)p;
    *vp = (uint32_t *)(p + al64(sizeof(uint32_t) * (size_t)(up32(D) / 2) * ATB_BC));
}

/* mge_f32_to_bf16, inline so the packing loops vectorize. */
static inline uint16_t atb_round(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* o[0..n) = x rounded, o[n..np) = 0. The AVX-512 loop is atb_round on
 * 16 lanes (vcvtneps2bf16 would differ on denormals). */
#if ATB_X86
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void atb_round_row_avx512(const float *x, int64_t n,
                                                                            uint16_t *o, int64_t np)
{
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x400000);
    int64_t i = 0;
    for (; i < np; i += 16) {
        __mmask16 live = i + 16 <= n ? (__mmask16)0xffff : i < n ? (__mmask16)((1u << (n - i)) - 1) : 0;
        __m512i u = _mm512_maskz_loadu_epi32(live, x + i);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs), inf);
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, quiet));
        __mmask16 st = i + 16 <= np ? (__mmask16)0xffff : (__mmask16)((1u << (np - i)) - 1);
        _mm256_mask_storeu_epi16(o + i, st, _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
}

/* P's rows: vcvtne2ps2bf16 rounds to nearest even as atb_round does,
 * except that it flushes denormals to zero; a weight below 2^-126 moves no
 * output (they are divided by l >= 1). */
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"))) static void
atb_round_p_avx512(const float *x, int64_t n, uint16_t *o, int64_t np)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm512_storeu_si512(o + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
    for (; i < np; i += 16) {
        __mmask16 live = i + 16 <= n ? (__mmask16)0xffff : i < n ? (__mmask16)((1u << (n - i)) - 1) : 0;
        __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(live, x + i));
        _mm256_storeu_si256((__m256i *)(o + i), (__m256i)h);
    }
}
#endif

static void atb_round_row(int level, const float *x, int64_t n, uint16_t *o, int64_t np)
{
#if ATB_X86
    if (level != MGE_BF16_NONE) {
        atb_round_row_avx512(x, n, o, np);
        return;
    }
#endif
    (void)level;
    int64_t i = 0;
    for (; i < n; i++)
        o[i] = atb_round(x[i]);
    for (; i < np; i++)
        o[i] = 0;
}

/* ---------------------------------------------------------------- block products */

/* C [M x N] (ld ldc, overwritten) = A [M x K] (bf16 rows, ld lda) times
 * B [K x N] packed in pairs ([K/2][ldb] u32); M, N, K multiples of 32. */
#if ATB_X86
typedef struct atb_tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} atb_tilecfg;

__attribute__((target("amx-tile,amx-bf16"))) static void atb_gemm_amx(const uint16_t *A, int64_t lda,
                                                                         const uint32_t *B, int64_t ldb, float *C,
                                                                         int64_t ldc, int64_t M, int64_t N, int64_t K)
{
    atb_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++)
        cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    size_t sa = (size_t)lda * 2, sb = (size_t)ldb * 4, sc = (size_t)ldc * 4;
    for (int64_t m0 = 0; m0 < M; m0 += 32)
        for (int64_t n0 = 0; n0 < N; n0 += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t k0 = 0; k0 < K; k0 += 32) {
                _tile_loadd(4, A + m0 * lda + k0, sa);
                _tile_loadd(5, A + (m0 + 16) * lda + k0, sa);
                _tile_loadd(6, B + k0 / 2 * ldb + n0, sb);
                _tile_loadd(7, B + k0 / 2 * ldb + n0 + 16, sb);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, C + m0 * ldc + n0, sc);
            _tile_stored(1, C + m0 * ldc + n0 + 16, sc);
            _tile_stored(2, C + (m0 + 16) * ldc + n0, sc);
            _tile_stored(3, C + (m0 + 16) * ldc + n0 + 16, sc);
        }
    _tile_release();
}

__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"))) static void
atb_gemm_avx512(const uint16_t *A, int64_t lda, const uint32_t *B, int64_t ldb, float *C, int64_t ldc, int64_t M,
                int64_t N, int64_t K)
{
    for (int64_t m0 = 0; m0 < M; m0 += 8)
        for (int64_t n0 = 0; n0 < N; n0 += 32) {
            __m512 c0[8], c1[8];
            for (int i = 0; i < 8; i++)
                c0[i] = c1[i] = _mm512_setzero_ps();
            for (int64_t r = 0; r < K / 2; r++) {
                __m512bh b0 = (__m512bh)_mm512_loadu_si512(B + r * ldb + n0);
                __m512bh b1 = (__m512bh)_mm512_loadu_si512(B + r * ldb + n0 + 16);
                for (int i = 0; i < 8; i++) {
                    uint32_t ap;
                    memcpy(&ap, A + (m0 + i) * lda + 2 * r, sizeof ap);
                    __m512bh a = (__m512bh)_mm512_set1_epi32((int)ap);
                    c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
                    c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
                }
            }
            for (int i = 0; i < 8; i++) {
                _mm512_storeu_ps(C + (m0 + i) * ldc + n0, c0[i]);
                _mm512_storeu_ps(C + (m0 + i) * ldc + n0 + 16, c1[i]);
            }
        }
    _mm256_zeroupper();
}
#endif

/* The level's kernel; MGE_BF16_NONE (never chosen by cpu_attn.c) and
 * other builds: the same sums in plain f32 loops over the bf16 values. */
static void atb_gemm(int level, const uint16_t *A, int64_t lda, const uint32_t *B, int64_t ldb, float *C,
                     int64_t ldc, int64_t M, int64_t N, int64_t K)
{
#if ATB_X86
    if (level == MGE_BF16_AMX) {
        atb_gemm_amx(A, lda, B, ldb, C, ldc, M, N, K);
        return;
    }
    if (level == MGE_BF16_AVX512) {
        atb_gemm_avx512(A, lda, B, ldb, C, ldc, M, N, K);
        return;
    }
#else
    (void)level;
#endif
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float s = 0;
            for (int64_t r = 0; r < K / 2; r++) {
                uint32_t b = B[r * ldb + n];
                s += mge_bf16_to_f32(A[m * lda + 2 * r]) * mge_bf16_to_f32((uint16_t)b) +
                     mge_bf16_to_f32(A[m * lda + 2 * r + 1]) * mge_bf16_to_f32((uint16_t)(b >> 16));
            }
            C[m * ldc + n] = s;
        }
}

/* S [br, bc] (ld lds) *= scale; O [br, dv] += T [br, dv] (ld ldt). On 16
 * lanes at either level (both imply AVX-512). */
#if ATB_X86
__attribute__((target("avx512f"))) static void atb_scale_avx512(float *S, int64_t lds, int64_t br, int64_t bc,
                                                                float scale)
{
    __m512 f = _mm512_set1_ps(scale);
    for (int64_t r = 0; r < br; r++)
        for (int64_t c = 0; c < bc; c += 16) {
            __mmask16 m = c + 16 <= bc ? (__mmask16)0xffff : (__mmask16)((1u << (bc - c)) - 1);
            float *p = S + r * lds + c;
            _mm512_mask_storeu_ps(p, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p), f));
        }
}

__attribute__((target("avx512f"))) static void atb_add_avx512(float *O, const float *T, int64_t ldt, int64_t br,
                                                              int64_t dv)
{
    for (int64_t r = 0; r < br; r++)
        for (int64_t e = 0; e < dv; e += 16) {
            __mmask16 m = e + 16 <= dv ? (__mmask16)0xffff : (__mmask16)((1u << (dv - e)) - 1);
            float *p = O + r * dv + e;
            _mm512_mask_storeu_ps(p, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), _mm512_loadu_ps(T + r * ldt + e)));
        }
}
#endif

static void atb_scale(int level, float *S, int64_t lds, int64_t br, int64_t bc, float scale)
{
#if ATB_X86
    if (level != MGE_BF16_NONE) {
        atb_scale_avx512(S, lds, br, bc, scale);
        return;
    }
#endif
    (void)level;
    for (int64_t r = 0; r < br; r++)
        for (int64_t c = 0; c < bc; c++)
            S[r * lds + c] *= scale;
}

static void atb_add(int level, float *O, const float *T, int64_t ldt, int64_t br, int64_t dv)
{
#if ATB_X86
    if (level != MGE_BF16_NONE) {
        atb_add_avx512(O, T, ldt, br, dv);
        return;
    }
#endif
    (void)level;
    for (int64_t r = 0; r < br; r++)
        for (int64_t e = 0; e < dv; e++)
            O[r * dv + e] += T[r * ldt + e];
}

/* ---------------------------------------------------------------- the attention steps */

void mge_cpu_attn_bf16_kv(int level, void *kv, const float *k, const float *v, int64_t Sk, int64_t D, int64_t Dv,
                          int64_t t, void *ws)
{
    atb_ws w;
    atb_split(ws, D, Dv, &w);
    uint32_t *kp, *vp;
    atb_tile(kv, t, D, Dv, &kp, &vp);
    int64_t j0 = t * ATB_BC, bc = Sk - j0 < ATB_BC ? Sk - j0 : ATB_BC, Dh = w.Dp / 2;
    /* kp[r][n] = (k[n][2r], k[n][2r+1]): each key row rounded, its pairs
     * down a column; columns past bc zero */
    uint16_t *row = w.pb;   /* P's room, free while packing */
    for (int64_t n = 0; n < ATB_BC; n++) {
        if (n < bc) {
            atb_round_row(level, k + (j0 + n) * D, D, row, w.Dp);
            for (int64_t r = 0; r < Dh; r++)
                kp[r * ATB_BC + n] = (uint32_t)row[2 * r] | (uint32_t)row[2 * r + 1] << 16;
        } else {
            for (int64_t r = 0; r < Dh; r++)
                kp[r * ATB_BC + n] = 0;
        }
    }
    /* vp[r][n] = (v[2r][n], v[2r+1][n]); rows past bc zero */
    uint16_t *r0 = w.pb, *r1 = w.pb + w.Dvp;
    for (int64_t r = 0; r < ATB_BC / 2; r++) {
        uint32_t *o = vp + r * w.Dvp;
        int64_t a = j0 + 2 * r;
        if (2 * r < bc)
            atb_round_row(level, v + a * Dv, Dv, r0, w.Dvp);
        else
            memset(r0, 0, sizeof(uint16_t) * (size_t)w.Dvp);
        if (2 * r + 1 < bc)
            atb_round_row(level, v + (a + 1) * Dv, Dv, r1, w.Dvp);
        else
            memset(r1, 0, sizeof(uint16_t) * (size_t)w.Dvp);
        for (int64_t n = 0; n < w.Dvp; n++)
            o[n] = (uint32_t)r0[n] | (uint32_t)r1[n] << 16;
    }
}

void mge_cpu_attn_bf16_q(int level, void *ws, const float *q, int64_t br, int64_t D, int64_t Dv)
{
    atb_ws w;
    atb_split(ws, D, Dv, &w);
    for (int64_t r = 0; r < up32(br); r++) {
        if (r < br)
            atb_round_row(level, q + r * D, D, w.qb + r * w.Dp, w.Dp);
        else
            memset(w.qb + r * w.Dp, 0, sizeof(uint16_t) * (size_t)w.Dp);
    }
}

void mge_cpu_attn_bf16_qk(int level, void *ws, const void *kv, int64_t t, int64_t br, int64_t bc, int64_t D,
                          int64_t Dv, float scale, float *S, int64_t lds)
{
    atb_ws w;
    atb_split(ws, D, Dv, &w);
    uint32_t *kp, *vp;
    atb_tile((void *)(uintptr_t)kv, t, D, Dv, &kp, &vp);
    atb_gemm(level, w.qb, w.Dp, kp, ATB_BC, S, lds, up32(br), up32(bc), w.Dp);
    atb_scale(level, S, lds, br, bc, scale);
}

void mge_cpu_attn_bf16_pv(int level, void *ws, const float *P, int64_t lds, const void *kv, int64_t t, int64_t br,
                          int64_t bc, int64_t D, int64_t Dv, float *O)
{
    atb_ws w;
    atb_split(ws, D, Dv, &w);
    uint32_t *kp, *vp;
    atb_tile((void *)(uintptr_t)kv, t, D, Dv, &kp, &vp);
    int64_t brp = up32(br), bcp = up32(bc);
    for (int64_t r = 0; r < brp; r++) {
        if (r < br) {
#if ATB_X86
            if (level != MGE_BF16_NONE)
                atb_round_p_avx512(P + r * lds, bc, w.pb + r * ATB_BC, bcp);
            else
#endif
                atb_round_row(level, P + r * lds, bc, w.pb + r * ATB_BC, bcp);
        } else {
            memset(w.pb + r * ATB_BC, 0, sizeof(uint16_t) * (size_t)bcp);
        }
    }
    atb_gemm(level, w.pb, ATB_BC, vp, w.Dvp, w.t, w.Dvp, brp, w.Dvp, bcp);
    atb_add(level, O, w.t, w.Dvp, br, Dv);
}
