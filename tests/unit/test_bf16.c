/* test_bf16.c — the bf16 layers (precision=bf16, kernels/cpu/cpu_bf16.c)
 * against f32, at every bf16 level this CPU has (the binary runs itself
 * again with MGE_CPU_ISA=avx512-bf16 when it has AMX, and with
 * MGE_CPU_ISA=avx512, where bf16 layers must compute in f32).
 *
 * The bound: bf16 rounds each operand to 8 significant bits, so a product
 * is off by at most about 2^-8 (x) + 2^-8 (w) of itself, and an output by
 * 2^-7 times the sum of |x||w| over its terms, plus the f32 sums' own
 * rounding. That sum is the same layer run in f32 on |x| and |w| with no
 * bias, so each element gets its own tolerance, for any shape. */
#include <math.h>
#include <stdlib.h>

#include "unit_graph.h"

static int level;

/* Runs g with x (and, when given, the params' absolute values) through an
 * executor: prepared (preprocess, the weights packed once) or not. */
static int run(const mge_graph *g, const mge_tensor *x, int threads, int preprocess, mge_tensor *y)
{
    mge_error err;
    mge_error_clear(&err);
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.threads = threads;
    o.preprocess = preprocess;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        return 0;
    const mge_tensor *ins[1] = {x};
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    int ok = err.code == MGE_OK;
    /* twice: the second run uses what the first prepared */
    if (ok && preprocess)
        CHECK_OK(mge_exec_run(e, ins, &err), err);
    ok = ok && err.code == MGE_OK;
    if (ok)
        CHECK_OK(mge_tensor_copy(y, mge_exec_result(e, 0), &err), err);
    mge_exec_free(e);
    return ok;
}

static mge_graph *build(const char *src, int prec, int absolute, int layout)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return NULL;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_graph_init_params(g, 7, &err), err);
    for (int v = 0; v < g->nvalues; v++) {
        mge_value *val = &g->values[v];
        if (val->kind != MGE_VAL_PARAM || !val->data)
            continue;
        float *p = val->data->data;
        int bias = strstr(val->name, ".bias") != NULL;
        for (int64_t i = 0; i < mge_tensor_numel(val->data); i++) {
            /* biases away from 0 so the epilogue is tested */
            if (bias)
                p[i] = absolute ? 0.0f : 0.1f * (float)(i % 7) - 0.3f;
            else if (absolute)
                p[i] = fabsf(p[i]);
        }
    }
    int nset = 0;
    CHECK_OK(mge_precision_set(g, prec, 0, NULL, &nset, NULL, 0, &err), err);
    if (prec)
        CHECK(nset > 0);
    const char *passes = layout ? "fuse-activation,layout" : "fuse-activation";
    int ch = 0;
    CHECK_OK(mge_passes_run_list(&g, passes, &ch, &err), err);
    return g;
}

/* One layer: bf16 within the bound of f32, prepared == unprepared, 1 == 2
 * threads; where bf16 runs, not f32's bits. */
static void check_layer(const char *what, const char *src, int64_t n, int c, int h, int w, int layout, int bounded)
{
    int blocked = 0;
    mge_error err;
    mge_error_clear(&err);
    mge_graph *gf = build(src, 0, 0, layout), *gb = build(src, 1, 0, layout), *ga = build(src, 0, 1, layout);
    if (!gf || !gb || !ga) {
        CHECK(0);
        goto out;
    }
    if (layout) {
        blocked = ug_count_op(gb, MGE_OP_CONV2D_NCHWC);
        CHECK_MSG(blocked == 2 || mge_cpu_isa() < MGE_ISA_AVX512, "%s: %d conv2d_nchwc after layout", what, blocked);
    }
    mge_tensor x = {0}, xa = {0}, yf = {0}, yb = {0}, yb0 = {0}, yb2 = {0}, ya = {0};
    int64_t dims[4] = {n, c, h, w};
    int nd = h ? 4 : 2;
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, nd, dims, &err), err);
    CHECK_OK(mge_tensor_alloc(&xa, MGE_F32, nd, dims, &err), err);
    mge_rng r;
    mge_rng_seed(&r, 11);
    for (int64_t i = 0; i < mge_tensor_numel(&x); i++) {
        ((float *)x.data)[i] = mge_rng_normal(&r);
        ((float *)xa.data)[i] = fabsf(((float *)x.data)[i]);
    }
    if (run(gf, &x, 1, 1, &yf) && run(gb, &x, 1, 1, &yb) && run(gb, &x, 1, 0, &yb0) && run(gb, &x, 2, 1, &yb2) &&
        run(ga, &xa, 1, 1, &ya)) {
        int64_t cnt = mge_tensor_numel(&yf), bad = 0, diff = 0, far = 0;
        const float *f = yf.data, *b = yb.data, *a = ya.data;
        double worst = 0;
        for (int64_t i = 0; i < cnt; i++) {
            double tol = ldexp(1.0, bounded == 2 ? -6 : -7) * 1.02 * a[i] + 1e-5 * (1 + a[i]);
            double d = fabs((double)b[i] - f[i]);
            if (bounded && !(d <= tol)) {
                if (bad++ < 3)
                    fprintf(stderr, "%s: element %lld: bf16 %.9g f32 %.9g (|d| %.3g > %.3g)\n", what, (long long)i,
                            b[i], f[i], d, tol);
            }
            if (d > worst)
                worst = d;
            diff += b[i] != f[i];
            far += d > 1e-5 * (1 + a[i]);
        }
        CHECK_MSG(bad == 0, "%s: %lld of %lld elements beyond the bf16 bound", what, (long long)bad, (long long)cnt);
        CHECK_MSG(memcmp(yb.data, yb0.data, yb.nbytes) == 0, "%s: prepared and unprepared weights differ", what);
        CHECK_MSG(memcmp(yb.data, yb2.data, yb.nbytes) == 0, "%s: 1 and 2 threads differ", what);
        if (level && (!layout || blocked))
            CHECK_MSG(diff > 0, "%s: bf16 gave f32's bits at level %d (did it run in f32?)", what, level);
        /* f32 without bf16 kernels: the f32 model may take Winograd where
         * the bf16 one stays direct, so f32 rounding apart, not bits */
        else if (!level)
            CHECK_MSG(far == 0, "%s: without bf16 kernels the layer must compute in f32 (%lld differ)", what,
                      (long long)far);
        printf("  %-44s max |bf16 - f32| %.3g\n", what, worst);
    }
    mge_tensor_free(&x);
    mge_tensor_free(&xa);
    mge_tensor_free(&yf);
    mge_tensor_free(&yb);
    mge_tensor_free(&yb0);
    mge_tensor_free(&yb2);
    mge_tensor_free(&ya);
out:
    mge_graph_free(gf);
    mge_graph_free(gb);
    mge_graph_free(ga);
}

static void test_conv_nchwc(void)
{
    static const struct {
        int n, c, h, w, o, k, s, p, d;
    } cs[] = {
        {1, 16, 8, 8, 16, 3, 1, 1, 1},   {1, 64, 14, 14, 64, 3, 1, 1, 1}, {2, 32, 9, 7, 48, 3, 2, 1, 1},
        {1, 48, 5, 23, 24, 1, 1, 0, 1},  {1, 24, 12, 12, 40, 5, 1, 2, 1}, {1, 16, 11, 13, 72, 3, 1, 2, 2},
        {1, 128, 7, 7, 256, 1, 2, 0, 1}, {1, 80, 3, 3, 16, 3, 1, 1, 1},   {1, 32, 1, 1, 32, 1, 1, 0, 1},
        {2, 96, 17, 17, 32, 7, 1, 3, 1},
        /* stems: a plain NCHW input of few channels (K = channel x tap) */
        {1, 3, 33, 31, 64, 7, 2, 3, 1},  {2, 1, 12, 12, 16, 3, 1, 1, 1},  {1, 8, 9, 9, 40, 3, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char src[512], what[96];
        snprintf(src, sizeof src,
                 "input x : f32[N,%d,%d,%d]\n"
                 "c = conv2d(x, out=%d, kernel=%d, stride=%d, pad=%d, dilation=%d)\n"
                 "h = relu(c)\n"
                 "y = conv2d(h, out=16, kernel=1)\n"
                 "output y\n",
                 cs[i].c, cs[i].h, cs[i].w, cs[i].o, cs[i].k, cs[i].s, cs[i].p, cs[i].d);
        snprintf(what, sizeof what, "conv %dx%dx%dx%d -> %d k%d s%d p%d d%d", cs[i].n, cs[i].c, cs[i].h, cs[i].w,
                 cs[i].o, cs[i].k, cs[i].s, cs[i].p, cs[i].d);
        /* two convs, so the layout pass blocks them (it wants two); the
         * second adds its own 2^-7 and carries the first's: bound 2^-6 */
        check_layer(what, src, cs[i].n, cs[i].c, cs[i].h, cs[i].w, 1, 2);
    }
    /* a residual, fused by the passes */
    check_layer("conv 1x32x10x10 + residual + relu",
                "input x : f32[N,32,10,10]\n"
                "a = conv2d(x, out=32, kernel=1)\n"
                "c = conv2d(a, out=32, kernel=3, pad=1)\n"
                "s = add(c, a)\n"
                "y = relu(s)\n"
                "output y\n",
                1, 32, 10, 10, 1, 0);
}

static void test_linear(void)
{
    static const struct {
        int m, k, o;
    } cs[] = {{1, 64, 10}, {5, 3136, 128}, {33, 100, 17}, {64, 31, 64}, {2, 1, 3}, {40, 512, 1000}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char src[256], what[96];
        snprintf(src, sizeof src, "input x : f32[N,%d]\ny = linear(x, out=%d)\noutput y\n", cs[i].k, cs[i].o);
        snprintf(what, sizeof what, "linear %dx%d -> %d", cs[i].m, cs[i].k, cs[i].o);
        check_layer(what, src, cs[i].m, cs[i].k, 0, 0, 0, 1);
    }
    check_layer("fused_linear 9x40 -> 24 + gelu",
                "input x : f32[N,40]\nl = linear(x, out=24)\ny = gelu(l)\noutput y\n", 9, 40, 0, 0, 0, 0);
}


int main(int argc, char **argv)
{
    (void)argc;
    level = mge_cpu_bf16();
    printf("test_bf16: bf16 level %s%s%s\n", mge_cpu_bf16_name(level), *mge_cpu_bf16_note() ? ": " : "",
           mge_cpu_bf16_note());
    RUN(test_conv_nchwc);
    RUN(test_linear);
    int rc = unit_done();
    if (!getenv("MGE_CPU_ISA")) {
        if (level == MGE_BF16_AMX)
            rc |= unit_rerun_isa(argv, "test_bf16", "avx512-bf16");
        if (level != MGE_BF16_NONE)
            rc |= unit_rerun_isa(argv, "test_bf16", "avx512");
        else
            printf("test_bf16: this CPU has no bf16 kernels: only the f32 path was tested\n");
    }
    return rc;
}
