/* test_quant_ref.c — the ref kernels of the int8 ops (kernels/ref/ref_quant.c)
 * against computations written here in double on the dequantized values:
 * qconv2d (padding, stride, dilation, groups, depthwise, per-channel and
 * per-tensor weight scales, bias, relu/relu6 clamps), qlinear, qadd with
 * different scales, quantize (ties to even, saturation, NaN), dequantize,
 * avgpool2d and global_avgpool on qs8 (rounding half away from zero), the
 * errors (requantization multiplier >= 1, bad weight scales, counted
 * padding), and one quantize -> qconv2d -> dequantize graph through the
 * executor. The fixed-point requantization rounds twice (mge_qmul_apply),
 * so a random case may differ from the real value rounded by one quantum,
 * but only next to a tie: away from ties the kernel must match exactly. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mge_rng rng;

static int rnd(int lo, int hi) /* in [lo, hi] */
{
    return lo + (int)(mge_rng_next(&rng) % (uint64_t)(hi - lo + 1));
}

/* floor(v + 0.5): the kernels round ties up. */
static double round_up(double v)
{
    return floor(v + 0.5);
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* act bounds written out from ops.def's comment (not from quant_math.h) */
static void bounds(int act, double ys, int yz, double *lo, double *hi)
{
    *lo = act >= 0 ? fmax(yz, -128) : -128;
    *hi = act == MGE_OP_RELU6 ? fmin(127, yz + nearbyint(6 / ys)) : 127;
    if (*hi < *lo)
        *hi = *lo;
}

/* Runs the ref kernel of a one-node graph (op over ins, with attrs) into
 * *y, allocated here with the inferred shape. The graph refusing the node
 * counts as a failed check. */
static mge_status run_ref(int op, int nin, mge_tensor *ins, int nattr, const mge_attr *at, mge_tensor *y,
                          mge_error *err)
{
    mge_graph *g = mge_graph_new();
    int ids[4];
    mge_error_clear(err);
    memset(y, 0, sizeof *y);
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = mge_graph_add_value(g, name, i ? MGE_VAL_PARAM : MGE_VAL_INPUT, ins[i].dtype, ins[i].ndim,
                                     ins[i].dims, err);
    }
    const char *outn[1] = {"y"};
    int ni = mge_graph_add_node(g, "q1", op, nin, ids, nattr, at, 1, outn, err);
    CHECK_MSG(ni >= 0, "%s", err->msg);
    if (ni < 0) {
        mge_graph_free(g);
        return MGE_ERR_INVALID;
    }
    const mge_value *yv = &g->values[g->nodes[ni].out[0]];
    mge_status s = mge_tensor_alloc(y, yv->dtype, yv->ndim, yv->dims, err);
    const mge_kernel *k = mge_backend_kernel(mge_backend_ref(), op, ins[0].dtype);
    CHECK(k != NULL);
    mge_tensor *ip[4] = {&ins[0], nin > 1 ? &ins[1] : NULL, nin > 2 ? &ins[2] : NULL, NULL};
    if (!s && k)
        s = ug_run_kernel(k, NULL, &g->nodes[ni], ip, y, err);
    mge_graph_free(g);
    return s;
}

static void alloc_q(mge_tensor *t, mge_dtype dt, int nd, const int64_t *dims)
{
    mge_error err;
    CHECK_OK(mge_tensor_alloc(t, dt, nd, dims, &err), err);
}

/* per-channel (nscale = O, axis 0) or per-tensor (nscale 1, axis -1) scales */
static void set_scales(mge_tensor *w, int n, const double *s)
{
    w->q.axis = n == 1 ? -1 : 0;
    w->q.nscale = n;
    w->q.scale = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++)
        w->q.scale[i] = (float)s[i];
}

/* ---------------------------------------------------------------- qconv2d */

typedef struct ccase {
    int64_t N, C, H, W, O, KH, KW, s, p, d, g;
    int bias, act, per_tensor, xz, yz;
    double xs, ys;
} ccase;

/* Random x, w, bias; the kernel against the real conv rounded. Returns how
 * many outputs were compared exactly (away from ties). */
static int conv_case(const ccase *c)
{
    mge_error err;
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->O, c->C / c->g, c->KH, c->KW}, bd[1] = {c->O};
    mge_tensor in[3];
    alloc_q(&in[0], MGE_QS8, 4, xd);
    alloc_q(&in[1], MGE_QS8, 4, wd);
    alloc_q(&in[2], MGE_QS32, 1, bd);
    int8_t *x = in[0].data, *w = in[1].data;
    int32_t *b = in[2].data;
    for (int64_t i = 0; i < mge_tensor_numel(&in[0]); i++)
        x[i] = (int8_t)rnd(-128, 127);
    for (int64_t i = 0; i < mge_tensor_numel(&in[1]); i++)
        w[i] = (int8_t)rnd(-127, 127);
    double ws[64];
    for (int64_t o = 0; o < c->O; o++) {
        b[o] = rnd(-3000, 3000);
        ws[o] = c->per_tensor ? 0.01 : 0.004 + 0.001 * (double)o;
    }
    set_scales(&in[1], c->per_tensor ? 1 : (int)c->O, ws);
    int64_t k2[2] = {c->KH, c->KW}, s2[2] = {c->s, c->s}, p2[2] = {c->p, c->p}, d2[2] = {c->d, c->d};
    mge_attr at[12] = {A(MGE_KEY_out, c->O),          A_ints(MGE_KEY_kernel, 2, k2),
                       A_ints(MGE_KEY_stride, 2, s2), A_ints(MGE_KEY_pad, 2, p2),
                       A_ints(MGE_KEY_dilation, 2, d2), A(MGE_KEY_groups, c->g),
                       A(MGE_KEY_bias, c->bias),       A(MGE_KEY_act, c->act),
                       A_f(MGE_KEY_x_scale, c->xs),    A(MGE_KEY_x_zero, c->xz),
                       A_f(MGE_KEY_y_scale, c->ys),    A(MGE_KEY_y_zero, c->yz)};
    mge_tensor y;
    CHECK_OK(run_ref(MGE_OP_QCONV2D, c->bias ? 3 : 2, in, 12, at, &y, &err), err);
    int64_t OH = (c->H + 2 * c->p - c->d * (c->KH - 1) - 1) / c->s + 1;
    int64_t OW = (c->W + 2 * c->p - c->d * (c->KW - 1) - 1) / c->s + 1;
    CHECK(y.dtype == MGE_QS8 && y.ndim == 4 && y.dims[1] == c->O && y.dims[2] == OH && y.dims[3] == OW);
    double lo, hi;
    bounds(c->act, c->ys, c->yz, &lo, &hi);
    int exact = 0, bad = 0;
    int64_t cg = c->C / c->g, og = c->O / c->g;
    for (int64_t n = 0; y.data && n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    /* real-valued conv of the dequantized tensors; the real 0 outside */
                    double r = c->bias ? c->xs * ws[o] * b[o] : 0;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t ih = oh * c->s - c->p + kh * c->d, iw = ow * c->s - c->p + kw * c->d;
                                if (ih < 0 || iw < 0 || ih >= c->H || iw >= c->W)
                                    continue;
                                double xv = c->xs * (x[((n * c->C + (o / og) * cg + ci) * c->H + ih) * c->W + iw] -
                                                     c->xz);
                                r += xv * ws[o] * w[((o * cg + ci) * c->KH + kh) * c->KW + kw];
                            }
                    double v = r / c->ys + c->yz, want = clampd(round_up(v), lo, hi);
                    int got = ((int8_t *)y.data)[((n * c->O + o) * OH + oh) * OW + ow];
                    double tie = fabs(v - floor(v) - 0.5);
                    if (fabs(got - want) > 1 || (tie > 0.01 && got != want)) {
                        if (bad++ < 5)
                            fprintf(stderr, "qconv2d [%lld,%lld,%lld,%lld]: got %d, want %g (real %.4f)\n",
                                    (long long)n, (long long)o, (long long)oh, (long long)ow, got, want, v);
                    }
                    exact += tie > 0.01;
                }
    CHECK(bad == 0);
    for (int i = 0; i < 3; i++)
        mge_tensor_free(&in[i]);
    mge_tensor_free(&y);
    return exact;
}

static void test_qconv2d_random(void)
{
    mge_rng_seed(&rng, 11);
    /* N C H W O KH KW s p d g bias act per_tensor xz yz xs ys */
    ccase cs[] = {
        {1, 3, 6, 7, 4, 3, 3, 1, 1, 1, 1, 1, -1, 0, 5, -3, 0.05, 0.3},       /* pad, bias */
        {2, 4, 7, 5, 6, 3, 2, 2, 2, 1, 2, 0, -1, 0, -20, 10, 0.03, 0.1},     /* groups, stride, no bias */
        {1, 6, 6, 6, 6, 3, 3, 1, 1, 2, 6, 1, -1, 0, 0, 0, 0.04, 0.05},       /* depthwise, dilation */
        {1, 5, 5, 5, 3, 1, 1, 1, 0, 1, 1, 1, -1, 1, 7, 2, 0.02, 0.04},       /* 1x1, per-tensor */
        {1, 4, 6, 6, 5, 3, 3, 1, 1, 1, 1, 1, MGE_OP_RELU, 0, 3, -20, 0.05, 0.2},  /* relu: lo = y_zero */
        {1, 4, 6, 6, 5, 3, 3, 1, 1, 1, 1, 1, MGE_OP_RELU6, 0, 3, -100, 0.05, 0.04}, /* relu6: hi = -100 + 150 */
    };
    int exact = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        exact += conv_case(&cs[i]);
    CHECK(exact > 500);   /* most outputs are away from ties and compared exactly */
}

/* Hand-computed: x = [1,1,2,2] = {1, 2, 3, 4} (x_zero 1: real {0,1,2,3} * 0.5),
 * w = [2,1,2,2] = {2,2,2,2}, {2,-2,0,4}, scales {0.25, 0.5}, kernel 2, pad 1:
 * 3x3 outputs; y_scale 1, y_zero 0 gives M = 0.125 and 0.25. The weights
 * are even so that every acc * M is a multiple of 1/4 (exact ties round up):
 * mge_qmul_apply rounds twice, and a value within 2^-(shift+1) of a tie
 * (1.375 at M = 1/8) may round the other way. */
static void test_qconv2d_exact(void)
{
    mge_error err;
    int64_t xd[4] = {1, 1, 2, 2}, wd[4] = {2, 1, 2, 2}, bd[1] = {2};
    mge_tensor in[3];
    alloc_q(&in[0], MGE_QS8, 4, xd);
    alloc_q(&in[1], MGE_QS8, 4, wd);
    alloc_q(&in[2], MGE_QS32, 1, bd);
    int8_t xv[4] = {1, 2, 3, 4}, wv[8] = {2, 2, 2, 2, 2, -2, 0, 4};
    memcpy(in[0].data, xv, 4);
    memcpy(in[1].data, wv, 8);
    ((int32_t *)in[2].data)[0] = 8;
    ((int32_t *)in[2].data)[1] = -40;
    double ws[2] = {0.25, 0.5};
    set_scales(&in[1], 2, ws);
    int64_t k2[2] = {2, 2}, p2[2] = {1, 1};
    mge_attr at[8] = {A(MGE_KEY_out, 2), A_ints(MGE_KEY_kernel, 2, k2), A_ints(MGE_KEY_pad, 2, p2),
                      A(MGE_KEY_act, -1), A_f(MGE_KEY_x_scale, 0.5), A(MGE_KEY_x_zero, 1),
                      A_f(MGE_KEY_y_scale, 1.0), A(MGE_KEY_y_zero, 0)};
    mge_tensor y;
    CHECK_OK(run_ref(MGE_OP_QCONV2D, 3, in, 8, at, &y, &err), err);
    /* d = x - 1 = {0,1,2,3} as [[0,1],[2,3]]; padding is d = 0.
     * channel 0 (w all 2): acc = 8 + 2 * window sums [[0, 1, 1], [2, 6, 4], [2, 5, 3]]
     *   = {8,10,10,12,20,16,12,18,14} * 0.125
     *   = {1, 1.25, 1.25, 1.5, 2.5, 2, 1.5, 2.25, 1.75} -> {1,1,1,2,3,2,2,2,2}
     * channel 1 (w [[2,-2],[0,4]] over the padded d, window (i,j) at padded
     *   rows i..i+1, cols j..j+1): acc = -40 + 2 d[i][j] - 2 d[i][j+1] + 4 d[i+1][j+1],
     *   times 0.25, computed below */
    int want0[9] = {1, 1, 1, 2, 3, 2, 2, 2, 2};
    double d[4][4] = {{0}};
    d[1][1] = 0, d[1][2] = 1, d[2][1] = 2, d[2][2] = 3; /* padded d, origin at (1,1) */
    int ok = y.data != NULL;
    for (int i = 0; ok && i < 3; i++)
        for (int j = 0; j < 3; j++) {
            CHECK(((int8_t *)y.data)[i * 3 + j] == want0[i * 3 + j]);
            double acc = -40 + 2 * d[i][j] - 2 * d[i][j + 1] + 4 * d[i + 1][j + 1];
            int want1 = (int)floor(acc * 0.25 + 0.5);
            CHECK_MSG(((int8_t *)y.data)[9 + i * 3 + j] == want1, "(%d,%d): %d vs %d", i, j,
                      ((int8_t *)y.data)[9 + i * 3 + j], want1);
        }
    mge_tensor_free(&y);

    /* relu6 with y_scale 0.5 (M = 0.25, 0.5), y_zero -10: clamp to [-10, -10 + 12] */
    at[3] = A(MGE_KEY_act, MGE_OP_RELU6);
    at[6] = A_f(MGE_KEY_y_scale, 0.5);
    at[7] = A(MGE_KEY_y_zero, -10);
    ((int32_t *)in[2].data)[0] = 400;   /* acc 400..412 * 0.25 = 100.. -> 2 */
    ((int32_t *)in[2].data)[1] = -400;  /* -> -10 */
    CHECK_OK(run_ref(MGE_OP_QCONV2D, 3, in, 8, at, &y, &err), err);
    for (int i = 0; y.data && i < 9; i++) {
        CHECK(((int8_t *)y.data)[i] == 2);
        CHECK(((int8_t *)y.data)[9 + i] == -10);
    }
    mge_tensor_free(&y);
    for (int i = 0; i < 3; i++)
        mge_tensor_free(&in[i]);
}

static void test_qconv2d_errors(void)
{
    mge_error err;
    int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {3, 2, 1, 1};
    mge_tensor in[2];
    alloc_q(&in[0], MGE_QS8, 4, xd);
    alloc_q(&in[1], MGE_QS8, 4, wd);
    int64_t k2[2] = {1, 1};
    mge_attr at[7] = {A(MGE_KEY_out, 3),          A_ints(MGE_KEY_kernel, 2, k2), A(MGE_KEY_bias, 0),
                      A(MGE_KEY_act, -1),         A_f(MGE_KEY_x_scale, 0.5),     A_f(MGE_KEY_y_scale, 0.01),
                      A(MGE_KEY_y_zero, 0)};
    mge_tensor y;
    /* no scales on the weight */
    CHECK(run_ref(MGE_OP_QCONV2D, 2, in, 7, at, &y, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "q1") != NULL);
    mge_tensor_free(&y);
    /* two scales for three channels */
    double ws[3] = {0.1, 0.2, 0.3};
    set_scales(&in[1], 2, ws);
    CHECK(run_ref(MGE_OP_QCONV2D, 2, in, 7, at, &y, &err) == MGE_ERR_INVALID);
    mge_tensor_free(&y);
    free(in[1].q.scale);
    /* M = 0.5 * 0.2 / 0.01 = 10 for channel 1 (0.5 for channel 0) */
    ws[0] = 0.01;
    set_scales(&in[1], 3, ws);
    CHECK(run_ref(MGE_OP_QCONV2D, 2, in, 7, at, &y, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "not below 1") && strstr(err.msg, "channel 1") && strstr(err.msg, "q1"), "%s",
              err.msg);
    mge_tensor_free(&y);
    /* qlinear too */
    mge_tensor li[2];
    int64_t ld[2] = {2, 4}, lw[2] = {2, 4};
    alloc_q(&li[0], MGE_QS8, 2, ld);
    alloc_q(&li[1], MGE_QS8, 2, lw);
    double one = 0.03; /* M = 1.5 */
    set_scales(&li[1], 1, &one);
    mge_attr la[5] = {A(MGE_KEY_out, 2), A(MGE_KEY_bias, 0), A_f(MGE_KEY_x_scale, 0.5),
                      A_f(MGE_KEY_y_scale, 0.01), A(MGE_KEY_act, -1)};
    CHECK(run_ref(MGE_OP_QLINEAR, 2, li, 5, la, &y, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "not below 1") != NULL);
    mge_tensor_free(&y);
    for (int i = 0; i < 2; i++) {
        mge_tensor_free(&in[i]);
        mge_tensor_free(&li[i]);
    }
}

/* ---------------------------------------------------------------- qlinear */

static void test_qlinear(void)
{
    mge_error err;
    mge_rng_seed(&rng, 5);
    for (int variant = 0; variant < 3; variant++) {
        const int64_t B0 = 2, B1 = 3, K = 37, O = 9;
        int bias = variant != 1, per_tensor = variant == 2, act = variant == 1 ? MGE_OP_RELU : -1;
        int xz = variant == 0 ? -7 : 12, yz = variant == 1 ? -30 : 4;
        double xs = 0.02, ys = 0.15;
        int64_t xd[3] = {B0, B1, K}, wd[2] = {O, K}, bd[1] = {O};
        mge_tensor in[3];
        alloc_q(&in[0], MGE_QS8, 3, xd);
        alloc_q(&in[1], MGE_QS8, 2, wd);
        alloc_q(&in[2], MGE_QS32, 1, bd);
        int8_t *x = in[0].data, *w = in[1].data;
        int32_t *b = in[2].data;
        for (int64_t i = 0; i < B0 * B1 * K; i++)
            x[i] = (int8_t)rnd(-128, 127);
        for (int64_t i = 0; i < O * K; i++)
            w[i] = (int8_t)rnd(-127, 127);
        double ws[9];
        for (int o = 0; o < O; o++) {
            b[o] = rnd(-20000, 20000);
            ws[o] = per_tensor ? 0.007 : 0.003 + 0.0011 * o;
        }
        set_scales(&in[1], per_tensor ? 1 : (int)O, ws);
        mge_attr at[7] = {A(MGE_KEY_out, O),      A(MGE_KEY_bias, bias),    A(MGE_KEY_act, act),
                          A_f(MGE_KEY_x_scale, xs), A(MGE_KEY_x_zero, xz), A_f(MGE_KEY_y_scale, ys),
                          A(MGE_KEY_y_zero, yz)};
        mge_tensor y;
        CHECK_OK(run_ref(MGE_OP_QLINEAR, bias ? 3 : 2, in, 7, at, &y, &err), err);
        CHECK(y.ndim == 3 && y.dims[2] == O && y.dims[1] == B1);
        double lo, hi;
        bounds(act, ys, yz, &lo, &hi);
        int bad = 0, clamped = 0;
        for (int64_t m = 0; y.data && m < B0 * B1; m++)
            for (int64_t o = 0; o < O; o++) {
                double r = bias ? xs * ws[o] * b[o] : 0;
                for (int64_t k = 0; k < K; k++)
                    r += xs * (x[m * K + k] - xz) * ws[o] * w[o * K + k];
                double v = r / ys + yz, want = clampd(round_up(v), lo, hi);
                int got = ((int8_t *)y.data)[m * O + o];
                clamped += want == lo;
                if (fabs(got - want) > 1 || (fabs(v - floor(v) - 0.5) > 0.01 && got != want))
                    bad++;
            }
        CHECK_MSG(bad == 0, "variant %d: %d wrong", variant, bad);
        if (act == MGE_OP_RELU)
            CHECK(clamped > 0);   /* the relu clamp was exercised */
        for (int i = 0; i < 3; i++)
            mge_tensor_free(&in[i]);
        mge_tensor_free(&y);
    }
}

/* ---------------------------------------------------------------- qadd */

static void test_qadd(void)
{
    mge_error err;
    mge_rng_seed(&rng, 9);
    int64_t d[2] = {7, 33};
    mge_tensor in[2];
    alloc_q(&in[0], MGE_QS8, 2, d);
    alloc_q(&in[1], MGE_QS8, 2, d);
    int8_t *a = in[0].data, *b = in[1].data;
    for (int i = 0; i < 7 * 33; i++) {
        a[i] = (int8_t)rnd(-128, 127);
        b[i] = (int8_t)rnd(-128, 127);
    }
    struct {
        double xs, x2s, ys;
        int za, zb, zy, act;
    } cs[] = {{0.1, 0.03, 0.12, 3, -9, 5, -1},
              {0.02, 0.5, 0.4, -128, 127, -50, MGE_OP_RELU},
              {0.05, 0.05, 0.02, 0, 0, -128, MGE_OP_RELU6}};
    for (int c = 0; c < 3; c++) {
        mge_attr at[7] = {A(MGE_KEY_act, cs[c].act),       A_f(MGE_KEY_x_scale, cs[c].xs),
                          A(MGE_KEY_x_zero, cs[c].za),     A_f(MGE_KEY_x2_scale, cs[c].x2s),
                          A(MGE_KEY_x2_zero, cs[c].zb),    A_f(MGE_KEY_y_scale, cs[c].ys),
                          A(MGE_KEY_y_zero, cs[c].zy)};
        mge_tensor y;
        CHECK_OK(run_ref(MGE_OP_QADD, 2, in, 7, at, &y, &err), err);
        double lo, hi;
        bounds(cs[c].act, cs[c].ys, cs[c].zy, &lo, &hi);
        int bad = 0, exact = 0;
        for (int i = 0; y.data && i < 7 * 33; i++) {
            double v = (cs[c].xs * (a[i] - cs[c].za) + cs[c].x2s * (b[i] - cs[c].zb)) / cs[c].ys + cs[c].zy;
            double want = clampd(round_up(v), lo, hi);
            int got = ((int8_t *)y.data)[i];
            int away = fabs(v - floor(v) - 0.5) > 0.01;
            exact += away;
            if (fabs(got - want) > 1 || (away && got != want))
                bad++;
        }
        CHECK_MSG(bad == 0, "qadd case %d: %d wrong", c, bad);
        CHECK_MSG(exact > 100, "qadd case %d: %d compared exactly", c, exact);
        mge_tensor_free(&y);
    }
    /* a hand case: 0.5 * (a - 1) + 0.25 * (b + 2) at y_scale 0.5, y_zero 3 */
    a[0] = 5, b[0] = 2;   /* 2 + 1 = 3 -> 6 + 3 = 9 */
    a[1] = -3, b[1] = -2; /* -2 + 0 -> -4 + 3 = -1 */
    a[2] = 1, b[2] = -1;  /* 0 + 0.25 -> 0.5 rounds up to 1 -> 4 */
    mge_attr at[7] = {A(MGE_KEY_act, -1),        A_f(MGE_KEY_x_scale, 0.5), A(MGE_KEY_x_zero, 1),
                      A_f(MGE_KEY_x2_scale, 0.25), A(MGE_KEY_x2_zero, -2),  A_f(MGE_KEY_y_scale, 0.5),
                      A(MGE_KEY_y_zero, 3)};
    mge_tensor y;
    CHECK_OK(run_ref(MGE_OP_QADD, 2, in, 7, at, &y, &err), err);
    if (y.data) {
        int8_t *yp = y.data;
        CHECK(yp[0] == 9 && yp[1] == -1 && yp[2] == 4);
    }
    mge_tensor_free(&y);
    for (int i = 0; i < 2; i++)
        mge_tensor_free(&in[i]);
}

/* ---------------------------------------------------------------- quantize, dequantize */

static void test_quantize(void)
{
    mge_error err;
    float xs[] = {0.25f, 0.75f, -0.25f, -0.75f, 1.25f, -1.25f, 1000.0f, -1000.0f, NAN, INFINITY, -INFINITY, 0.3f};
    int8_t want0[] = {0, 2, 0, -2, 2, -2, 127, -128, -128, 127, -128, 1};    /* scale 0.5, zero 0 */
    int8_t want10[] = {10, 12, 10, 8, 12, 8, 127, -128, -128, 127, -128, 11}; /* zero 10 */
    int64_t d[1] = {12};
    mge_tensor in;
    alloc_q(&in, MGE_F32, 1, d);
    memcpy(in.data, xs, sizeof xs);
    for (int z = 0; z < 2; z++) {
        mge_attr at[2] = {A_f(MGE_KEY_scale, 0.5), A(MGE_KEY_zero, z ? 10 : 0)};
        mge_tensor y;
        CHECK_OK(run_ref(MGE_OP_QUANTIZE, 1, &in, 2, at, &y, &err), err);
        CHECK(y.dtype == MGE_QS8);
        for (int i = 0; y.data && i < 12; i++)
            CHECK_MSG(((int8_t *)y.data)[i] == (z ? want10 : want0)[i], "zero %d, x %g: %d", z ? 10 : 0, xs[i],
                      ((int8_t *)y.data)[i]);
        mge_tensor_free(&y);
    }
    /* saturation in the zero-shifted range: x / 0.5 = 240 -> 127 with zero -100 */
    ((float *)in.data)[0] = 120.0f;
    ((float *)in.data)[1] = -120.0f; /* -240 - 100 -> -128 */
    ((float *)in.data)[2] = 10.0f;   /* 20 - 100 = -80 */
    mge_attr at[2] = {A_f(MGE_KEY_scale, 0.5), A(MGE_KEY_zero, -100)};
    mge_tensor y;
    CHECK_OK(run_ref(MGE_OP_QUANTIZE, 1, &in, 2, at, &y, &err), err);
    if (y.data) {
        int8_t *yp = y.data;
        CHECK(yp[0] == 127 && yp[1] == -128 && yp[2] == -80);
    }
    mge_tensor_free(&y);
    mge_tensor_free(&in);
}

static void test_dequantize(void)
{
    mge_error err;
    int64_t d[2] = {2, 2};
    mge_tensor in;
    alloc_q(&in, MGE_QS8, 2, d);
    int8_t q[4] = {-128, 127, 3, 0};
    memcpy(in.data, q, 4);
    mge_attr at[2] = {A_f(MGE_KEY_scale, 0.5), A(MGE_KEY_zero, 3)};
    mge_tensor y;
    CHECK_OK(run_ref(MGE_OP_DEQUANTIZE, 1, &in, 2, at, &y, &err), err);
    CHECK(y.dtype == MGE_F32 && y.ndim == 2 && y.dims[1] == 2);
    if (y.data) {
        float *yp = y.data;
        CHECK(yp[0] == -65.5f && yp[1] == 62.0f && yp[2] == 0.0f && yp[3] == -1.5f);
    }
    mge_tensor_free(&y);
    mge_tensor_free(&in);
}

/* ---------------------------------------------------------------- pooling on qs8 */

static double div_away(double s, double n)
{
    double v = s / n;
    return v >= 0 ? floor(v + 0.5) : -floor(-v + 0.5);
}

static void test_avgpool_rounding(void)
{
    mge_error err;
    /* four 2x2 windows (kernel 2, stride 2) over a 2x4 row pair */
    int64_t d[4] = {1, 1, 2, 6};
    mge_tensor in;
    alloc_q(&in, MGE_QS8, 4, d);
    int8_t q[12] = {-1, -1, -1, -2, 0, 3, /* */ 0, 0, -1, -2, 1, 2};
    memcpy(in.data, q, 12);
    int64_t k2[2] = {2, 2};
    mge_attr at[1] = {A_ints(MGE_KEY_kernel, 2, k2)};
    mge_tensor y;
    CHECK_OK(run_ref(MGE_OP_AVGPOOL2D, 1, &in, 1, at, &y, &err), err);
    /* sums -2 (-0.5 -> -1), -6 (-1.5 -> -2), 6 (1.5 -> 2) */
    if (y.data) {
        int8_t *yp = y.data;
        CHECK_MSG(yp[0] == -1 && yp[1] == -2 && yp[2] == 2, "%d %d %d", yp[0], yp[1], yp[2]);
    }
    mge_tensor_free(&y);
    mge_tensor_free(&in);
}

static void test_avgpool_random(void)
{
    mge_error err;
    mge_rng_seed(&rng, 3);
    int64_t d[4] = {2, 3, 7, 6};
    mge_tensor in;
    alloc_q(&in, MGE_QS8, 4, d);
    int8_t *x = in.data;
    for (int i = 0; i < 2 * 3 * 7 * 6; i++)
        x[i] = (int8_t)rnd(-128, 127);
    /* kernel k, stride s, pad p, count_include_pad, ceil_mode */
    int cs[][5] = {{3, 2, 1, 0, 0}, {3, 2, 1, 0, 1}, {2, 1, 0, 1, 0}, {3, 3, 0, 1, 1}, {2, 2, 1, 0, 1}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int k = cs[c][0], s = cs[c][1], p = cs[c][2], incl = cs[c][3], ceil_mode = cs[c][4];
        int64_t k2[2] = {k, k}, s2[2] = {s, s}, p2[2] = {p, p};
        mge_attr at[5] = {A_ints(MGE_KEY_kernel, 2, k2), A_ints(MGE_KEY_stride, 2, s2), A_ints(MGE_KEY_pad, 2, p2),
                          A(MGE_KEY_count_include_pad, incl), A(MGE_KEY_ceil_mode, ceil_mode)};
        mge_tensor y;
        CHECK_OK(run_ref(MGE_OP_AVGPOOL2D, 1, &in, 5, at, &y, &err), err);
        if (!y.data)
            continue;
        int64_t OH = y.dims[2], OW = y.dims[3];
        int bad = 0;
        for (int64_t nc = 0; nc < 6; nc++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    /* PyTorch: the window's taps inside the input; counted taps
                     * (incl) are those inside input + pad */
                    double sum = 0, cnt = 0, cnt_pad = 0;
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int64_t ih = oh * s - p + i, iw = ow * s - p + j;
                            if (ih < d[2] + p && iw < d[3] + p)
                                cnt_pad++;
                            if (ih < 0 || iw < 0 || ih >= d[2] || iw >= d[3])
                                continue;
                            sum += x[(nc * d[2] + ih) * d[3] + iw];
                            cnt++;
                        }
                    double want = div_away(sum, incl ? cnt_pad : cnt);
                    bad += ((int8_t *)y.data)[(nc * OH + oh) * OW + ow] != want;
                }
        CHECK_MSG(bad == 0, "avgpool case %zu: %d wrong", c, bad);
        mge_tensor_free(&y);
    }
    /* padding counted cannot be done without a zero point */
    int64_t k2[2] = {3, 3}, p2[2] = {1, 1};
    mge_attr at[3] = {A_ints(MGE_KEY_kernel, 2, k2), A_ints(MGE_KEY_pad, 2, p2), A(MGE_KEY_count_include_pad, 1)};
    mge_tensor y;
    CHECK(run_ref(MGE_OP_AVGPOOL2D, 1, &in, 3, at, &y, &err) == MGE_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "zero point") != NULL);
    mge_tensor_free(&y);

    /* global_avgpool */
    CHECK_OK(run_ref(MGE_OP_GLOBAL_AVGPOOL, 1, &in, 0, NULL, &y, &err), err);
    CHECK(y.dtype == MGE_QS8 && y.ndim == 4 && y.dims[2] == 1 && y.dims[3] == 1);
    for (int nc = 0; y.data && nc < 6; nc++) {
        double sum = 0;
        for (int j = 0; j < 42; j++)
            sum += x[nc * 42 + j];
        CHECK(((int8_t *)y.data)[nc] == div_away(sum, 42));
    }
    mge_tensor_free(&y);
    /* half away from zero on a -0.5 mean */
    int8_t h[42];
    for (int j = 0; j < 42; j++)
        h[j] = j < 21 ? -1 : 0;
    for (int nc = 0; nc < 6; nc++)
        memcpy(x + nc * 42, h, 42);
    x[42] = -22; /* channel 1: -42 / 42 = -1 exactly; channel 0: -21 / 42 = -0.5 -> -1 */
    for (int j = 0; j < 21; j++)
        x[84 + j] = 1; /* channel 2: 21 / 42 = 0.5 -> 1 */
    CHECK_OK(run_ref(MGE_OP_GLOBAL_AVGPOOL, 1, &in, 0, NULL, &y, &err), err);
    if (y.data) {
        int8_t *yp = y.data;
        CHECK_MSG(yp[0] == -1 && yp[1] == -1 && yp[2] == 1, "%d %d %d", yp[0], yp[1], yp[2]);
    }
    mge_tensor_free(&y);
    mge_tensor_free(&in);
}

/* ---------------------------------------------------------------- through the executor */

/* x (f32) -> quantize -> qconv2d (weight and bias params) -> dequantize on
 * backend ref; checked against the double computation on ug_run's input. */
static void test_exec_graph(void)
{
    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, bd[1] = {3};
    const double xs = 0.0625, ys = 0.125, ws[3] = {0.01, 0.02, 0.015};
    const int xz = 4, yz = -6;
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    int wv = mge_graph_add_value(g, "c.weight", MGE_VAL_PARAM, MGE_QS8, 4, wd, &err);
    int bv = mge_graph_add_value(g, "c.bias", MGE_VAL_PARAM, MGE_QS32, 1, bd, &err);
    CHECK(x >= 0 && wv >= 0 && bv >= 0);
    mge_tensor *w = calloc(1, sizeof *w), *b = calloc(1, sizeof *b);
    alloc_q(w, MGE_QS8, 4, wd);
    alloc_q(b, MGE_QS32, 1, bd);
    mge_rng_seed(&rng, 21);
    for (int i = 0; i < 54; i++)
        ((int8_t *)w->data)[i] = (int8_t)rnd(-127, 127);
    for (int o = 0; o < 3; o++)
        ((int32_t *)b->data)[o] = rnd(-500, 500);
    set_scales(w, 3, ws);
    g->values[wv].data = w;
    g->values[bv].data = b;
    mge_attr qa[2] = {A_f(MGE_KEY_scale, xs), A(MGE_KEY_zero, xz)};
    int q = node(g, "xq", MGE_OP_QUANTIZE, 1, &x, 2, qa);
    int64_t k2[2] = {3, 3}, p2[2] = {1, 1};
    mge_attr ca[8] = {A(MGE_KEY_out, 3),        A_ints(MGE_KEY_kernel, 2, k2), A_ints(MGE_KEY_pad, 2, p2),
                      A(MGE_KEY_act, MGE_OP_RELU), A_f(MGE_KEY_x_scale, xs),   A(MGE_KEY_x_zero, xz),
                      A_f(MGE_KEY_y_scale, ys), A(MGE_KEY_y_zero, yz)};
    int cin[3] = {q, wv, bv};
    int c = node(g, "conv", MGE_OP_QCONV2D, 3, cin, 8, ca);
    mge_attr da[2] = {A_f(MGE_KEY_scale, ys), A(MGE_KEY_zero, yz)};
    int yv = node(g, "y", MGE_OP_DEQUANTIZE, 1, &c, 2, da);
    CHECK(q >= 0 && c >= 0 && yv >= 0);
    CHECK_OK(mge_graph_add_output(g, yv, &err), err);
    ug_outs res;
    ug_fill f = {0, -5.0f, 5.0f, 0};
    if (!ug_run(g, "ref", 1, 1, f, &res)) {
        mge_graph_free(g);
        CHECK(0);
        return;
    }
    /* ug_run's input, drawn again */
    float xin[50];
    mge_rng r;
    mge_rng_seed(&r, ug_fnv("x"));
    for (int i = 0; i < 50; i++)
        xin[i] = -5.0f + 10.0f * mge_rng_uniform(&r);
    double xr[50]; /* the quantized x, dequantized (xs is a power of 2: x / xs exact) */
    for (int i = 0; i < 50; i++)
        xr[i] = xs * (clampd(nearbyint(xin[i] / xs), -128 - xz, 127 - xz));
    const float *yp = res.t[0].data;
    CHECK(res.n == 1 && res.t[0].dtype == MGE_F32 && mge_tensor_numel(&res.t[0]) == 75);
    int bad = 0, pos = 0;
    for (int o = 0; yp && o < 3; o++)
        for (int oh = 0; oh < 5; oh++)
            for (int ow = 0; ow < 5; ow++) {
                double acc = xs * ws[o] * ((int32_t *)b->data)[o];
                for (int ci = 0; ci < 2; ci++)
                    for (int kh = 0; kh < 3; kh++)
                        for (int kw = 0; kw < 3; kw++) {
                            int ih = oh - 1 + kh, iw = ow - 1 + kw;
                            if (ih < 0 || iw < 0 || ih >= 5 || iw >= 5)
                                continue;
                            acc += xr[(ci * 5 + ih) * 5 + iw] * ws[o] * ((int8_t *)w->data)[((o * 2 + ci) * 3 + kh) * 3 + kw];
                        }
                double want = ys * (clampd(round_up(acc / ys + yz), yz, 127) - yz);
                double got = yp[(o * 5 + oh) * 5 + ow];
                pos += got > 0;
                if (fabs(got - want) > ys * 1.0001 || got < 0)
                    bad++;
            }
    CHECK_MSG(bad == 0, "%d outputs off by more than one quantum", bad);
    CHECK(pos > 10);
    ug_outs_free(&res);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_qconv2d_random);
    RUN(test_qconv2d_exact);
    RUN(test_qconv2d_errors);
    RUN(test_qlinear);
    RUN(test_qadd);
    RUN(test_quantize);
    RUN(test_dequantize);
    RUN(test_avgpool_rounding);
    RUN(test_avgpool_random);
    RUN(test_exec_graph);
    return unit_done();
}
