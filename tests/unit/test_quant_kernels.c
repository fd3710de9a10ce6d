/* test_quant_kernels.c — the cpu int8 kernels (kernels/cpu/cpu_qgemm.c, cpu_qdepthwise.c,
 * cpu_quant.c) against the ref ones (kernels/ref/ref_quant.c), to the bit,
 * at every int8 level the machine has: main runs the cases in a child per
 * MGE_CPU_ISA setting (baseline, avx2, avx2-vnni, avx512, avx512-vnni, unset), since the
 * level is decided once per process. Each child also prints (never checks)
 * the speed of a resnet-like 3x3 conv at its level. The cases cover each
 * path: GEMM (small and >= 1024-column images: the AVX2 level's two
 * kernels), depthwise (small planes with many channels, strides 1-3,
 * dilation), qlinear's GEMV (N <= 3, K not a multiple of 4 or 64), pooling
 * (avgpool2d with ceil_mode and count_include_pad). */
#include "internal.h"
#include "unit.h"
#include "unit_attr.h"
#include "unit_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static mge_pool *pool2, *pool3;
static int nprepared;   /* cases run with a prepared state (the AMX level must make some) */
static uint64_t seed = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    return (uint32_t)(seed >> 11);
}

static int32_t rnd_in(int32_t lo, int32_t hi)
{
    return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1));
}

/* ug_run_kernel with a prepared state (as an inference executor passes
 * it) and, when wsp is not NULL, the scratch *wsp kept between calls (as
 * the executor keeps it: the bench's timings then leave out the zeroed
 * allocation) */
static mge_status run_prepared(const mge_kernel *k, mge_pool *pool, const mge_node *n, mge_tensor **in,
                               mge_tensor *y, void *state, void **wsp, mge_error *err)
{
    mge_tensor *ys[1] = {y};
    int threads = mge_pool_size(pool);
    size_t ws = k->ws ? k->ws(n, in, ys, threads) : 0;
    void *own = NULL, *w = wsp && *wsp ? *wsp : ws ? (own = mge_aligned_alloc(ws)) : NULL;
    mge_kctx ctx = {.pool = pool, .threads = threads, .ws = w, .ws_size = ws, .prepared = state,
                    .opname = mge_op_info(n->op)->name};
    mge_status s = k->run(&ctx, n, in, ys, err);
    if (wsp && !*wsp)
        *wsp = own;
    else
        mge_aligned_free(own);
    return s;
}

/* Runs node of g (inputs in[]) on the ref backend and on cpu with 1, 2 and
 * 3 threads, then (when the kernel prepares state from its params, the AMX
 * level) with that state on 1 and 2 threads; the outputs must be the same
 * bytes. Returns the number of
 * distinct output bytes of the ref result (so cases can check they are not
 * degenerate), or -1 on failure. */
static int run_both(const char *what, const mge_graph *g, int node, mge_tensor **in, mge_dtype dt)
{
    mge_error err;
    mge_error_clear(&err);
    const mge_node *n = &g->nodes[node];
    const mge_value *yv = &g->values[n->out[0]];
    mge_tensor want = {0}, got = {0};
    CHECK_OK(mge_tensor_alloc(&want, yv->dtype, yv->ndim, yv->dims, &err), err);
    CHECK_OK(mge_tensor_alloc(&got, yv->dtype, yv->ndim, yv->dims, &err), err);
    const mge_kernel *kr = &mge_backend_ref()->k[n->op][dt], *kc = mge_backend_kernel(mge_backend_cpu(), n->op, dt);
    CHECK(kr->run && kc && kc != kr);
    int distinct = -1;
    if (!want.data || !got.data || !kr->run || !kc || kc == kr)
        goto done;
    mge_status s = ug_run_kernel(kr, NULL, n, in, &want, &err);
    CHECK_MSG(s == MGE_OK, "%s: ref: %s", what, err.msg);
    if (s)
        goto done;
    mge_pool *pools[5] = {NULL, pool2, pool3, NULL, pool2};
    void *state = NULL;
    if (kc->prepare) {   /* x hidden: it changes between runs */
        mge_tensor *pin[3] = {NULL, in[1], n->nin > 2 ? in[2] : NULL};
        s = kc->prepare(n, pin, &state, &err);
        CHECK_MSG(s == MGE_OK, "%s: prepare: %s", what, err.msg);
        nprepared += state != NULL;
    }
    int ok = 1;
    for (int p = 0; p < (state ? 5 : 3); p++) {
        memset(got.data, 0x5a, got.nbytes);
        s = p < 3 ? ug_run_kernel(kc, pools[p], n, in, &got, &err)
                  : run_prepared(kc, pools[p], n, in, &got, state, NULL, &err);
        CHECK_MSG(s == MGE_OK, "%s: cpu: %s", what, err.msg);
        if (s) {
            ok = 0;
            break;
        }
        if (memcmp(got.data, want.data, want.nbytes)) {
            size_t i = 0;
            if (want.dtype == MGE_F32) {
                const float *a = got.data, *b = want.data;
                while (i < want.nbytes / 4 && !memcmp(&a[i], &b[i], 4))
                    i++;
                CHECK_MSG(0, "%s (%d threads%s): element %zu: cpu %.9g, ref %.9g", what, p % 3 + 1,
                          p < 3 ? "" : ", prepared", i, a[i], b[i]);
            } else {
                const int8_t *a = got.data, *b = want.data;
                while (i < want.nbytes && a[i] == b[i])
                    i++;
                CHECK_MSG(0, "%s (%d threads%s): byte %zu of %zu: cpu %d, ref %d", what, p % 3 + 1,
                          p < 3 ? "" : ", prepared", i, want.nbytes, a[i], b[i]);
            }
            ok = 0;
            break;
        }
    }
    if (ok) {
        char seen[256] = {0};
        distinct = 0;
        const uint8_t *b = want.data;
        for (size_t i = 0; i < want.nbytes; i++)
            if (!seen[b[i]])
                seen[b[i]] = 1, distinct++;
    }
    if (state)
        kc->release(state);
done:
    mge_tensor_free(&want);
    mge_tensor_free(&got);
    return distinct;
}

/* ---------------------------------------------------------------- qconv2d / qlinear */

typedef struct qcase {
    const char *name;
    int64_t N, C, H, W, O, kh, kw, s, p, d, G;
    int bias, act, perchan;
    int xz, yz;
    int linear;   /* qlinear: x [N, C] (H > 1: [N, H, C]), weight [O, C] */
    int pow2;     /* scales powers of 2: multipliers 2^-s, ties on every odd acc */
} qcase;

/* weights in [-127, 127], per-channel scales, y_scale picked so that the
 * outputs spread over the int8 range instead of saturating */
static void check_q(const qcase *c)
{
    mge_error err;
    mge_error_clear(&err);
    ug_kcase t = {0};
    t.g = mge_graph_new();
    int64_t Cg = c->C / c->G, K = c->linear ? c->C : Cg * c->kh * c->kw;
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->O, Cg, c->kh, c->kw}, bd[1] = {c->O};
    int xnd = 4, wnd = 4;
    if (c->linear) {
        xnd = c->H > 1 ? 3 : 2;
        if (c->H > 1)
            xd[0] = c->N, xd[1] = c->H, xd[2] = c->C;
        else
            xd[0] = c->N, xd[1] = c->C;
        wd[0] = c->O, wd[1] = c->C, wnd = 2;
    }
    int ids[3];
    ids[0] = mge_graph_add_value(t.g, "x", MGE_VAL_INPUT, MGE_QS8, xnd, xd, &err);
    ids[1] = mge_graph_add_value(t.g, "w", MGE_VAL_PARAM, MGE_QS8, wnd, wd, &err);
    ids[2] = mge_graph_add_value(t.g, "b", MGE_VAL_PARAM, MGE_QS32, 1, bd, &err);
    int nin = c->bias ? 3 : 2;
    for (int i = 0; i < nin; i++)
        CHECK_OK(mge_tensor_alloc(&t.in[i], i == 0 ? MGE_QS8 : i == 1 ? MGE_QS8 : MGE_QS32,
                                  i == 0 ? xnd : i == 1 ? wnd : 1, i == 0 ? xd : i == 1 ? wd : bd, &err),
                 err);
    double xs = 0.05, wsum = 0;
    mge_tensor *w = &t.in[1];
    w->q.axis = c->perchan ? 0 : -1;
    w->q.nscale = c->perchan ? (int)c->O : 1;
    w->q.scale = malloc(sizeof(float) * (size_t)w->q.nscale);
    for (int i = 0; i < w->q.nscale; i++)
        wsum += w->q.scale[i] = c->pow2 ? ldexpf(1.0f, -7 - (int)(rnd() % 3)) : 0.004f + 0.0001f * (float)(rnd() % 100);
    int8_t *xp = t.in[0].data, *wp = w->data;
    for (int64_t i = 0; i < mge_tensor_numel(&t.in[0]); i++)
        xp[i] = (int8_t)rnd_in(-128, 127);
    for (int64_t i = 0; i < mge_tensor_numel(w); i++)
        wp[i] = (int8_t)rnd_in(-127, 127);
    if (c->bias) {
        int32_t *bp = t.in[2].data;
        for (int64_t i = 0; i < c->O; i++)
            bp[i] = rnd_in(-40000, 40000);
    }
    /* acc has a spread near 73 * 74 * sqrt(K) (less with padding) */
    double m = 60.0 / (73.0 * 74.0 * sqrt((double)K));
    double ys = xs * (wsum / w->q.nscale) / m;
    if (c->pow2)
        xs = 0.0625, ys = ldexp(1.0, (int)floor(log2(xs * 0.0078125 / m)));
    int64_t kern[2] = {c->kh, c->kw};
    mge_attr at[16];
    int na = 0;
    at[na++] = A(MGE_KEY_out, c->O);
    if (!c->linear) {
        at[na++] = A_ints(MGE_KEY_kernel, 2, kern);
        at[na++] = A(MGE_KEY_stride, c->s);
        at[na++] = A(MGE_KEY_pad, c->p);
        at[na++] = A(MGE_KEY_dilation, c->d);
        at[na++] = A(MGE_KEY_groups, c->G);
    }
    at[na++] = A(MGE_KEY_bias, c->bias);
    at[na++] = A(MGE_KEY_act, c->act);
    at[na++] = A_f(MGE_KEY_x_scale, xs);
    at[na++] = A(MGE_KEY_x_zero, c->xz);
    at[na++] = A_f(MGE_KEY_y_scale, ys);
    at[na++] = A(MGE_KEY_y_zero, c->yz);
    if (!ug_kcase_node(&t, c->linear ? MGE_OP_QLINEAR : MGE_OP_QCONV2D, nin, ids, na, at)) {
        CHECK_MSG(0, "%s: the graph refused the node", c->name);
        for (int i = 0; i < nin; i++)
            mge_tensor_free(&t.in[i]);
        return;
    }
    mge_tensor *in[3] = {&t.in[0], &t.in[1], &t.in[2]};
    int d = run_both(c->name, t.g, t.node, in, MGE_QS8);
    CHECK_MSG(d < 0 || d >= (c->act == -1 ? 20 : 8), "%s: only %d distinct outputs", c->name, d);
    ug_kcase_free(&t);
}

#define NONE (-1)
static void test_qconv(void)
{
    static const qcase cases[] = {
        /* name                 N  C  H   W   O  kh kw s  p  d  G  bias act           pc xz    yz */
        {"3x3 pad1", 1, 16, 12, 13, 24, 3, 3, 1, 1, 1, 1, 1, NONE, 1, 0, 0, 0, 0},
        {"3x3 K%4 odd O", 2, 3, 11, 9, 7, 3, 3, 1, 1, 1, 1, 1, NONE, 1, 37, -5, 0, 0},
        {"5x5 s2 p2", 1, 5, 17, 15, 13, 5, 5, 2, 2, 1, 1, 1, NONE, 1, -128, 3, 0, 0},
        {"3x3 s2 relu", 1, 8, 14, 14, 17, 3, 3, 2, 1, 1, 1, 1, MGE_OP_RELU, 1, 12, -20, 0, 0},
        {"3x3 dil2", 1, 6, 13, 12, 9, 3, 3, 1, 2, 2, 1, 1, NONE, 1, -3, 0, 0, 0},
        {"groups2 relu6", 1, 10, 9, 10, 12, 3, 3, 1, 1, 1, 2, 1, MGE_OP_RELU6, 1, 5, -100, 0, 0},
        {"1x1", 1, 32, 7, 9, 40, 1, 1, 1, 0, 1, 1, 1, NONE, 1, 37, 4, 0, 0},
        {"1x1 tail", 2, 7, 5, 5, 5, 1, 1, 1, 0, 1, 1, 0, NONE, 0, -128, 0, 0, 0},
        {"1x1 s2", 1, 20, 11, 11, 33, 1, 1, 2, 0, 1, 1, 1, MGE_OP_RELU, 1, 0, -128, 0, 0},
        {"per-tensor no bias", 1, 12, 10, 10, 16, 3, 3, 1, 1, 1, 1, 0, NONE, 0, -7, 9, 0, 0},
        {"dw 3x3 s1", 2, 24, 11, 13, 24, 3, 3, 1, 1, 1, 24, 1, MGE_OP_RELU6, 1, 37, -128, 0, 0},
        {"dw 3x3 s2", 1, 17, 12, 11, 17, 3, 3, 2, 1, 1, 17, 1, NONE, 1, -128, 0, 0, 0},
        {"dw 5x5 no bias", 1, 9, 9, 9, 9, 5, 5, 1, 2, 1, 9, 0, MGE_OP_RELU, 0, 0, 10, 0, 0},
        {"multiplier 2", 1, 4, 8, 8, 8, 3, 3, 1, 1, 1, 4, 1, NONE, 1, 2, 0, 0, 0},
        {"big K", 1, 72, 6, 7, 20, 3, 3, 1, 1, 1, 1, 1, NONE, 1, -1, 1, 0, 0},
        {"wide", 1, 16, 30, 31, 64, 3, 3, 1, 1, 1, 1, 1, MGE_OP_RELU, 1, 19, -60, 0, 0},
        {"7x7 s2 stem", 1, 3, 32, 32, 16, 7, 7, 2, 3, 1, 1, 1, MGE_OP_RELU, 1, -128, -128, 0, 0},
        {"pow2 ties", 1, 9, 10, 11, 21, 3, 3, 1, 1, 1, 1, 1, NONE, 1, 3, 1, 0, 1},
        {"pow2 ties dw", 1, 16, 10, 11, 16, 3, 3, 1, 1, 1, 16, 1, NONE, 1, -128, 0, 0, 1},
        /* 150 columns or more: the AVX2 level's int16 kernel (fewer: the sign trick) */
        {"3x3 P>=150 odd K", 1, 7, 34, 33, 13, 3, 3, 1, 1, 1, 1, 1, NONE, 1, -77, 6, 0, 0},
        {"1x1 P>=150", 1, 24, 33, 32, 9, 1, 1, 1, 0, 1, 1, 1, MGE_OP_RELU, 1, 90, -128, 0, 0},
        {"3x3 P=49 sign trick", 1, 20, 7, 7, 24, 3, 3, 1, 1, 1, 1, 1, NONE, 1, 9, 0, 0, 0},
        /* depthwise on small planes with many channels (mobilenet's 14x14 s2, 7x7) */
        {"dw 14x14 s2 many ch", 1, 96, 14, 14, 96, 3, 3, 2, 1, 1, 96, 1, MGE_OP_RELU6, 1, -128, -128, 0, 0},
        {"dw 7x7 many ch", 2, 80, 7, 7, 80, 3, 3, 1, 1, 1, 80, 1, NONE, 1, 11, 3, 0, 0},
        {"dw 3x3 s2 no pad odd", 1, 5, 9, 7, 5, 3, 3, 2, 0, 1, 5, 1, NONE, 1, 100, 0, 0, 0},
        {"dw 3x3 dil2 s2", 1, 6, 13, 16, 6, 3, 3, 2, 2, 2, 6, 1, NONE, 0, -9, 0, 0, 0},
        {"dw 1x1 s2", 1, 7, 9, 9, 7, 1, 1, 2, 0, 1, 7, 1, NONE, 1, 5, 0, 0, 0},
        {"dw 3x3 s3 p1", 1, 4, 20, 19, 4, 3, 3, 3, 1, 1, 4, 1, NONE, 1, 0, 0, 0, 0},
        {"dw 3x3 wide 70", 1, 3, 9, 70, 3, 3, 3, 1, 1, 1, 3, 1, NONE, 1, -1, 0, 0, 0},
        {"dw 2x2 even", 1, 6, 8, 9, 6, 2, 2, 1, 0, 1, 6, 0, NONE, 1, 1, 0, 0, 0},
        /* the AMX tiles (32 x 32 blocks of 16 x 16 tiles, K in steps of 64): K past a step,
         * O and the columns past a tile, small images with shared packing, groups */
        {"amx K=333 O=45", 1, 37, 9, 11, 45, 3, 3, 1, 1, 1, 1, 1, NONE, 1, -20, 7, 0, 0},
        {"amx 3x3 s2 O=17", 2, 40, 15, 13, 17, 3, 3, 2, 1, 1, 1, 1, MGE_OP_RELU, 1, 100, -100, 0, 0},
        {"amx 1x1 K=70 P=63", 1, 70, 7, 9, 33, 1, 1, 1, 0, 1, 1, 1, NONE, 0, 5, 0, 0, 0},
        {"amx 7x7 K=1152 O=96", 1, 128, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1, MGE_OP_RELU, 1, -128, -128, 0, 0},
        {"amx groups3 Og=20", 1, 48, 10, 12, 60, 3, 3, 1, 1, 1, 3, 1, NONE, 1, 9, 2, 0, 0},
        {"amx 1x1 s2 K=256", 1, 256, 14, 14, 48, 1, 1, 2, 0, 1, 1, 0, NONE, 1, -1, 0, 0, 0},
        {"amx 4x4 P=16 O=32", 1, 64, 4, 4, 32, 3, 3, 1, 1, 1, 1, 1, NONE, 1, 3, 3, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_q(&cases[i]);
}

static void test_qlinear(void)
{
    static const qcase cases[] = {
        {"linear N=1", 1, 512, 1, 1, 37, 0, 0, 0, 0, 0, 1, 1, NONE, 1, 0, 0, 1, 0},
        {"linear N=33", 33, 70, 1, 1, 19, 0, 0, 0, 0, 0, 1, 1, MGE_OP_RELU, 1, 37, -9, 1, 0},
        {"linear K=3 no bias", 5, 3, 1, 1, 9, 0, 0, 0, 0, 0, 1, 0, NONE, 0, -128, 2, 1, 0},
        {"linear 3d relu6", 2, 45, 7, 1, 31, 0, 0, 0, 0, 0, 1, 1, MGE_OP_RELU6, 1, -20, -128, 1, 0},
        {"linear pow2 ties", 17, 64, 1, 1, 24, 0, 0, 0, 0, 0, 1, 1, NONE, 1, 0, 0, 1, 1},
        {"linear N=200 K=19", 200, 19, 1, 1, 21, 0, 0, 0, 0, 0, 1, 1, NONE, 1, 3, 0, 1, 0},
        /* N small: the GEMV path; K not a multiple of 4 or 64, O not of the row blocks */
        {"linear N=1 K=1283", 1, 1283, 1, 1, 101, 0, 0, 0, 0, 0, 1, 1, NONE, 1, -3, 0, 1, 0},
        {"linear N=1 K=66", 1, 66, 1, 1, 61, 0, 0, 0, 0, 0, 1, 0, NONE, 1, -128, 5, 1, 0},
        {"linear N=2 K=7", 2, 7, 1, 1, 35, 0, 0, 0, 0, 0, 1, 1, NONE, 0, 12, 0, 1, 0},
        {"linear N=3 K=128", 3, 128, 1, 1, 40, 0, 0, 0, 0, 0, 1, 1, NONE, 1, 60, -1, 1, 0},
        {"linear N=1 O=29 relu", 1, 300, 1, 1, 29, 0, 0, 0, 0, 0, 1, 1, MGE_OP_RELU, 1, 0, -50, 1, 0},
        /* the AMX tiles: K past a 64-byte step, O and N past a tile */
        {"linear N=40 K=200 O=50", 40, 200, 1, 1, 50, 0, 0, 0, 0, 0, 1, 1, NONE, 1, -7, 3, 1, 0},
        {"linear N=17 K=64 O=16", 17, 64, 1, 1, 16, 0, 0, 0, 0, 0, 1, 0, MGE_OP_RELU, 1, 0, 0, 1, 0},
        {"linear N=130 K=129 O=65", 130, 129, 1, 1, 65, 0, 0, 0, 0, 0, 1, 1, NONE, 1, 30, -2, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_q(&cases[i]);
}

/* A weight of -128 (outside what mge-quant writes): still the ref's bytes
 * (the AVX2 level takes the portable loops for such weights). */
static void test_qconv_w128(void)
{
    mge_error err;
    mge_error_clear(&err);
    ug_kcase t = {0};
    t.g = mge_graph_new();
    int64_t xd[4] = {1, 8, 9, 9}, wd[4] = {8, 8, 3, 3};
    int ids[2];
    ids[0] = mge_graph_add_value(t.g, "x", MGE_VAL_INPUT, MGE_QS8, 4, xd, &err);
    ids[1] = mge_graph_add_value(t.g, "w", MGE_VAL_PARAM, MGE_QS8, 4, wd, &err);
    CHECK_OK(mge_tensor_alloc(&t.in[0], MGE_QS8, 4, xd, &err), err);
    CHECK_OK(mge_tensor_alloc(&t.in[1], MGE_QS8, 4, wd, &err), err);
    int8_t *xp = t.in[0].data, *wp = t.in[1].data;
    for (int i = 0; i < 8 * 81; i++)
        xp[i] = (int8_t)rnd_in(-128, 127);
    for (int i = 0; i < 8 * 72; i++)
        wp[i] = (int8_t)(i % 2 ? -128 : rnd_in(-128, 127));
    t.in[1].q.axis = -1, t.in[1].q.nscale = 1;
    t.in[1].q.scale = malloc(sizeof(float));
    t.in[1].q.scale[0] = 0.01f;
    int64_t k3[2] = {3, 3};
    mge_attr at[8] = {A(MGE_KEY_out, 8), A_ints(MGE_KEY_kernel, 2, k3), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, 0),
                      A(MGE_KEY_act, -1), A_f(MGE_KEY_x_scale, 0.05), A_f(MGE_KEY_y_scale, 0.5),
                      A(MGE_KEY_x_zero, 0)};
    if (!ug_kcase_node(&t, MGE_OP_QCONV2D, 2, ids, 8, at))
        return;
    mge_tensor *in[2] = {&t.in[0], &t.in[1]};
    int d = run_both("weights of -128", t.g, t.node, in, MGE_QS8);
    CHECK(d >= 8);
    ug_kcase_free(&t);
}

/* ---------------------------------------------------------------- elementwise */

/* mind: the fewest distinct output bytes the ref result must have */
static void elem_case(const char *what, int op, mge_dtype dt, int64_t n, const float *special, int nspecial,
                      int nattr, const mge_attr *at, int mind)
{
    mge_error err;
    mge_error_clear(&err);
    ug_kcase t = {0};
    t.g = mge_graph_new();
    int64_t d[1] = {n};
    int nin = op == MGE_OP_QADD ? 2 : 1;
    int ids[2];
    for (int i = 0; i < nin; i++) {
        ids[i] = mge_graph_add_value(t.g, i ? "b" : "a", MGE_VAL_INPUT, dt, 1, d, &err);
        CHECK_OK(mge_tensor_alloc(&t.in[i], dt, 1, d, &err), err);
        if (dt == MGE_F32) {
            float *p = t.in[i].data;
            for (int64_t k = 0; k < n; k++)
                p[k] = k < nspecial ? special[k] : (float)rnd_in(-400000, 400000) * 1e-4f;
        } else {
            int8_t *p = t.in[i].data;
            for (int64_t k = 0; k < n; k++)
                p[k] = (int8_t)rnd_in(-128, 127);
        }
    }
    if (!ug_kcase_node(&t, op, nin, ids, nattr, at))
        return;
    mge_tensor *in[2] = {&t.in[0], &t.in[1]};
    int dist = run_both(what, t.g, t.node, in, dt);
    CHECK_MSG(dist < 0 || dist >= mind, "%s: only %d distinct output bytes", what, dist);
    ug_kcase_free(&t);
}

static void test_elementwise(void)
{
    /* scale 0.25: x * 4 is exact, so .5 ties reach the rounding */
    float sp[] = {NAN, -NAN, INFINITY, -INFINITY, 0.125f, 0.375f, -0.125f, -0.375f, 0.625f, -0.625f, 31.875f,
                  -32.125f, 1e30f, -1e30f, 0.0f, -0.0f, 31.8f, 31.9f, -32.0f, -32.2f, 1e-40f, 0.1249999f, 0.1250001f};
    int ns = (int)(sizeof sp / sizeof sp[0]);
    int zs[3] = {0, -128, 37};
    for (int z = 0; z < 3; z++) {
        mge_attr at[2] = {A_f(MGE_KEY_scale, 0.25), A(MGE_KEY_zero, zs[z])};
        for (int64_t n = 1; n <= 1000; n = n * 7 + 3)
            if (n >= 40)   /* fewer elements give too few distinct bytes to be a test */
                elem_case("quantize", MGE_OP_QUANTIZE, MGE_F32, n, sp, ns, 2, at, 12);
        mge_attr at2[2] = {A_f(MGE_KEY_scale, 0.037), A(MGE_KEY_zero, zs[z])};
        elem_case("quantize 0.037", MGE_OP_QUANTIZE, MGE_F32, 70001, sp, ns, 2, at2, 200);
        elem_case("dequantize", MGE_OP_DEQUANTIZE, MGE_QS8, 1003, NULL, 0, 2, at2, 50);
        elem_case("dequantize big", MGE_OP_DEQUANTIZE, MGE_QS8, 70001, NULL, 0, 2, at, 50);
    }
    struct {
        double xs, x2s, ys;
        int za, zb, yz, act, mind;
    } qa[] = {
        {0.05, 0.05, 0.1, 0, 0, 0, NONE, 100},   /* exact halves: ties of the rounding shift */
        {0.05, 0.03, 0.07, 37, -128, -5, NONE, 100},
        {0.2, 0.01, 0.05, -10, 3, -128, MGE_OP_RELU, 100},   /* saturates */
        {0.02, 0.02, 0.03, 5, 5, 10, MGE_OP_RELU6, 8},
        {1.0, 3.0, 0.001, 0, 0, 0, NONE, 2},   /* big multipliers: small shift, saturates (a 0 needs a = -3b) */
        {0.7, 0.2, 0.9, -3, 100, 7, NONE, 100},
    };
    for (size_t i = 0; i < sizeof qa / sizeof qa[0]; i++) {
        mge_attr at[7] = {A(MGE_KEY_act, qa[i].act),  A_f(MGE_KEY_x_scale, qa[i].xs), A(MGE_KEY_x_zero, qa[i].za),
                          A_f(MGE_KEY_x2_scale, qa[i].x2s), A(MGE_KEY_x2_zero, qa[i].zb),
                          A_f(MGE_KEY_y_scale, qa[i].ys), A(MGE_KEY_y_zero, qa[i].yz)};
        elem_case("qadd", MGE_OP_QADD, MGE_QS8, 1001, NULL, 0, 7, at, qa[i].mind);
        elem_case("qadd big", MGE_OP_QADD, MGE_QS8, 70003, NULL, 0, 7, at, qa[i].mind);
    }
}

/* ---------------------------------------------------------------- pooling on qs8 */

static void pool_case(const char *what, int op, int64_t N, int64_t C, int64_t H, int64_t W, int nattr,
                      const mge_attr *at)
{
    mge_error err;
    mge_error_clear(&err);
    ug_kcase t = {0};
    t.g = mge_graph_new();
    int64_t d[4] = {N, C, H, W};
    int ids[1] = {mge_graph_add_value(t.g, "x", MGE_VAL_INPUT, MGE_QS8, 4, d, &err)};
    CHECK_OK(mge_tensor_alloc(&t.in[0], MGE_QS8, 4, d, &err), err);
    int8_t *p = t.in[0].data;
    for (int64_t k = 0; k < N * C * H * W; k++)
        p[k] = (int8_t)(k % 5 == 0 ? -128 : rnd_in(-128, 127));
    if (!ug_kcase_node(&t, op, 1, ids, nattr, at)) {
        CHECK_MSG(0, "%s: the graph refused the node", what);
        mge_tensor_free(&t.in[0]);
        return;
    }
    mge_tensor *in[1] = {&t.in[0]};
    int dist = run_both(what, t.g, t.node, in, MGE_QS8);
    CHECK_MSG(dist < 0 || dist >= 8, "%s: only %d distinct output bytes", what, dist);
    ug_kcase_free(&t);
}

static void test_pool(void)
{
    static const struct {
        const char *what;
        int64_t H, W, k, s, p, d, ceil;
    } mp[] = {
        {"maxpool 3x3 s2 p1", 17, 20, 3, 2, 1, 1, 0},  {"maxpool 2x2 s2", 12, 13, 2, 2, 0, 1, 0},
        {"maxpool 3x3 s1 p1", 9, 30, 3, 1, 1, 1, 0},   {"maxpool 3x3 s2 dil2", 15, 16, 3, 2, 1, 2, 0},
        {"maxpool 3x3 s2 ceil", 16, 15, 3, 2, 0, 1, 1}, {"maxpool 4x4 s3 p2 ceil", 19, 14, 4, 3, 2, 1, 1},
    };
    for (size_t i = 0; i < sizeof mp / sizeof mp[0]; i++) {
        int64_t k2[2] = {mp[i].k, mp[i].k};
        mge_attr at[5] = {A_ints(MGE_KEY_kernel, 2, k2), A(MGE_KEY_stride, mp[i].s), A(MGE_KEY_pad, mp[i].p),
                          A(MGE_KEY_dilation, mp[i].d), A(MGE_KEY_ceil_mode, mp[i].ceil)};
        pool_case(mp[i].what, MGE_OP_MAXPOOL2D, 2, 5, mp[i].H, mp[i].W, 5, at);
    }
    static const struct {
        const char *what;
        int64_t H, W, kh, kw, s, p, ceil, incl;
    } ap[] = {
        {"avgpool 2x2 s2", 12, 13, 2, 2, 2, 0, 0, 1},        {"avgpool 3x3 s1 p1 excl", 9, 30, 3, 3, 1, 1, 0, 0},
        {"avgpool 3x3 s2 p1 ceil excl", 16, 15, 3, 3, 2, 1, 1, 0}, {"avgpool 5x3 s3 ceil", 19, 14, 5, 3, 3, 0, 1, 1},
        {"avgpool 7x7 s1", 11, 10, 7, 7, 1, 0, 0, 1},        {"avgpool 4x4 s3 p2 excl", 20, 21, 4, 4, 3, 2, 0, 0},
    };
    for (size_t i = 0; i < sizeof ap / sizeof ap[0]; i++) {
        int64_t k2[2] = {ap[i].kh, ap[i].kw};
        mge_attr at[5] = {A_ints(MGE_KEY_kernel, 2, k2), A(MGE_KEY_stride, ap[i].s), A(MGE_KEY_pad, ap[i].p),
                          A(MGE_KEY_ceil_mode, ap[i].ceil), A(MGE_KEY_count_include_pad, ap[i].incl)};
        pool_case(ap[i].what, MGE_OP_AVGPOOL2D, 2, 5, ap[i].H, ap[i].W, 5, at);
    }
    pool_case("global_avgpool 7x7", MGE_OP_GLOBAL_AVGPOOL, 2, 64, 7, 7, 0, NULL);
    pool_case("global_avgpool 13x11", MGE_OP_GLOBAL_AVGPOOL, 1, 40, 13, 11, 0, NULL);
    pool_case("global_avgpool 1x2", MGE_OP_GLOBAL_AVGPOOL, 3, 30, 1, 2, 0, NULL);
}

/* ---------------------------------------------------------------- speed (printed) */

/* Best time of qconv2d (qlinear when k == 0: x [1, C], weight [O, C]) on
 * a 1-image input, over about `budget` seconds. */
static double bench_one(int64_t C, int64_t H, int64_t O, int64_t k, int64_t st, int64_t pad, int64_t G,
                        mge_pool *pool, double budget, double *ops)
{
    mge_error err;
    mge_error_clear(&err);
    ug_kcase t = {0};
    t.g = mge_graph_new();
    int lin = k == 0;
    int64_t xd[4] = {1, C, H, H}, wd[4] = {O, C / G, k, k}, bd[1] = {O};
    int xnd = lin ? 2 : 4, wnd = lin ? 2 : 4;
    if (lin)
        xd[0] = st > 0 ? st : 1, xd[1] = C, wd[1] = C;   /* stride: the rows N of x */
    int ids[3];
    ids[0] = mge_graph_add_value(t.g, "x", MGE_VAL_INPUT, MGE_QS8, xnd, xd, &err);
    ids[1] = mge_graph_add_value(t.g, "w", MGE_VAL_PARAM, MGE_QS8, wnd, wd, &err);
    ids[2] = mge_graph_add_value(t.g, "b", MGE_VAL_PARAM, MGE_QS32, 1, bd, &err);
    CHECK_OK(mge_tensor_alloc(&t.in[0], MGE_QS8, xnd, xd, &err), err);
    CHECK_OK(mge_tensor_alloc(&t.in[1], MGE_QS8, wnd, wd, &err), err);
    CHECK_OK(mge_tensor_alloc(&t.in[2], MGE_QS32, 1, bd, &err), err);
    int8_t *xp = t.in[0].data, *wp = t.in[1].data;
    for (int64_t i = 0; i < mge_tensor_numel(&t.in[0]); i++)
        xp[i] = (int8_t)rnd_in(-128, 127);
    for (int64_t i = 0; i < mge_tensor_numel(&t.in[1]); i++)
        wp[i] = (int8_t)rnd_in(-127, 127);
    t.in[1].q.axis = -1, t.in[1].q.nscale = 1;
    t.in[1].q.scale = malloc(sizeof(float));
    t.in[1].q.scale[0] = 0.01f;
    int64_t k2[2] = {k, k};
    mge_attr at[12];
    int na = 0;
    at[na++] = A(MGE_KEY_out, O);
    if (!lin) {
        at[na++] = A_ints(MGE_KEY_kernel, 2, k2);
        at[na++] = A(MGE_KEY_stride, st);
        at[na++] = A(MGE_KEY_pad, pad);
        at[na++] = A(MGE_KEY_groups, G);
    }
    at[na++] = A(MGE_KEY_bias, 1);
    at[na++] = A(MGE_KEY_act, MGE_OP_RELU);
    at[na++] = A_f(MGE_KEY_x_scale, 0.05);
    at[na++] = A_f(MGE_KEY_y_scale, 5.0);
    at[na++] = A(MGE_KEY_x_zero, -128);
    at[na++] = A(MGE_KEY_y_zero, -128);
    double best = 1e30;
    *ops = 0;
    if (!ug_kcase_node(&t, lin ? MGE_OP_QLINEAR : MGE_OP_QCONV2D, 3, ids, na, at))
        return best;
    const mge_node *n = &t.g->nodes[t.node];
    const mge_kernel *kr = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_QS8);
    mge_tensor *in[3] = {&t.in[0], &t.in[1], &t.in[2]};
    int64_t P = mge_tensor_numel(&t.out) / O;
    *ops = 2.0 * (double)O * (double)(lin ? C : C / G * k * k) * (double)P;
    /* with the state an inference executor prepares (the AMX level's packed weights) */
    void *state = NULL;
    if (kr->prepare) {
        mge_tensor *pin[3] = {NULL, in[1], in[2]};
        CHECK_OK(kr->prepare(n, pin, &state, &err), err);
    }
    void *ws = NULL;
    CHECK_OK(run_prepared(kr, pool, n, in, &t.out, state, &ws, &err), err);   /* warm up */
    /* the best of a few runs: the machine is shared, the mean says more about the neighbours */
    double start = mge_now();
    int reps = 0;
    do {
        double t0 = mge_now();
        run_prepared(kr, pool, n, in, &t.out, state, &ws, &err);
        double el = mge_now() - t0;
        best = el < best ? el : best;
        reps++;
    } while (mge_now() - start < budget && reps < 300);
    if (state)
        kr->release(state);
    mge_aligned_free(ws);
    ug_kcase_free(&t);
    return best;
}

/* the 3x3 64-channel 56x56 conv at 1 and 2 threads, and (at the vector
 * levels) resnet18's convs and fc at batch 1, summed */
static void bench(const char *level, int vector)
{
    double ops;
    mge_pool *pools[2] = {NULL, pool2};
    /* MGE_QK_SHAPE=C,H,O,k,stride,pad[,groups]: that conv alone (k 0: qlinear, C,1,O,0,N,0: x [N, C]) */
    long long sc[7] = {0, 0, 0, 0, 0, 0, 1};
    const char *shape = getenv("MGE_QK_SHAPE");
    if (shape && sscanf(shape, "%lld,%lld,%lld,%lld,%lld,%lld,%lld", &sc[0], &sc[1], &sc[2], &sc[3], &sc[4], &sc[5],
                        &sc[6]) >= 6) {
        for (int p = 0; p < 2; p++) {
            double t = bench_one(sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], pools[p], 0.3, &ops);
            printf("  %s (%s, %d thread%s): %.3f ms, %.1f GOP/s\n", shape, level, p + 1, p ? "s" : "", t * 1e3,
                   ops / t * 1e-9);
        }
        return;
    }
    for (int p = 0; p < 2; p++) {
        double t = bench_one(64, 56, 64, 3, 1, 1, 1, pools[p], 0.15, &ops);
        printf("  qconv2d 64x56x56 3x3 (%s, %d thread%s): %.3f ms, %.1f GOP/s\n", level, p + 1, p ? "s" : "",
               t * 1e3, ops / t * 1e-9);
    }
    double td = bench_one(96, 112, 96, 3, 1, 1, 96, NULL, 0.05, &ops);
    printf("  depthwise 96x112x112 3x3 (%s, 1 thread): %.3f ms, %.1f GOP/s\n", level, td * 1e3, ops / td * 1e-9);
    if (!vector)
        return;
    static const int64_t r18[][7] = {
        /* C, H, O, k, stride, pad, count */
        {3, 224, 64, 7, 2, 3, 1},    {64, 56, 64, 3, 1, 1, 4},    {64, 56, 128, 3, 2, 1, 1},
        {128, 28, 128, 3, 1, 1, 3},  {64, 56, 128, 1, 2, 0, 1},   {128, 28, 256, 3, 2, 1, 1},
        {256, 14, 256, 3, 1, 1, 3},  {128, 28, 256, 1, 2, 0, 1},  {256, 14, 512, 3, 2, 1, 1},
        {512, 7, 512, 3, 1, 1, 3},   {256, 14, 512, 1, 2, 0, 1},  {512, 1, 1000, 0, 1, 0, 1},
    };
    for (int p = 0; p < 2; p++) {
        double tot = 0, tops = 0;
        for (size_t i = 0; i < sizeof r18 / sizeof r18[0]; i++) {
            double t = bench_one(r18[i][0], r18[i][1], r18[i][2], r18[i][3], r18[i][4], r18[i][5], 1, pools[p],
                                 0.02, &ops);
            tot += t * (double)r18[i][6], tops += ops * (double)r18[i][6];
            if (getenv("MGE_QK_LAYERS"))   /* per layer, for whoever tunes the kernels */
                printf("    C %lld H %lld O %lld k %lld s %lld: %.3f ms, %.1f GOP/s\n", (long long)r18[i][0],
                       (long long)r18[i][1], (long long)r18[i][2], (long long)r18[i][3], (long long)r18[i][4],
                       t * 1e3, ops / t * 1e-9);
        }
        printf("  resnet18 convs + fc, batch 1 (%s, %d thread%s): %.2f ms, %.1f GOP/s\n", level, p + 1,
               p ? "s" : "", tot * 1e3, tops / tot * 1e-9);
    }
}

/* ---------------------------------------------------------------- main */

static int child(void)
{
    const char *lv = mge_cpu_int8_name(mge_cpu_int8());
    const char *cap = getenv("MGE_CPU_ISA");
    printf("test_quant_kernels: MGE_CPU_ISA=%s: int8 level %s\n", cap ? cap : "(unset)", lv);
    fflush(stdout);
    pool2 = mge_pool_create(2);
    pool3 = mge_pool_create(3);
    if (!getenv("MGE_QK_BENCHONLY")) {   /* MGE_QK_BENCHONLY=1: the timings alone */
        RUN(test_qconv);
        RUN(test_qlinear);
        RUN(test_qconv_w128);
        RUN(test_elementwise);
        RUN(test_pool);
        /* the AMX level prepares its packed weights (the inference executors' path) */
        CHECK_MSG(mge_cpu_int8() != MGE_INT8_AMX || nprepared >= 20, "only %d cases ran prepared", nprepared);
    }
    if (!getenv("MGE_QK_NOBENCH"))
        bench(lv, mge_cpu_int8() != MGE_INT8_BASE);
    mge_pool_free(pool2);
    mge_pool_free(pool3);
    return unit_done();
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("MGE_QK_CHILD"))
        return child();
    /* avx512-vnni: where the machine has AMX, the level below it (unset) */
    static const char *levels[] = {"baseline", "avx2", "avx2-vnni", "avx512", "avx512-vnni", NULL};
    int fail = 0;
    for (int i = 0; i < 6; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("MGE_QK_CHILD", "1", 1);
            if (levels[i])
                setenv("MGE_CPU_ISA", levels[i], 1);
            else
                unsetenv("MGE_CPU_ISA");
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "test_quant_kernels: the run with MGE_CPU_ISA=%s failed\n",
                    levels[i] ? levels[i] : "(unset)");
            fail = 1;
        }
    }
    printf("test_quant_kernels: %s\n", fail ? "FAILED" : "all levels passed");
    return fail;
}
