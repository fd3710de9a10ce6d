/* test_sample.c — grid_sample (and resize's bicubic mode), roi_align and
 * deform_conv2d: every refused
 * shape and attribute with its message, hand-computed samples on ref and
 * cpu (corners, centre, each padding mode outside, nearest's round half
 * to even, bicubic at a pixel, 3-D), and the gradient rules against
 * finite differences for every mode, padding mode and align_corners,
 * with grids reaching past [-1, 1]; roi_align's run-time refusals and
 * hand-computed roi_align and deform_conv2d. PyTorch and torchvision
 * check the numbers at scale in tests/oracle/test_grid_sample.py and
 * test_roi.py. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"
#include "unit_grad.h"

static mge_error err;

static void values(const char *src, const float *want, int nw);

static void refused(const char *src, const char *msg)
{
    mge_graph *g = NULL;
    CHECK_MSG(mge_text_parse(src, strlen(src), ".", &g, &err) != MGE_OK, "accepted: %s", src);
    CHECK_MSG(strstr(err.msg, msg), "%s\n  got: %s\n  expected: %s", src, err.msg, msg);
    mge_graph_free(g);
}

static void test_errors(void)
{
    char src[512];
#define BAD(decl, line, msg)                                                 \
    do {                                                                     \
        snprintf(src, sizeof src, "%s%s\noutput y\n", decl, line);           \
        refused(src, msg);                                                   \
    } while (0)
    const char *ok = "input x : f32[2,3,5,6]\ninput g : f32[2,4,7,2]\n";
    BAD("input x : f32[2,3,5]\ninput g : f32[2,4,2]\n", "y = grid_sample(x, g)",
        "grid_sample: x is f32[2,3,5]: expected rank 4 [N,C,H,W] or 5 [N,C,D,H,W]");
    BAD("input x : i32[2,3,5,6]\ninput g : f32[2,4,7,2]\n", "y = grid_sample(x, g)", "expected a float dtype");
    BAD("input x : f32[2,3,5,6]\ninput g : f32[2,4,7,3]\n", "y = grid_sample(x, g)",
        "grid_sample: grid is f32[2,4,7,3] for x f32[2,3,5,6]: expected f32[N,OH,OW,2]");
    BAD("input x : f32[2,3,5,6]\ninput g : f32[1,4,7,2]\n", "y = grid_sample(x, g)", "grid is f32[1,4,7,2]");
    BAD("input x : f32[2,3,5,6]\ninput g : f16[2,4,7,2]\n", "y = grid_sample(x, g)", "(x's dtype, its N");
    BAD("input x : f32[2,3,4,5,6]\ninput g : f32[2,4,7,2,2]\n", "y = grid_sample(x, g)",
        "expected f32[N,OD,OH,OW,3]");
    BAD("input x : f32[2,3,4,5,6]\ninput g : f32[2,4,7,2,3]\n", "y = grid_sample(x, g, mode=bicubic)",
        "grid_sample: mode=bicubic needs a 4-D x [N,C,H,W] (x is f32[2,3,4,5,6])");
    BAD(ok, "y = grid_sample(x, g, mode=reflect)", "grid_sample: mode=reflect: expected nearest, bilinear or bicubic");
    BAD(ok, "y = grid_sample(x, g, padding_mode=edge)",
        "grid_sample attribute 'padding_mode': expected one of zeros border reflection, found 'edge'");
    BAD(ok, "y = grid_sample(x)", "grid_sample");
    BAD("input x : f32[2,3,5,6]\ninput g : f32[2,4,7,2]\ninput dy : f32[2,3,4,6]\n",
        "y, z = grid_sample_grad(dy, x, g)", "grid_sample_grad: dy is f32[2,3,4,6]: expected f32[2,3,4,7]");
    const char *ro = "input x : f32[2,3,8,8]\ninput r : f32[5,4]\ninput b : i64[5]\n";
    BAD(ro, "y = roi_align(x, r, b)", "roi_align needs attribute 'output_size'");
    BAD(ro, "y = roi_align(x, r, b, output_size=[2, 0])", "roi_align: output_size must be [oh,ow], each >= 1");
    BAD(ro, "y = roi_align(x, r, b, output_size=[2, 2], spatial_scale=0)", "roi_align: spatial_scale=0: expected > 0");
    BAD(ro, "y = roi_align(x, r, b, output_size=[2, 2], sampling_ratio=-1)", "sampling_ratio=-1: expected >= 0");
    BAD("input x : f32[2,3,8,8]\ninput r : f32[5,5]\ninput b : i64[5]\n", "y = roi_align(x, r, b, output_size=[2, 2])",
        "roi_align: rois is f32[5,5]: expected f32[R,4] (x1, y1, x2, y2)");
    BAD("input x : f32[2,3,8,8]\ninput r : f32[5,4]\ninput b : f32[5]\n", "y = roi_align(x, r, b, output_size=[2, 2])",
        "roi_align: batch_indices is f32[5]: expected i64[R] or i32");
    BAD("input x : f32[2,3,8,8]\ninput r : f32[5,4]\ninput b : i64[4]\n", "y = roi_align(x, r, b, output_size=[2, 2])",
        "roi_align: batch_indices is i64[4]");
    const char *de = "input x : f32[1,4,6,6]\ninput w : f32[2,2,3,3]\ninput o : f32[1,18,4,4]\n";
    BAD(de, "y = deform_conv2d(x, w, o)", "deform_conv2d: weight is f32[2,2,3,3] for x f32[1,4,6,6]");
    BAD(de, "y = deform_conv2d(x, w, o, groups=2, offset_groups=3)",
        "deform_conv2d: groups=2 and offset_groups=3 must divide the 4 channels");
    BAD(de, "y = deform_conv2d(x, w, o, groups=2, offset_groups=2)",
        "deform_conv2d: offset is f32[1,18,4,4]: expected f32[1,36,4,4]");
    BAD(de, "y = deform_conv2d(x, w, o, groups=2, stride=0)", "stride and dilation must be >= 1, pad >= 0");
    BAD("input x : f32[1,4,2,6]\ninput w : f32[2,4,3,3]\ninput o : f32[1,18,4,4]\n", "y = deform_conv2d(x, w, o)",
        "deform_conv2d: the kernel f32[2,4,3,3] does not fit x f32[1,4,2,6]");
    BAD("input x : f32[1,4,6,6]\ninput w : f32[2,2,3,3]\ninput o : f32[1,18,4,4]\ninput b : f32[3]\n",
        "y = deform_conv2d(x, w, o, b, groups=2)", "deform_conv2d: bias is f32[3]: expected f32[2]");
    BAD("input x : f32[1,4,6,6]\ninput w : f32[2,2,3,3]\ninput o : f32[1,18,4,4]\ninput b : f32[2]\n"
        "input m : f32[1,9,4,3]\n",
        "y = deform_conv2d(x, w, o, b, m, groups=2)", "deform_conv2d: mask is f32[1,9,4,3]: expected f32[1,9,4,4]");
#undef BAD
}

/* roi_align refuses a batch index outside x and a roi that is not finite
 * when it runs (they are data). */
static void test_run_errors(void)
{
    static const char *const src[] = {
        "const x : f32[2,1,4,4] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n"
        "const r : f32[1,4] = [0, 0, 2, 2]\nconst b : i64[1] = [2]\n"
        "y = roi_align(x, r, b, output_size=[2, 2])\noutput y\n",
        "const x : f32[2,1,4,4] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n"
        "const r : f32[1,4] = [0, 0, 2, 1e30]\nconst b : i32[1] = [1]\n"
        "y = roi_align(x, r, b, output_size=[2, 2])\noutput y\n"};
    static const char *const msg[] = {"roi_align: batch_indices[0] = 2: expected 0..1",
                                      "roi_align: roi 0 needs"};
    for (int i = 0; i < 2; i++) {
        mge_graph *g = ug_parse(src[i]);
        if (!g)
            continue;
        mge_exec *e = NULL;
        mge_exec_opts eo = {0};
        eo.backend = "ref";
        CHECK_OK(mge_exec_create(g, &eo, &e, &err), err);
        if (e) {
            CHECK(mge_exec_run(e, NULL, &err) != MGE_OK);
            CHECK_MSG(strstr(err.msg, msg[i]), "got: %s\nexpected: %s", err.msg, msg[i]);
            mge_exec_free(e);
        }
        mge_graph_free(g);
    }
    /* a hand-computed roi_align: the 2x2 roi [0,0]-[2,2] of a ramp, one
     * sample per bin at its centre (0.5, 0.5)... (1.5, 1.5), not aligned */
    values("const x : f32[1,1,3,3] = [0, 1, 2, 3, 4, 5, 6, 7, 8]\nconst r : f32[1,4] = [0, 0, 2, 2]\n"
           "const b : i64[1] = [0]\ny = roi_align(x, r, b, output_size=[2, 2], sampling_ratio=1)\noutput y\n",
           (const float[]){2, 3, 5, 6}, 4);
    /* deform_conv2d with zero offsets is conv2d; an offset of +1 along W
     * shifts the sampling one pixel (the last column reads zeros) */
    values("const x : f32[1,1,2,3] = [1, 2, 3, 4, 5, 6]\nconst w : f32[1,1,1,1] = [2]\n"
           "const o : f32[1,2,2,3] = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]\n"
           "y = deform_conv2d(x, w, o)\noutput y\n",
           (const float[]){4, 6, 0, 10, 12, 0}, 6);
}

/* Runs src (no inputs) on ref and cpu; output 0 must be want[0..nw). */
static void values(const char *src, const float *want, int nw)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    static const char *const be[2] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        ug_outs o = {0};
        ug_fill f = {0};
        if (!ug_run(g, be[b], 1, 1, f, &o))
            continue;
        CHECK_MSG(o.n >= 1 && mge_tensor_numel(&o.t[0]) == nw, "%s: %lld values", be[b],
                  o.n ? (long long)mge_tensor_numel(&o.t[0]) : -1LL);
        for (int i = 0; o.n && i < nw && i < mge_tensor_numel(&o.t[0]); i++)
            CHECK_MSG(fabs(((float *)o.t[0].data)[i] - want[i]) < 1e-5, "%s [%d]: %.7g, expected %.7g\n%s", be[b], i,
                      ((float *)o.t[0].data)[i], want[i], src);
        ug_outs_free(&o);
    }
    mge_graph_free(g);
}

static void test_values(void)
{
    /* x = [[1, 2], [3, 4]]; grid points (x, y): corners, centre, outside */
    const char *x = "const x : f32[1,1,2,2] = [1, 2, 3, 4]\n"
                    "const g : f32[1,1,5,2] = [-1, -1, 1, 1, 0, 0, 2, 0, -0.5, 0.5]\n";
    char src[512];
    /* align_corners: corners are pixel centres; (2, 0) is outside on the
     * right; (-0.5, 0.5) is at column 0.25, row 0.75: rows 1.25 and 3.25 */
    static const float al_zero[] = {1, 4, 2.5, 1.5f, 2.75f}; /* (2, 0): column 1.5, half its taps inside */
    static const float al_border[] = {1, 4, 2.5, 3, 2.75f};
    /* x=2 reflects about 1 to 0: the middle column */
    static const float al_refl[] = {1, 4, 2.5, 2.5, 2.75f};
    /* not aligned: -1 is the left edge of pixel 0, half outside in both
     * dims: 1/4 of x[0][0]; (-0.5, 0.5) is column 0, row 1 */
    static const float un_zero[] = {0.25f, 1, 2.5, 0, 3};
    static const float un_border[] = {1, 4, 2.5, 3, 3};
    static const float *const want[] = {al_zero, al_border, al_refl, un_zero, un_border};
    static const char *const attrs[] = {
        "align_corners=true", "align_corners=true, padding_mode=border", "align_corners=true, padding_mode=reflection",
        "", "padding_mode=border"};
    for (int i = 0; i < 5; i++) {
        snprintf(src, sizeof src, "%sy = grid_sample(x, g%s%s)\noutput y\n", x, *attrs[i] ? ", " : "", attrs[i]);
        values(src, want[i], 5);
    }
    /* nearest rounds half to even: x = 0.5 of 2 columns (aligned) is column 0,
     * 1.5 column 2 (outside: 0 with zeros) */
    values("const x : f32[1,1,1,3] = [1, 2, 3]\nconst g : f32[1,1,3,2] = [-0.5, 0, 0.5, 0, 0, 0]\n"
           "y = grid_sample(x, g, mode=nearest, align_corners=true)\noutput y\n",
           (const float[]){1, 3, 2}, 3);
    /* bicubic at a pixel centre is that pixel (the cubic's weights are 0, 1, 0, 0) */
    values("const x : f32[1,1,3,3] = [1, 2, 3, 4, 5, 6, 7, 8, 9]\nconst g : f32[1,1,2,2] = [0, 0, 1, -1]\n"
           "y = grid_sample(x, g, mode=bicubic, align_corners=true)\noutput y\n",
           (const float[]){5, 3}, 2);
    /* bicubic resize of a ramp along W: at half steps the weights are
     * -0.09375, 0.59375, 0.59375, -0.09375, so the line comes back inside
     * (1.5) and bends at the ends, where the taps clamp to the edge */
    values("const x : f32[1,1,1,4] = [0, 1, 2, 3]\n"
           "y = resize(x, mode=bicubic, align_corners=true, size=[1, 7])\noutput y\n",
           (const float[]){0, 0.40625f, 1, 1.5f, 2, 2.59375f, 3}, 7);
    /* exclude_outside at the border renormalizes: a constant stays constant */
    values("const x : f32[1,1,2,2] = [5, 5, 5, 5]\n"
           "y = resize(x, mode=bicubic, exclude_outside=true, cubic_a=-0.5, scales=[2, 2])\noutput y\n",
           (const float[]){5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, 16);
    /* 3-D: the centre of a 2x2x2 cube is the mean */
    values("const x : f32[1,1,2,2,2] = [1, 2, 3, 4, 5, 6, 7, 8]\nconst g : f32[1,1,1,1,3] = [0, 0, 0]\n"
           "y = grid_sample(x, g)\noutput y\n",
           (const float[]){4.5f}, 1);
}

/* ---------------------------------------------------------------- gradients */

/* dgrid and dx of grid_sample(x, g) by finite differences, the grid's
 * points uniform in [-1.25, 1.25) (seeded), x uniform(-1, 1). */
static void fd_grid(const char *xs, const int64_t *xd, const char *gs, const int64_t *gd, int gnd, int align,
                    const char *attrs)
{
    char src[512];
    snprintf(src, sizeof src, "input x : %s\ninput g : %s\ny = grid_sample(x, g, %s)\noutput y\n", xs, gs, attrs);
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    mge_tensor gt;
    CHECK_OK(mge_tensor_alloc(&gt, MGE_F32, gnd, gd, &err), err);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < mge_tensor_numel(&gt); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((double)(s >> 11) / 9007199254740992.0 * 2.5 - 1.25);
        /* away from the kinks (pixel boundaries, nearest's half steps,
         * where border and reflection fold): central differences straddle them */
        int64_t size = xd[2 + (gnd - 3) - i % (gnd - 2)];
        for (;;) {
            double c = align ? (v + 1) / 2 * (double)(size - 1) : ((v + 1) * (double)size - 1) / 2;
            double f = 2 * c - floor(2 * c);
            if (f > 0.04 && f < 0.96)
                break;
            v += 0.013f;
        }
        ((float *)gt.data)[i] = v;
    }
    const mge_tensor *given[2] = {NULL, &gt};
    double w = gc_check(g, mge_graph_find(g, "y"), given, 2e-2, 0);
    CHECK_MSG(w < 2e-2, "worst %g: %s", w, src);
    mge_tensor_free(&gt);
    mge_graph_free(g);
}

static void test_grads(void)
{
    static const char *const modes[] = {"bilinear", "nearest", "bicubic"};
    static const char *const pads[] = {"zeros", "border", "reflection"};
    char a[128];
    int64_t g2[4] = {2, 3, 4, 2}, g3[5] = {1, 2, 3, 2, 3}, x2[4] = {2, 2, 4, 5}, x3[5] = {1, 2, 3, 4, 2};
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++)
            for (int al = 0; al < 2; al++) {
                snprintf(a, sizeof a, "mode=%s, padding_mode=%s, align_corners=%s", modes[m], pads[p],
                         al ? "true" : "false");
                fd_grid("f32[2,2,4,5]", x2, "f32[2,3,4,2]", g2, 4, al, a);
                if (m < 2)
                    fd_grid("f32[1,2,3,4,2]", x3, "f32[1,2,3,2,3]", g3, 5, al, a);
            }
    static const char *const rs[] = {"scales=[2, 2]", "scales=[1.5, 0.75]", "align_corners=true, size=[4, 7]",
                                     "size=[2, 9]", "exclude_outside=true, cubic_a=-0.5, scales=[2, 1.3]"};
    char src[512];
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
        snprintf(src, sizeof src, "input x : f32[2,3,5,4]\ny = resize(x, mode=bicubic, %s)\noutput y\n", rs[i]);
        mge_graph *g = ug_parse(src);
        if (!g)
            continue;
        double w = gc_check(g, mge_graph_find(g, "y"), NULL, 1e-2, 0);
        CHECK_MSG(w < 1e-2, "worst %g: %s", w, src);
        mge_graph_free(g);
    }
    /* roi_align: x's gradient, avg and max, aligned both ways, fixed and
     * adaptive sampling, rois partly outside */
    static const char *const ra[] = {"output_size=[2, 3]", "output_size=[3, 2], sampling_ratio=2, aligned=true",
                                     "output_size=[2, 2], pooling=max, sampling_ratio=2",
                                     "output_size=[3, 3], pooling=max, aligned=true, spatial_scale=0.5"};
    for (size_t i = 0; i < sizeof ra / sizeof ra[0]; i++) {
        snprintf(src, sizeof src,
                 "input x : f32[2,2,6,5]\nconst r : f32[3,4] = [0.3, 0.6, 3.7, 4.1, -1.2, 1.5, 2.2, 7.5, 1.1, 0.2, 4.6, 2.9]\n"
                 "const b : i64[3] = [1, 0, 1]\ny = roi_align(x, r, b, %s)\noutput y\n", ra[i]);
        mge_graph *g = ug_parse(src);
        if (!g)
            continue;
        double w = gc_check(g, mge_graph_find(g, "y"), NULL, 1e-2, 0);
        CHECK_MSG(w < 1e-2, "worst %g: %s", w, src);
        mge_graph_free(g);
    }
    /* deform_conv2d: every operand (x, weight, offset, bias, mask) */
    static const char *const dc[] = {
        "input x : f32[2,2,5,4]\ninput w : f32[3,2,2,2]\ninput o : f32[2,8,4,3]\ny = deform_conv2d(x, w, o)\n",
        "input x : f32[1,4,6,5]\ninput w : f32[2,2,3,2]\ninput o : f32[1,24,3,5]\ninput b : f32[2]\n"
        "input m : f32[1,12,3,5]\ny = deform_conv2d(x, w, o, b, m, groups=2, offset_groups=2, stride=[2, 1], "
        "pad=[1, 1], dilation=[1, 2])\n",
        ("input x : f32[1,2,4,4]\ninput w : f32[2,2,2,2]\ninput o : f32[1,8,3,3]\ninput b : f32[2]\n"
         "y = deform_conv2d(x, w, o, b)\n")};
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) {
        snprintf(src, sizeof src, "%soutput y\n", dc[i]);
        mge_graph *g = ug_parse(src);
        if (!g)
            continue;
        double w = gc_check(g, mge_graph_find(g, "y"), NULL, 2e-2, 0);
        CHECK_MSG(w < 2e-2, "worst %g: %s", w, src);
        mge_graph_free(g);
    }
    /* the gradient op has none */
    mge_graph *g = ug_parse("input dy : f32[1,1,2,2]\ninput x : f32[1,1,3,3]\ninput gr : f32[1,2,2,2]\n"
                            "y, z = grid_sample_grad(dy, x, gr)\noutput y\n");
    if (g) {
        int x = mge_graph_find(g, "dy"), gx = -1;
        CHECK(mge_grad_build_from(g, mge_graph_find(g, "y"), -1, 1, &x, &gx, &err) == MGE_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "grid_sample_grad has no gradient rule"), "%s", err.msg);
        mge_graph_free(g);
    }
}

int main(void)
{
    RUN(test_errors);
    RUN(test_values);
    RUN(test_run_errors);
    RUN(test_grads);
    return unit_done();
}
