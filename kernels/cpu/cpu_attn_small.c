/* cpu_attn_small.c — the three products of attention on one head when all
 * its keys fit one tile (Sk <= cpu_attn.c's AT_BC) and the head widths are
 * multiples of 16: scores Q K^T, P V and P^T X. Small heads (gpt-tiny's
 * 64 x 16) spend most of their time in mge_sgemm's packing and edge
 * handling at these sizes; here each product runs from rows in L1 on a
 * register block of 4 rows x 16 lanes held in vector-extension values
 * (16 floats: one zmm on AVX-512, two ymm on AVX2), compiled per ISA. Sums
 * run in a fixed order over the reduced index, so results depend on the
 * shapes only. */
#include "cpu.h"

#include <string.h>

typedef float as_v16 __attribute__((vector_size(64)));
/* the same, for loads and stores at any float's address */
typedef float as_v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define as_load(p) (*(const as_v16u *)(p))
#define as_store(p, v) (*(as_v16u *)(p) = (v))

/* C[r][j] = alpha * sum_e X[r][e] YT[e][j] for j < ncol (a multiple of 16;
 * YT has that many readable columns). */
CPU_MULTI3(as_scores,
           (const float *restrict X, int64_t ldx, int64_t rows, int64_t E, const float *restrict YT, int64_t ldy,
            int64_t ncol, float alpha, float *restrict C, int64_t ldc),
           (X, ldx, rows, E, YT, ldy, ncol, alpha, C, ldc), {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *x0 = X + r * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
        for (int64_t j = 0; j < ncol; j += 16) {
            as_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int64_t e = 0; e < E; e++) {
                as_v16 y = as_load(YT + e * ldy + j);
                a0 += x0[e] * y;
                a1 += x1[e] * y;
                a2 += x2[e] * y;
                a3 += x3[e] * y;
            }
            as_store(C + r * ldc + j, a0 * alpha);
            as_store(C + (r + 1) * ldc + j, a1 * alpha);
            as_store(C + (r + 2) * ldc + j, a2 * alpha);
            as_store(C + (r + 3) * ldc + j, a3 * alpha);
        }
    }
    for (; r < rows; r++)
        for (int64_t j = 0; j < ncol; j += 16) {
            as_v16 a0 = {0};
            for (int64_t e = 0; e < E; e++)
                a0 += X[r * ldx + e] * as_load(YT + e * ldy + j);
            as_store(C + r * ldc + j, a0 * alpha);
        }
})

/* C[r][e] (+)= sum_j P[r][j] Y[j][e] for j < kn; Y and C are W wide (a
 * multiple of 16). */
CPU_MULTI3(as_pv,
           (const float *restrict P, int64_t ldp, int64_t rows, int64_t kn, const float *restrict Y, int64_t W,
            float *restrict C, int acc),
           (P, ldp, rows, kn, Y, W, C, acc), {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *p0 = P + r * ldp, *p1 = p0 + ldp, *p2 = p1 + ldp, *p3 = p2 + ldp;
        for (int64_t e = 0; e < W; e += 16) {
            as_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int64_t j = 0; j < kn; j++) {
                as_v16 y = as_load(Y + j * W + e);
                a0 += p0[j] * y;
                a1 += p1[j] * y;
                a2 += p2[j] * y;
                a3 += p3[j] * y;
            }
            float *c = C + r * W + e;
            if (acc) {
                a0 += as_load(c);
                a1 += as_load(c + W);
                a2 += as_load(c + 2 * W);
                a3 += as_load(c + 3 * W);
            }
            as_store(c, a0);
            as_store(c + W, a1);
            as_store(c + 2 * W, a2);
            as_store(c + 3 * W, a3);
        }
    }
    for (; r < rows; r++)
        for (int64_t e = 0; e < W; e += 16) {
            as_v16 a0 = {0};
            for (int64_t j = 0; j < kn; j++)
                a0 += P[r * ldp + j] * as_load(Y + j * W + e);
            if (acc)
                a0 += as_load(C + r * W + e);
            as_store(C + r * W + e, a0);
        }
})

/* C[j][e] += sum_r P[r][j] X[r][e] for j < kn, r < rows; X and C are W
 * wide (a multiple of 16). */
CPU_MULTI3(as_ptx,
           (const float *restrict P, int64_t ldp, int64_t rows, int64_t kn, const float *restrict X, int64_t W,
            float *restrict C),
           (P, ldp, rows, kn, X, W, C), {
    int64_t j = 0;
    for (; j + 4 <= kn; j += 4)
        for (int64_t e = 0; e < W; e += 16) {
            as_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int64_t r = 0; r < rows; r++) {
                as_v16 x = as_load(X + r * W + e);
                const float *p = P + r * ldp + j;
                a0 += p[0] * x;
                a1 += p[1] * x;
                a2 += p[2] * x;
                a3 += p[3] * x;
            }
            float *c = C + j * W + e;
            as_store(c, as_load(c) + a0);
            as_store(c + W, as_load(c + W) + a1);
            as_store(c + 2 * W, as_load(c + 2 * W) + a2);
            as_store(c + 3 * W, as_load(c + 3 * W) + a3);
        }
    for (; j < kn; j++)
        for (int64_t e = 0; e < W; e += 16) {
            as_v16 a0 = {0};
            for (int64_t r = 0; r < rows; r++)
                a0 += P[r * ldp + j] * as_load(X + r * W + e);
            as_store(C + j * W + e, as_load(C + j * W + e) + a0);
        }
})

void cpu_attn_scores(const float *X, int64_t ldx, int64_t rows, int64_t E, const float *YT, int64_t ldy,
                     int64_t ncol, float alpha, float *C, int64_t ldc)
{
    as_scores(X, ldx, rows, E, YT, ldy, ncol, alpha, C, ldc);
}

void cpu_attn_pv(const float *P, int64_t ldp, int64_t rows, int64_t kn, const float *Y, int64_t W, float *C,
                 int accumulate)
{
    as_pv(P, ldp, rows, kn, Y, W, C, accumulate);
}

void cpu_attn_ptx(const float *P, int64_t ldp, int64_t rows, int64_t kn, const float *X, int64_t W, float *C)
{
    as_ptx(P, ldp, rows, kn, X, W, C);
}
