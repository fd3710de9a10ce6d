/* test_layout.c — the blocked layout (NCHWc): to_nchwc / from_nchwc and
 * conv2d_nchwc kernels (cpu against ref, and to_nchwc -> conv2d_nchwc ->
 * from_nchwc against the plain conv2d ref with the original weights) on odd
 * shapes, every activation, residual, depthwise, blocks of 16, 8 and 5, 1
 * and 2 threads; and the layout pass: what it converts on small models,
 * the numbers through the executor, and the graphs it leaves alone. */
#include "ref/ref.h"
#include "unit_graph.h"

static mge_rng rng;
static mge_pool *pool2;

/* Runs backend be's kernel for node `node` of g on in[], into a fresh *y of
 * the node output's shape (with batch dims as given by the inputs). */
static mge_status run_node(const mge_backend *be, mge_pool *pool, const mge_graph *g, int node, mge_tensor **in,
                           const int64_t *ydims, int yndim, mge_tensor *y, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    mge_status s = mge_tensor_alloc(y, MGE_F32, yndim, ydims, err);
    if (s)
        return s;
    memset(y->data, 0x7f, y->nbytes); /* garbage a kernel must overwrite */
    return ug_run_kernel(mge_backend_kernel(be, n->op, MGE_F32), pool, n, in, y, err);
}

/* max |a - b| <= rtol * max |b| (sums of many terms cancel). */
static void check_close(const char *what, const mge_tensor *a, const mge_tensor *b, double rtol)
{
    CHECK(mge_tensor_same_shape(a, b));
    if (!mge_tensor_same_shape(a, b))
        return;
    const float *x = a->data, *y = b->data;
    double maxref = 0, maxdiff = 0;
    for (int64_t k = 0; k < mge_tensor_numel(b); k++) {
        maxref = fmax(maxref, fabs(y[k]));
        maxdiff = fmax(maxdiff, fabs((double)x[k] - y[k]));
    }
    CHECK_MSG(maxdiff <= rtol * maxref + 1e-6, "%s: max diff %g, max |ref| %g", what, maxdiff, maxref);
}

/* ---------------------------------------------------------------- kernels */

typedef struct ccase {
    int64_t N, C, H, W, O, k, s, p, d;
    int dw, bias, res, act, c;
    int plain;   /* x in block 1: plain NCHW seen as [N,C,H,W,1] */
} ccase;

/* W [O,Ci,k,k] packed as the layout pass does (ops.def), input block ci. */
static void pack(const ccase *q, const float *w, int64_t Cb, int64_t ci, mge_tensor *t)
{
    mge_error err = {0};
    int64_t c = q->c, Ob = (q->O + c - 1) / c, Ci = q->dw ? 1 : q->C, K = q->k;
    if (q->dw) {
        int64_t d[4] = {Ob, K, K, c};
        CHECK_OK(mge_tensor_alloc(t, MGE_F32, 4, d, &err), err);
    } else {
        int64_t d[6] = {Ob, Cb, K, K, ci, c};
        CHECK_OK(mge_tensor_alloc(t, MGE_F32, 6, d, &err), err);
    }
    float *dst = t->data;
    memset(dst, 0, t->nbytes);
    for (int64_t o = 0; o < q->O; o++)
        for (int64_t i = 0; i < Ci; i++)
            for (int64_t kk = 0; kk < K * K; kk++) {
                float v = w[(o * Ci + i) * K * K + kk];
                if (q->dw)
                    dst[((o / c) * K * K + kk) * c + o % c] = v;
                else
                    dst[((((o / c) * Cb + i / ci) * K * K + kk) * ci + i % ci) * c + o % c] = v;
            }
}

/* to_nchwc of t with block c: ref and cpu agree bit for bit; ref's result in *out. */
static void block_of(const mge_tensor *t, int64_t c, mge_tensor *out)
{
    mge_error err = {0};
    mge_graph *g = mge_graph_new();
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, t->dims, &err);
    mge_attr a = A(MGE_KEY_block, c);
    const char *on[1] = {"y"};
    int node = mge_graph_add_node(g, "to", MGE_OP_TO_NCHWC, 1, &x, 1, &a, 1, on, &err);
    CHECK_MSG(node >= 0, "%s", err.msg);
    int64_t d[5] = {t->dims[0], (t->dims[1] + c - 1) / c, t->dims[2], t->dims[3], c};
    mge_tensor *in[1] = {(mge_tensor *)t};
    mge_tensor fast = {0};
    CHECK_OK(run_node(mge_backend_ref(), NULL, g, node, in, d, 5, out, &err), err);
    CHECK_OK(run_node(mge_backend_cpu(), pool2, g, node, in, d, 5, &fast, &err), err);
    CHECK(out->nbytes == fast.nbytes && memcmp(out->data, fast.data, out->nbytes) == 0);
    mge_tensor_free(&fast);
    mge_graph_free(g);
}

/* from_nchwc of t (channels C) on the cpu, checked against ref. */
static void unblock(const mge_tensor *t, int64_t C, mge_tensor *out)
{
    mge_error err = {0};
    mge_graph *g = mge_graph_new();
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, t->dims, &err);
    mge_attr a = A(MGE_KEY_channels, C);
    const char *on[1] = {"y"};
    int node = mge_graph_add_node(g, "from", MGE_OP_FROM_NCHWC, 1, &x, 1, &a, 1, on, &err);
    CHECK_MSG(node >= 0, "%s", err.msg);
    int64_t d[4] = {t->dims[0], C, t->dims[2], t->dims[3]};
    mge_tensor *in[1] = {(mge_tensor *)t};
    mge_tensor want = {0};
    CHECK_OK(run_node(mge_backend_cpu(), pool2, g, node, in, d, 4, out, &err), err);
    CHECK_OK(run_node(mge_backend_ref(), NULL, g, node, in, d, 4, &want, &err), err);
    CHECK(out->nbytes == want.nbytes && memcmp(out->data, want.data, out->nbytes) == 0);
    mge_tensor_free(&want);
    mge_graph_free(g);
}

static void run_case(const ccase *q)
{
    mge_error err = {0};
    int64_t c = q->c, Ci = q->dw ? 1 : q->C, G = q->dw ? q->C : 1;
    int64_t OH = mge_conv_out_dim(q->H, q->k, q->s, q->p, q->d, 0);
    int64_t OW = mge_conv_out_dim(q->W, q->k, q->s, q->p, q->d, 0);
    int64_t xd[4] = {q->N, q->C, q->H, q->W}, wd[4] = {q->O, Ci, q->k, q->k}, yd[4] = {q->N, q->O, OH, OW};
    int64_t ci = q->plain ? 1 : c, Cb = (q->C + ci - 1) / ci, Ob = (q->O + c - 1) / c;
    int64_t ybd[5] = {q->N, Ob, OH, OW, c};
    mge_tensor x = {0}, w = {0}, b = {0}, r = {0}, plain = {0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 4, xd, &err), err);
    CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 4, wd, &err), err);
    CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, &q->O, &err), err);
    CHECK_OK(mge_tensor_alloc(&r, MGE_F32, 4, yd, &err), err);
    ug_uniform(&x, &rng, -1, 1);
    ug_uniform(&w, &rng, -0.5f, 0.5f);
    ug_uniform(&b, &rng, -1, 1);
    ug_uniform(&r, &rng, -1, 1);

    /* the plain oracle: conv2d ref, then residual and activation in double */
    mge_graph *pg = mge_graph_new();
    int pin[3] = {mge_graph_add_value(pg, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err),
                  mge_graph_add_value(pg, "w", MGE_VAL_PARAM, MGE_F32, 4, wd, &err),
                  mge_graph_add_value(pg, "b", MGE_VAL_PARAM, MGE_F32, 1, &q->O, &err)};
    mge_attr pa[6] = {A(MGE_KEY_out, q->O), A(MGE_KEY_kernel, q->k), A(MGE_KEY_stride, q->s),
                      A(MGE_KEY_pad, q->p), A(MGE_KEY_dilation, q->d), A(MGE_KEY_groups, G)};
    const char *on[1] = {"y"};
    int pnode = mge_graph_add_node(pg, "conv", MGE_OP_CONV2D, 3, pin, 6, pa, 1, on, &err);
    CHECK_MSG(pnode >= 0, "%s", err.msg);
    mge_tensor *pins[3] = {&x, &w, &b};
    CHECK_OK(run_node(mge_backend_ref(), NULL, pg, pnode, pins, yd, 4, &plain, &err), err);
    float *pv = plain.data;
    const float *bv = b.data;
    if (!q->bias && pv)   /* the oracle conv ran with the bias; take it off again */
        for (int64_t i = 0; i < mge_tensor_numel(&plain); i++)
            pv[i] -= bv[(i / (OH * OW)) % q->O];
    ug_ref_epilogue(&plain, &r, q->res, q->act, 0.1);

    /* the blocked path */
    mge_tensor xb = {0}, rb = {0}, wp = {0};
    block_of(&x, ci, &xb);
    block_of(&r, c, &rb);
    pack(q, w.data, Cb, ci, &wp);
    mge_graph *bg = mge_graph_new();
    int bids[4], nin = 0;
    mge_tensor *bins[4];
    bids[nin] = mge_graph_add_value(bg, "x", MGE_VAL_INPUT, MGE_F32, 5, xb.dims, &err);
    bins[nin++] = &xb;
    bids[nin] = mge_graph_add_value(bg, "w", MGE_VAL_PARAM, MGE_F32, wp.ndim, wp.dims, &err);
    bins[nin++] = &wp;
    if (q->bias) {
        bids[nin] = mge_graph_add_value(bg, "b", MGE_VAL_PARAM, MGE_F32, 1, &q->O, &err);
        bins[nin++] = &b;
    }
    if (q->res) {
        bids[nin] = mge_graph_add_value(bg, "r", MGE_VAL_INPUT, MGE_F32, 5, rb.dims, &err);
        bins[nin++] = &rb;
    }
    mge_attr ba[10] = {A(MGE_KEY_out, q->O), A(MGE_KEY_kernel, q->k), A(MGE_KEY_stride, q->s),
                       A(MGE_KEY_pad, q->p), A(MGE_KEY_dilation, q->d), A(MGE_KEY_groups, G),
                       A(MGE_KEY_bias, q->bias), A(MGE_KEY_residual, q->res), A(MGE_KEY_act, q->act),
                       A_f(MGE_KEY_alpha, 0.1)};
    int bnode = mge_graph_add_node(bg, "convb", MGE_OP_CONV2D_NCHWC, nin, bids, 10, ba, 1, on, &err);
    CHECK_MSG(bnode >= 0, "%s", err.msg);
    if (bnode >= 0) {
        CHECK(bg->values[bg->nodes[bnode].out[0]].ndim == 5 && bg->values[bg->nodes[bnode].out[0]].dims[1] == Ob);
        mge_tensor yref = {0}, y1 = {0}, y2 = {0}, back = {0};
        CHECK_OK(run_node(mge_backend_ref(), NULL, bg, bnode, bins, ybd, 5, &yref, &err), err);
        CHECK_OK(run_node(mge_backend_cpu(), NULL, bg, bnode, bins, ybd, 5, &y1, &err), err);
        CHECK_OK(run_node(mge_backend_cpu(), pool2, bg, bnode, bins, ybd, 5, &y2, &err), err);
        char what[160];
        snprintf(what, sizeof what, "N%lld C%lld %lldx%lld O%lld k%lld s%lld p%lld d%lld dw%d b%d r%d act %s c%d",
                 (long long)q->N, (long long)q->C, (long long)q->H, (long long)q->W, (long long)q->O,
                 (long long)q->k, (long long)q->s, (long long)q->p, (long long)q->d, q->dw, q->bias, q->res,
                 mge_attr_op_name(q->act), q->c);
        check_close(what, &y1, &yref, 1e-5);
        /* the same sums in the same order at any thread count */
        CHECK_MSG(y1.nbytes == y2.nbytes && memcmp(y1.data, y2.data, y1.nbytes) == 0, "%s: 1 vs 2 threads", what);
        /* lanes past O are zero */
        const float *yv = y1.data;
        int pad_ok = 1;
        for (int64_t i = 0; i < mge_tensor_numel(&y1); i++) {
            int64_t lane = i % c, blk = (i / (c * OH * OW)) % Ob;
            if (blk * c + lane >= q->O && yv[i] != 0.0f)
                pad_ok = 0;
        }
        CHECK_MSG(pad_ok, "%s: padded lanes", what);
        unblock(&y1, q->O, &back);
        check_close(what, &back, &plain, 1e-5);
        mge_tensor_free(&yref);
        mge_tensor_free(&y1);
        mge_tensor_free(&y2);
        mge_tensor_free(&back);
    }
    mge_graph_free(pg);
    mge_graph_free(bg);
    mge_tensor *all[] = {&x, &w, &b, &r, &plain, &xb, &rb, &wp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

static void test_kernels(void)
{
    const int R = MGE_OP_RELU, R6 = MGE_OP_RELU6, LR = MGE_OP_LEAKY_RELU, SG = MGE_OP_SIGMOID, TH = MGE_OP_TANH,
              GE = MGE_OP_GELU, SI = MGE_OP_SILU, HW = MGE_OP_HSWISH, HS = MGE_OP_HSIGMOID;
    static ccase cases[64];
    int n = 0;
    /* N, C, H, W, O, k, s, p, d, dw, bias, res, act, c */
    cases[n++] = (ccase){1, 20, 9, 11, 24, 3, 1, 1, 1, 0, 1, 0, 0, 16, 0};
    cases[n - 1].act = R;
    cases[n++] = (ccase){2, 16, 8, 30, 32, 3, 2, 1, 1, 0, 1, 1, 0, 16, 0};
    cases[n - 1].act = R6;
    cases[n++] = (ccase){1, 16, 7, 14, 20, 3, 1, 1, 1, 0, 1, 1, 0, 16, 0};  /* relu6 in registers, lanes past O */
    cases[n - 1].act = R6;
    cases[n++] = (ccase){1, 32, 7, 7, 64, 3, 1, 1, 1, 0, 0, 1, 0, 16, 0};    /* 4 blocks x 7 */
    cases[n - 1].act = R;
    cases[n++] = (ccase){1, 32, 7, 7, 64, 3, 1, 1, 1, 0, 0, 1, -1, 16, 0};
    cases[n++] = (ccase){1, 130, 7, 9, 64, 3, 1, 1, 1, 0, 1, 1, 0, 16, 0}; /* input blocks in chunks */
    cases[n - 1].act = R;
    cases[n++] = (ccase){1, 70, 6, 13, 24, 3, 1, 1, 1, 0, 1, 0, 0, 8, 0};  /* the same at c = 8 */
    cases[n - 1].act = HS;
    cases[n++] = (ccase){1, 24, 14, 14, 40, 1, 1, 0, 1, 0, 1, 0, 0, 16, 0};  /* 1x1, a short group */
    cases[n - 1].act = SG;
    cases[n++] = (ccase){1, 16, 28, 28, 16, 1, 1, 0, 1, 0, 1, 1, 0, 16, 0};  /* one block x 28 */
    cases[n - 1].act = HS;
    cases[n++] = (ccase){1, 40, 9, 9, 24, 1, 2, 0, 1, 0, 0, 0, -1, 16, 0};   /* 1x1 stride 2 */
    cases[n++] = (ccase){1, 12, 13, 13, 20, 7, 2, 3, 1, 0, 1, 0, 0, 16, 0};  /* 7x7 */
    cases[n - 1].act = GE;
    cases[n++] = (ccase){1, 16, 12, 12, 16, 3, 1, 2, 2, 0, 1, 0, 0, 16, 0};  /* dilation */
    cases[n - 1].act = LR;
    cases[n++] = (ccase){1, 16, 10, 10, 16, 3, 3, 1, 1, 0, 1, 1, 0, 16, 0};  /* stride 3: portable tiles */
    cases[n - 1].act = TH;
    cases[n++] = (ccase){1, 40, 10, 12, 40, 3, 1, 1, 1, 1, 1, 1, 0, 16, 0};  /* depthwise */
    cases[n - 1].act = HW;
    cases[n++] = (ccase){1, 32, 7, 7, 32, 3, 1, 1, 1, 1, 1, 1, -1, 16, 0}; /* 4 + 1 interior, edges */
    /* depthwise relu/relu6 in registers (3-tap strips at strides 1 and 2), lanes past O */
    cases[n++] = (ccase){1, 40, 10, 20, 40, 3, 1, 1, 1, 1, 1, 1, 0, 16, 0};
    cases[n - 1].act = R6;
    cases[n++] = (ccase){1, 24, 11, 37, 24, 3, 2, 1, 1, 1, 1, 0, 0, 16, 0};
    cases[n - 1].act = R;
    cases[n++] = (ccase){1, 12, 9, 21, 12, 3, 1, 1, 1, 1, 1, 1, 0, 8, 0};
    cases[n - 1].act = R6;
    cases[n++] = (ccase){1, 16, 9, 16, 16, 5, 1, 4, 2, 1, 1, 0, -1, 16, 0}; /* 5x5 dilated, wide pad */
    cases[n++] = (ccase){2, 16, 9, 19, 16, 3, 2, 1, 1, 1, 0, 0, 0, 16, 0};
    cases[n - 1].act = R6;
    cases[n++] = (ccase){1, 20, 9, 11, 12, 3, 1, 1, 1, 0, 1, 1, 0, 8, 0};    /* AVX2 blocks */
    cases[n - 1].act = SI;
    cases[n++] = (ccase){1, 8, 6, 28, 8, 1, 1, 0, 1, 0, 1, 0, 0, 8, 0};
    cases[n - 1].act = R;
    cases[n++] = (ccase){2, 16, 11, 9, 32, 3, 2, 1, 1, 0, 0, 1, -1, 8, 0};
    cases[n++] = (ccase){1, 12, 7, 9, 12, 5, 1, 2, 1, 1, 1, 0, 0, 8, 0};     /* depthwise 5x5 */
    cases[n - 1].act = SG;
    cases[n++] = (ccase){1, 16, 6, 30, 16, 3, 1, 1, 1, 1, 1, 1, 0, 8, 0};    /* depthwise: 8 + 8 + 8 + 4 interior */
    cases[n - 1].act = R6;
    cases[n++] = (ccase){2, 20, 9, 23, 20, 3, 2, 1, 1, 1, 0, 0, -1, 8, 0};   /* stride 2, lanes past O */
    cases[n++] = (ccase){1, 8, 9, 21, 8, 3, 1, 2, 2, 1, 1, 1, -1, 8, 0};     /* dilated, wide pad */
    cases[n++] = (ccase){1, 3, 15, 30, 32, 3, 2, 1, 1, 0, 1, 0, 0, 16, 1}; /* plain 3-channel stem */
    cases[n - 1].act = R6;
    cases[n++] = (ccase){2, 3, 13, 13, 20, 7, 2, 3, 1, 0, 0, 1, -1, 16, 1};
    cases[n++] = (ccase){1, 3, 9, 17, 8, 3, 1, 1, 1, 0, 1, 0, 0, 8, 1};
    cases[n - 1].act = R;
    cases[n++] = (ccase){1, 7, 6, 6, 9, 3, 1, 1, 1, 0, 1, 1, 0, 5, 0};       /* odd block: portable */
    cases[n - 1].act = R;
    cases[n++] = (ccase){1, 7, 6, 6, 7, 3, 2, 1, 1, 1, 1, 0, 0, 5, 0};
    cases[n - 1].act = GE;
    for (int i = 0; i < n; i++)
        run_case(&cases[i]);
}

/* relu and relu6 in the vector tiles and depthwise strips on non-finite
 * sums: +inf gives 6 under relu6 (it gave NaN: inf * 0 + 6 built the 6),
 * -inf gives 0, NaN passes; the same values as ref in every lane. The
 * bias carries them, so every output of a channel sees one. */
static void test_act_nonfinite(void)
{
    mge_error err = {0};
    const int acts[2] = {MGE_OP_RELU, MGE_OP_RELU6};
    for (int dw = 0; dw < 2; dw++)
        for (int a = 0; a < 2; a++) {
            const int64_t C = 32, O = 32, H = 5, W = 14, k = dw ? 3 : 1, c = 16;
            int64_t xd[5] = {1, C / c, H, W, c}, bd = O, yd[5] = {1, O / c, H, W, c};
            int64_t wd6[6] = {O / c, C / c, 1, 1, c, c}, wd4[4] = {O / c, k, k, c};
            mge_tensor x = {0}, w = {0}, b = {0}, yr = {0}, y1 = {0}, y2 = {0};
            CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 5, xd, &err), err);
            CHECK_OK(mge_tensor_alloc(&w, MGE_F32, dw ? 4 : 6, dw ? wd4 : wd6, &err), err);
            CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, &bd, &err), err);
            ug_uniform(&x, &rng, -1, 1);
            ug_uniform(&w, &rng, -0.5f, 0.5f);
            ug_uniform(&b, &rng, -1, 1);
            float *bv = b.data;
            for (int64_t o = 0; o < O; o += 3) {
                bv[o] = INFINITY;
                if (o + 1 < O)
                    bv[o + 1] = -INFINITY;
                if (o + 2 < O && o % 2)
                    bv[o + 2] = NAN;
            }
            mge_graph *g = mge_graph_new();
            int ids[3] = {mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, xd, &err),
                          mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, w.ndim, w.dims, &err),
                          mge_graph_add_value(g, "b", MGE_VAL_PARAM, MGE_F32, 1, &bd, &err)};
            mge_attr at[6] = {A(MGE_KEY_out, O), A(MGE_KEY_kernel, k), A(MGE_KEY_pad, k / 2),
                              A(MGE_KEY_groups, dw ? O : 1), A(MGE_KEY_act, acts[a]), A(MGE_KEY_bias, 1)};
            const char *on[1] = {"y"};
            int node = mge_graph_add_node(g, "conv", MGE_OP_CONV2D_NCHWC, 3, ids, 6, at, 1, on, &err);
            CHECK_MSG(node >= 0, "%s", err.msg);
            mge_tensor *in[3] = {&x, &w, &b};
            CHECK_OK(run_node(mge_backend_ref(), NULL, g, node, in, yd, 5, &yr, &err), err);
            CHECK_OK(run_node(mge_backend_cpu(), NULL, g, node, in, yd, 5, &y1, &err), err);
            CHECK_OK(run_node(mge_backend_cpu(), pool2, g, node, in, yd, 5, &y2, &err), err);
            const float *r = yr.data, *p1 = y1.data, *p2 = y2.data;
            int64_t bad = -1, n6 = 0;
            for (int64_t i = 0; r && p1 && p2 && i < mge_tensor_numel(&yr); i++) {
                /* finite: as close as test_kernels asks; else the same value */
                double tol = isfinite(r[i]) ? 1e-5 * (1.0 + fabs(r[i])) : 0.0;
                int same = isnan(r[i])      ? isnan(p1[i]) && isnan(p2[i])
                           : !isfinite(r[i]) ? p1[i] == r[i] && p2[i] == r[i]
                                             : fabs((double)p1[i] - r[i]) <= tol && fabs((double)p2[i] - r[i]) <= tol;
                if (!same && bad < 0)
                    bad = i;
                n6 += r[i] == 6.0f;
            }
            CHECK_MSG(bad < 0, "%s %s: element %lld: ref %g, cpu %g (1 thread) %g (2)", dw ? "depthwise" : "dense",
                      mge_attr_op_name(acts[a]), (long long)bad, bad >= 0 ? r[bad] : 0.0,
                      bad >= 0 ? p1[bad] : 0.0, bad >= 0 ? p2[bad] : 0.0);
            CHECK(a == 0 || n6 > 0);   /* relu6 did meet +inf */
            mge_tensor *all[] = {&x, &w, &b, &yr, &y1, &y2};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                mge_tensor_free(all[i]);
            mge_graph_free(g);
        }
}

/* maxpool2d_nchwc: cpu and ref agree bit for bit, and match maxpool2d on
 * the plain tensor; a NaN wins its windows. */
static void pool_case(int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s, int64_t p, int64_t c)
{
    mge_error err = {0};
    int64_t xd[4] = {N, C, H, W};
    mge_tensor x = {0}, xb = {0}, plain = {0}, yr = {0}, y1 = {0}, y2 = {0}, back = {0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 4, xd, &err), err);
    ug_uniform(&x, &rng, -2, 1);
    ((float *)x.data)[mge_tensor_numel(&x) / 2] = NAN;
    block_of(&x, c, &xb);
    mge_graph *g = mge_graph_new();
    int xv = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    int bv = mge_graph_add_value(g, "xb", MGE_VAL_INPUT, MGE_F32, 5, xb.dims, &err);
    mge_attr a[3] = {A(MGE_KEY_kernel, k), A(MGE_KEY_stride, s), A(MGE_KEY_pad, p)};
    const char *o1[1] = {"y"}, *o2[1] = {"yb"};
    int pn = mge_graph_add_node(g, "pool", MGE_OP_MAXPOOL2D, 1, &xv, 3, a, 1, o1, &err);
    int bn = mge_graph_add_node(g, "poolb", MGE_OP_MAXPOOL2D_NCHWC, 1, &bv, 3, a, 1, o2, &err);
    CHECK_MSG(pn >= 0 && bn >= 0, "%s", err.msg);
    if (pn >= 0 && bn >= 0) {
        const mge_value *yv = &g->values[g->nodes[pn].out[0]], *ybv = &g->values[g->nodes[bn].out[0]];
        int64_t yd[4] = {N, C, yv->dims[2], yv->dims[3]};
        int64_t ybd[5] = {N, xb.dims[1], ybv->dims[2], ybv->dims[3], c};
        CHECK(ybv->dims[2] == yv->dims[2] && ybv->dims[3] == yv->dims[3]);
        mge_tensor *in1[1] = {&x}, *in2[1] = {&xb};
        CHECK_OK(run_node(mge_backend_ref(), NULL, g, pn, in1, yd, 4, &plain, &err), err);
        CHECK_OK(run_node(mge_backend_ref(), NULL, g, bn, in2, ybd, 5, &yr, &err), err);
        CHECK_OK(run_node(mge_backend_cpu(), NULL, g, bn, in2, ybd, 5, &y1, &err), err);
        CHECK_OK(run_node(mge_backend_cpu(), pool2, g, bn, in2, ybd, 5, &y2, &err), err);
        /* memcmp: NaN bits compare equal where == would not */
        CHECK(yr.nbytes == y1.nbytes && memcmp(yr.data, y1.data, yr.nbytes) == 0);
        CHECK(y1.nbytes == y2.nbytes && memcmp(y1.data, y2.data, y1.nbytes) == 0);
        unblock(&y1, C, &back);
        CHECK(back.nbytes == plain.nbytes && memcmp(back.data, plain.data, back.nbytes) == 0);
        int nans = 0;
        for (int64_t i = 0; i < mge_tensor_numel(&back); i++)
            nans += isnan(((float *)back.data)[i]);
        CHECK(nans > 0);
    }
    mge_graph_free(g);
    mge_tensor *all[] = {&x, &xb, &plain, &yr, &y1, &y2, &back};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

static void test_maxpool(void)
{
    pool_case(1, 20, 11, 13, 3, 2, 1, 16);
    pool_case(2, 12, 8, 8, 2, 2, 0, 8);
    pool_case(1, 7, 9, 6, 3, 1, 1, 5);
}

/* Shapes the blocked ops refuse. */
static void test_infer_errors(void)
{
    mge_error err = {0};
    mge_graph *g = mge_graph_new();
    int64_t xd[5] = {1, 2, 8, 8, 16}, wbad[6] = {2, 3, 3, 3, 16, 16}, xp[4] = {1, 20, 8, 8};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, xd, &err);
    int w = mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 6, wbad, &err);
    int p = mge_graph_add_value(g, "p", MGE_VAL_INPUT, MGE_F32, 4, xp, &err);
    mge_attr a[3] = {A(MGE_KEY_out, 32), A(MGE_KEY_kernel, 3), A(MGE_KEY_bias, 0)};
    int in[2] = {x, w};
    const char *o1[1] = {"y1"}, *o2[1] = {"y2"}, *o3[1] = {"y3"}, *o4[1] = {"y4"};
    CHECK(mge_graph_add_node(g, "c", MGE_OP_CONV2D_NCHWC, 2, in, 3, a, 1, o1, &err) < 0);
    CHECK(strstr(err.msg, "weight") != NULL);
    mge_attr ch = A(MGE_KEY_channels, 40); /* 40 channels need 3 blocks of 16 */
    CHECK(mge_graph_add_node(g, "f", MGE_OP_FROM_NCHWC, 1, &x, 1, &ch, 1, o2, &err) < 0);
    mge_attr bl = A(MGE_KEY_block, 16);
    int t = mge_graph_add_node(g, "t", MGE_OP_TO_NCHWC, 1, &p, 1, &bl, 1, o3, &err);
    CHECK(t >= 0 && g->values[g->nodes[t].out[0]].dims[1] == 2 && g->values[g->nodes[t].out[0]].dims[4] == 16);
    mge_attr ch2 = A(MGE_KEY_channels, 20);
    int f = mge_graph_add_node(g, "f2", MGE_OP_FROM_NCHWC, 1, &x, 1, &ch2, 1, o4, &err);
    CHECK(f >= 0 && g->values[g->nodes[f].out[0]].ndim == 4 && g->values[g->nodes[f].out[0]].dims[1] == 20);
    mge_graph_free(g);
}

/* The ref kernels check the tensors they are given themselves (kernels do
 * not call the shape inference): a weight or an output of another shape
 * than the node's is refused by name. */
static void test_ref_checks(void)
{
    mge_error err = {0};
    mge_graph *g = mge_graph_new();
    int64_t xd[5] = {1, 1, 6, 6, 8}, wd[6] = {1, 1, 3, 3, 8, 8}, wbd[6] = {1, 1, 2, 3, 8, 8};
    int in[2] = {mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, xd, &err),
                 mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 6, wd, &err)};
    mge_attr a[3] = {A(MGE_KEY_out, 8), A(MGE_KEY_kernel, 3), A(MGE_KEY_bias, 0)}, pa = A(MGE_KEY_kernel, 2);
    const char *o1[1] = {"y"}, *o2[1] = {"yp"};
    int cn = mge_graph_add_node(g, "c", MGE_OP_CONV2D_NCHWC, 2, in, 3, a, 1, o1, &err);
    int pn = mge_graph_add_node(g, "p", MGE_OP_MAXPOOL2D_NCHWC, 1, in, 1, &pa, 1, o2, &err);
    CHECK_MSG(cn >= 0 && pn >= 0, "%s", err.msg);
    mge_tensor x = {0}, w = {0}, wb = {0}, y = {0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 5, xd, &err), err);
    CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 6, wd, &err), err);
    CHECK_OK(mge_tensor_alloc(&wb, MGE_F32, 6, wbd, &err), err);
    ug_uniform(&x, &rng, -1, 1);
    ug_uniform(&w, &rng, -1, 1);
    ug_uniform(&wb, &rng, -1, 1);
    const mge_backend *ref = mge_backend_ref();
    int64_t yc[5] = {1, 1, 4, 4, 8}, ybad[5] = {1, 1, 5, 5, 8}, yp[5] = {1, 1, 3, 3, 8};
    struct {
        int node, bad_w, nd;
        const int64_t *yd;
        const char *want;   /* NULL: runs */
    } cases[] = {
        {cn, 0, 5, yc, NULL},
        {cn, 1, 5, yc, "conv2d_nchwc: weight is f32[1,1,2,3,8,8]"},
        {cn, 0, 5, ybad, "conv2d_nchwc: output is f32[1,1,5,5,8]: expected f32[1,1,4,4,8]"},
        {pn, 0, 5, yp, NULL},
        {pn, 0, 5, yc, "maxpool2d_nchwc: output is f32[1,1,4,4,8]: expected f32[1,1,3,3,8]"},
    };
    for (size_t i = 0; cn >= 0 && pn >= 0 && i < sizeof cases / sizeof cases[0]; i++) {
        mge_tensor *ins[2] = {&x, cases[i].bad_w ? &wb : &w};
        mge_status s = run_node(ref, NULL, g, cases[i].node, ins, cases[i].yd, cases[i].nd, &y, &err);
        if (!cases[i].want)
            CHECK_OK(s, err);
        else
            CHECK_MSG(s == MGE_ERR_SHAPE && strncmp(err.msg, cases[i].want, strlen(cases[i].want)) == 0,
                      "case %zu: %s", i, err.msg);
        mge_tensor_free(&y);
    }
    mge_graph_free(g);
    mge_tensor *all[] = {&x, &w, &wb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- the pass */

/* The block the layout pass picks here (16 with AVX-512, 8 with AVX2 and
 * FMA, else none). */
static int block_here(void)
{
    int isa = mge_cpu_isa();
    return isa >= MGE_ISA_AVX512 ? 16 : isa >= MGE_ISA_AVX2 ? 8 : 0;
}

/* At c = 8 only regions with a depthwise conv convert. */
static int dense_blocked_here(void)
{
    return block_here() == 16;
}

/* src parsed, its parameters initialised. */
static mge_graph *parse(const char *src)
{
    mge_graph *g = ug_parse(src);
    mge_error err = {0};
    if (g)
        CHECK_OK(mge_graph_init_params(g, 7, &err), err);
    return g;
}

/* Runs g at batch with inputs normal(0, 1) seeded from their names. */
static void run_graph(const mge_graph *g, int64_t batch, int threads, ug_outs *res)
{
    ug_fill normal = {1, 0, 0, 0};
    ug_run(g, NULL, threads, batch, normal, res);
}

/* Runs the layout pass on g and checks the outputs (names, shapes, numbers
 * at batch 3, and 1 vs 2 threads bit for bit); returns *changed. */
static int apply(mge_graph **g)
{
    mge_error err = {0};
    ug_outs before = {0}, after = {0}, after2 = {0};
    run_graph(*g, 3, 1, &before);
    int nout = (*g)->noutputs;
    char names[4][64];
    for (int i = 0; i < nout && i < 4; i++)
        snprintf(names[i], sizeof names[i], "%s", (*g)->values[(*g)->outputs[i]].name);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(g, "layout", &changed, &err), err);
    CHECK_OK(mge_graph_validate(*g, &err), err);
    CHECK((*g)->noutputs == nout);
    for (int i = 0; i < nout && i < 4; i++)
        CHECK(strcmp((*g)->values[(*g)->outputs[i]].name, names[i]) == 0);
    run_graph(*g, 3, 1, &after);
    run_graph(*g, 3, 2, &after2);
    CHECK(before.n == nout);
    ug_check_close(&before, &after, 1e-5);
    ug_check_close(&after, &after2, 0); /* bit for bit */
    ug_outs_free(&before);
    ug_outs_free(&after);
    ug_outs_free(&after2);
    return changed;
}

static const char *small_net = "input x : f32[N,12,10,10]\n"
                               "c1 = conv2d(x, out=24, kernel=3, pad=1)\n"
                               "r1 = relu(c1)\n"
                               "c2 = conv2d(r1, out=24, kernel=3, stride=2, pad=1)\n"
                               "dw = conv2d(c2, out=24, kernel=3, pad=1, groups=24)\n"
                               "a = add(dw, c2)\n"
                               "r2 = relu6(a)\n"
                               "c3 = conv2d(r2, out=24, kernel=1)\n"
                               "p = global_avgpool(c3)\n"
                               "output p, r1\n";

static void test_pass_small(void)
{
    mge_graph *g = parse(small_net);
    if (!g)
        return;
    int changed = apply(&g);
    if (!block_here()) {
        CHECK(changed == 0);
        mge_graph_free(g);
        return;
    }
    CHECK(changed == 1);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == 0 && ug_count_op(g, MGE_OP_CONV2D_NCHWC) == 4);
    /* x goes in once; r1 (an output) and c3 (read by the pool) come out */
    CHECK(ug_count_op(g, MGE_OP_TO_NCHWC) == 1 && ug_count_op(g, MGE_OP_FROM_NCHWC) == 2);
    CHECK(mge_graph_find(g, "c1.weight") < 0 && mge_graph_find(g, "c1.weight_nchwc") >= 0);
    CHECK(mge_graph_find(g, "dw.weight_nchwc") >= 0 && g->values[mge_graph_find(g, "dw.weight_nchwc")].ndim == 4);
    /* relu after c1, and add + relu6 after dw, run in the convs' epilogues */
    CHECK(ug_count_op(g, MGE_OP_RELU) == 0 && ug_count_op(g, MGE_OP_ADD) == 0 && ug_count_op(g, MGE_OP_RELU6) == 0);
    int r2b = mge_graph_find(g, "r2.nchwc");
    CHECK(r2b >= 0 && g->values[r2b].kind == MGE_VAL_NODE);
    if (r2b >= 0 && g->values[r2b].kind == MGE_VAL_NODE) {
        const mge_node *dn = &g->nodes[g->values[r2b].producer];
        CHECK(dn->op == MGE_OP_CONV2D_NCHWC && mge_node_int(dn, MGE_KEY_groups, 1) == 24);
        CHECK(mge_node_int(dn, MGE_KEY_residual, 0) == 1 && mge_node_int(dn, MGE_KEY_act, -1) == MGE_OP_RELU6);
    }
    int r1 = mge_graph_find(g, "r1");
    CHECK(r1 >= 0 && g->values[r1].ndim == 4 && g->values[r1].dims[1] == 24);
    /* a second run finds nothing left to convert */
    mge_error err = {0};
    int again = -1;
    CHECK_OK(mge_passes_run_list(&g, "layout", &again, &err), err);
    CHECK(again == 0);
    mge_graph_free(g);
}

/* fused_conv2d with a residual and an activation converts with them. */
static void test_pass_fused(void)
{
    const char *src = "input x : f32[N,16,8,8]\n"
                      "param w1 : f32[16,16,3,3] init=uniform(0.2)\n"
                      "param b1 : f32[16] init=uniform(0.5)\n"
                      "param w2 : f32[16,16,3,3] init=uniform(0.2)\n"
                      "param b2 : f32[16] init=uniform(0.5)\n"
                      "f1 = fused_conv2d(x, w1, b1, out=16, kernel=3, pad=1, act=relu)\n"
                      "f2 = fused_conv2d(f1, w2, b2, x, out=16, kernel=3, pad=1, residual=true, act=silu)\n"
                      "output f2\n";
    mge_graph *g = parse(src);
    if (!g)
        return;
    int changed = apply(&g);
    if (!dense_blocked_here())
        CHECK(changed == 0); /* no depthwise conv: stays plain at c = 8 */
    if (dense_blocked_here()) {
        CHECK(changed == 1 && ug_count_op(g, MGE_OP_CONV2D_NCHWC) == 2 && ug_count_op(g, MGE_OP_FUSED_CONV2D) == 0);
        /* x is blocked once, for the conv and the residual */
        CHECK(ug_count_op(g, MGE_OP_TO_NCHWC) == 1 && ug_count_op(g, MGE_OP_FROM_NCHWC) == 1);
        int i = mge_graph_find(g, "f2.nchwc");
        CHECK(i >= 0 && mge_node_int(&g->nodes[g->values[i].producer], MGE_KEY_act, -1) == MGE_OP_SILU);
    }
    mge_graph_free(g);
}

/* A resnet-like stem: conv on 3 plain channels, relu, maxpool, a block
 * with a residual: one region, x read as blocks of one channel. */
static void test_pass_stem(void)
{
    const char *src = "input x : f32[N,3,20,20]\n"
                      "c1 = conv2d(x, out=16, kernel=7, stride=2, pad=3)\n"
                      "r1 = relu(c1)\n"
                      "mp = maxpool2d(r1, kernel=3, stride=2, pad=1)\n"
                      "c2 = conv2d(mp, out=16, kernel=3, pad=1)\n"
                      "a = add(c2, mp)\n"
                      "r2 = relu(a)\n"
                      "p = global_avgpool(r2)\n"
                      "output p\n";
    mge_graph *g = parse(src);
    if (!g)
        return;
    int changed = apply(&g);
    if (!dense_blocked_here())
        CHECK(changed == 0);
    if (dense_blocked_here()) {
        CHECK(changed == 1 && ug_count_op(g, MGE_OP_CONV2D_NCHWC) == 2 && ug_count_op(g, MGE_OP_MAXPOOL2D_NCHWC) == 1);
        CHECK(ug_count_op(g, MGE_OP_TO_NCHWC) == 0 && ug_count_op(g, MGE_OP_RESHAPE) == 1 &&
              ug_count_op(g, MGE_OP_FROM_NCHWC) == 1);
        CHECK(ug_count_op(g, MGE_OP_MAXPOOL2D) == 0 && ug_count_op(g, MGE_OP_RELU) == 0 &&
              ug_count_op(g, MGE_OP_ADD) == 0);
        int w = mge_graph_find(g, "c1.weight_nchwc");
        CHECK(w >= 0 && g->values[w].ndim == 6 && g->values[w].dims[4] == 1);
    }
    mge_graph_free(g);
}

/* The sample nets at 64x64 (global pooling makes them indifferent to
 * the size) after -O2, with batchnorm statistics that keep activations
 * alive through the depth (with the default init mobilenet's features
 * vanish and --verify would compare two biases); the last features are an
 * output too, so the comparison sees the convs' numbers. */
static void check_net(const char *path, const char *features, int min_convs, int has_dw)
{
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "%s", path);
    if (!f)
        return;
    static char src[1 << 16];
    size_t n = fread(src, 1, sizeof src - 1, f);
    fclose(f);
    src[n] = 0;
    char *p = strstr(src, "224,224]");
    CHECK(p != NULL && n < sizeof src - 1);
    if (p)
        memcpy(p, " 64, 64]", 8);
    mge_graph *g = NULL;
    mge_error err = {0};
    CHECK_OK(mge_text_parse(src, n, "samples/nets", &g, &err), err);
    if (!g)
        return;
    CHECK_OK(mge_graph_init_params(g, 3, &err), err);
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *bn = &g->nodes[i];
        if (bn->op != MGE_OP_BATCHNORM)
            continue;
        static const float lo[4] = {1.0f, -0.1f, -0.1f, 0.3f}, hi[4] = {2.0f, 0.3f, 0.1f, 0.6f};
        for (int k = 1; k <= 4; k++)
            ug_uniform(g->values[bn->in[k]].data, &rng, lo[k - 1], hi[k - 1]);
    }
    int fv = mge_graph_find(g, features);
    CHECK(fv >= 0);
    if (fv >= 0)
        CHECK_OK(mge_graph_add_output(g, fv, &err), err);
    /* -O2's folds and fuse-activation, so that layout comes next */
    CHECK_OK(mge_passes_run_list(&g, "strip-training,fold-bn,fold-scale,cse,fold-constants,dce,fuse-activation",
                                 NULL, &err),
             err);
    ug_outs o = {0};
    run_graph(g, 2, 1, &o);
    CHECK(o.n == 2);
    /* the features are alive: the test would compare nothing otherwise */
    double feat = 0;
    for (int64_t i = 0; o.n == 2 && i < mge_tensor_numel(&o.t[1]); i++)
        feat = fmax(feat, fabs(((float *)o.t[1].data)[i]));
    CHECK_MSG(feat > 1e-2, "%s: features max %g", path, feat);
    ug_outs_free(&o);
    int changed = apply(&g);
    int conv = has_dw ? block_here() != 0 : dense_blocked_here();
    if (!conv)
        CHECK(changed == 0);
    if (conv) {
        /* at c = 16 resnet18's 3x3 stride-1 convs on planes of 14 and more
         * run as Winograd: at 64x64, layer1's four (16x16) */
        int wino = ug_count_op(g, MGE_OP_CONV2D_WINOGRAD_NCHWC);
        CHECK(changed == 1 && ug_count_op(g, MGE_OP_CONV2D_NCHWC) + wino >= min_convs &&
              ug_count_op(g, MGE_OP_CONV2D) == 0);
        CHECK(wino == (block_here() == 16 && !has_dw ? 4 : 0));
        CHECK(ug_count_op(g, MGE_OP_TO_NCHWC) == 0 && ug_count_op(g, MGE_OP_FROM_NCHWC) == 1);
    }
    mge_graph_free(g);
}

static void test_pass_nets(void)
{
    check_net("samples/nets/resnet18.mgt", "layer4.1.relu2", 20, 0);
    check_net("samples/nets/mobilenet_v2.mgt", "features.18.2", 52, 1);
}

/* What stays plain: a graph with a loss, a lone conv, a 3-channel stem. */
static void test_pass_noop(void)
{
    const char *srcs[] = {
        "input x : f32[N,16,8,8]\ninput t : f32[N,16,8,8]\nc1 = conv2d(x, out=16, kernel=3, pad=1)\n"
        "c2 = conv2d(c1, out=16, kernel=3, pad=1)\nl = mse(c2, t)\noutput c2\nminimize l\n",
        "input x : f32[N,16,8,8]\nc1 = conv2d(x, out=16, kernel=3, pad=1)\nr = relu(c1)\n"
        "p = maxpool2d(r, kernel=2)\nc2 = conv2d(p, out=16, kernel=1, stride=3)\noutput c2\n",
        "input x : f32[N,3,8,8]\nc1 = conv2d(x, out=3, kernel=3, pad=1)\nc2 = conv2d(c1, out=3, kernel=3)\noutput c2\n",
    };
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        mge_graph *g = parse(srcs[k]);
        if (!g)
            continue;
        ug_check_noop(g, "layout", srcs[k]);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261201);
    pool2 = mge_pool_create(2);
    RUN(test_kernels);
    RUN(test_act_nonfinite);
    RUN(test_maxpool);
    RUN(test_infer_errors);
    RUN(test_ref_checks);
    RUN(test_pass_small);
    RUN(test_pass_fused);
    RUN(test_pass_stem);
    RUN(test_pass_nets);
    RUN(test_pass_noop);
    mge_pool_free(pool2);
    return unit_rerun_baseline(argv, "test_layout", unit_done());
}
