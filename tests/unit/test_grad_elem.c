/* test_grad_elem.c — gradient rules of the unary, binary and loss families
 * (lib/grad_unary.c, grad_binary.c, grad_loss.c) against central
 * differences, on random shapes and broadcasts; their gradient ops' fast cpu
 * kernels against the ref kernels, with bit-identical results at 1 and 3
 * threads; label validation of cross_entropy and its gradient. */
#include "internal.h"
#include "unit.h"
#include "unit_grad.h"
#include "unit_graph.h"

#include <sys/wait.h>
#include <unistd.h>

static mge_rng rng;

static int64_t rnd(int64_t lo, int64_t hi)   /* inclusive */
{
    return lo + (int64_t)(mge_rng_next(&rng) % (uint64_t)(hi - lo + 1));
}

static float urand(float lo, float hi)
{
    return lo + (hi - lo) * mge_rng_uniform(&rng);
}

/* uniform in [lo, hi], at least `margin` away from each kink (the FD step is 1e-3) */
static float away(float lo, float hi, const float *kinks, int nk)
{
    for (;;) {
        float v = urand(lo, hi);
        int ok = 1;
        for (int k = 0; k < nk; k++)
            ok &= fabsf(v - kinks[k]) >= 0.02f;
        if (ok)
            return v;
    }
}

static mge_tensor *new_tensor(mge_dtype dt, int nd, const int64_t *dims)
{
    mge_tensor *t = calloc(1, sizeof *t);
    CHECK_OK(mge_tensor_alloc(t, dt, nd, dims, &gc_err), gc_err);
    return t;
}

static void free_tensor(mge_tensor *t)
{
    if (t) {
        mge_tensor_free(t);
        free(t);
    }
}

static mge_tensor *ranged(int nd, const int64_t *dims, float lo, float hi, const float *kinks, int nk)
{
    mge_tensor *t = new_tensor(MGE_F32, nd, dims);
    for (int64_t i = 0; i < mge_tensor_numel(t); i++)
        ((float *)t->data)[i] = away(lo, hi, kinks, nk);
    return t;
}

static int rand_shape(int64_t *dims, int maxrank, int64_t maxdim)
{
    int nd = (int)rnd(1, maxrank);
    for (int i = 0; i < nd; i++)
        dims[i] = rnd(1, maxdim);
    return nd;
}

static int input(mge_graph *g, const char *name, mge_dtype dt, int nd, const int64_t *dims)
{
    int v = mge_graph_add_value(g, name, MGE_VAL_INPUT, dt, nd, dims, &gc_err);
    CHECK_MSG(v >= 0, "%s", gc_err.msg);
    return v;
}

/* A param holding t (the graph takes it over). Float operands are params
 * rather than inputs: gc_check hands every graph input to executors that
 * take only the inputs their outputs need (add's db = dy needs no b). */
static int param(mge_graph *g, const char *name, mge_tensor *t)
{
    int v = mge_graph_add_value(g, name, MGE_VAL_PARAM, t->dtype, t->ndim, t->dims, &gc_err);
    CHECK_MSG(v >= 0, "%s", gc_err.msg);
    if (v >= 0)
        g->values[v].data = t;
    return v;
}

/* ---------------------------------------------------------------- unary FD */

typedef struct uspec {
    int op;
    float lo, hi;
    float kinks[2];
    int nk;
    double alpha;   /* leaky_relu; 0 = default */
} uspec;

static void test_unary_fd(void)
{
    static const uspec specs[] = {
        {MGE_OP_RELU, -2, 2, {0}, 1, 0},        {MGE_OP_RELU6, -2, 8, {0, 6}, 2, 0},
        {MGE_OP_LEAKY_RELU, -2, 2, {0}, 1, 0.2}, {MGE_OP_LEAKY_RELU, -2, 2, {0}, 1, 0},
        {MGE_OP_SIGMOID, -3, 3, {0}, 0, 0},     {MGE_OP_TANH, -2, 2, {0}, 0, 0},
        {MGE_OP_GELU, -3, 3, {0}, 0, 0},        {MGE_OP_SILU, -3, 3, {0}, 0, 0},
        {MGE_OP_HSWISH, -5, 5, {-3, 3}, 2, 0},  {MGE_OP_HSIGMOID, -5, 5, {-3, 3}, 2, 0},
        {MGE_OP_EXP, -1, 1, {0}, 0, 0},         {MGE_OP_LOG, 0.2f, 2, {0}, 0, 0},
        {MGE_OP_SQRT, 0.2f, 2, {0}, 0, 0},      {MGE_OP_NEG, -1, 1, {0}, 0, 0},
        {MGE_OP_ABS, -2, 2, {0}, 1, 0},
    };
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (int rep = 0; rep < 3; rep++) {
            const uspec *u = &specs[s];
            int64_t dims[MGE_MAX_DIMS];
            int nd = rand_shape(dims, 4, 5);
            mge_graph *g = mge_graph_new();
            int x = param(g, "x", ranged(nd, dims, u->lo, u->hi, u->kinks, u->nk));
            mge_attr at = A_f(MGE_KEY_alpha, u->alpha);
            int y = node(g, "y", u->op, 1, &x, u->alpha != 0, &at);
            double w = gc_check(g, y, NULL, 1e-2, 0);
            CHECK_MSG(w <= 1e-2, "%s rep %d: worst %g", mge_op_info(u->op)->name, rep, w);
            mge_graph_free(g);
        }
}

/* Relu's rule reads the forward output, not the input. */
static void test_relu_uses_y(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {2, 3};
    int x = input(g, "x", MGE_F32, 2, d);
    int y = un(g, "y", MGE_OP_RELU, x);
    int R = mge_graph_add_value(g, "R", MGE_VAL_INPUT, MGE_F32, 2, d, &gc_err);
    int gx = -1;
    CHECK_OK(mge_grad_build_from(g, y, R, 1, &x, &gx, &gc_err), gc_err);
    CHECK(gx >= 0);
    if (gx >= 0) {
        const mge_node *n = &g->nodes[g->values[gx].producer];
        CHECK(n->op == MGE_OP_RELU_GRAD);
        CHECK(n->in[0] == R && n->in[1] == y);
    }
    mge_graph_free(g);
}

static void test_dropout_fd(void)
{
    static const double ps[] = {0.3, 0.5, 0};
    for (int k = 0; k < 3; k++)
        for (int training = 0; training < 2; training++) {
            mge_graph *g = mge_graph_new();
            int64_t d[2] = {rnd(2, 6), rnd(20, 60)};
            /* x away from 0: a kept zero would read as dropped (documented) */
            float kink = 0;
            int x = param(g, "x", ranged(2, d, -1, 1, &kink, 1));
            mge_attr at = A_f(MGE_KEY_p, ps[k]);
            int y = node(g, "y", MGE_OP_DROPOUT, 1, &x, 1, &at);
            double w = gc_check(g, y, NULL, 1e-2, training);
            CHECK_MSG(w <= 1e-2, "dropout p=%g training=%d: worst %g", ps[k], training, w);
            mge_graph_free(g);
        }
}

/* cast: the gradient goes back in the input's dtype; integer inputs get none. */
static void test_cast(void)
{
    /* an integer input through cast: only the param gets a gradient */
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {3, 4};
    int x = input(g, "x", MGE_I32, 2, d);
    int c = node(g, "c", MGE_OP_CAST, 1, &x, 1, (mge_attr[]){A(MGE_KEY_dtype, MGE_F32)});
    int w = mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 2, d, &gc_err);
    int y = bin(g, "y", MGE_OP_MUL, c, w);
    mge_tensor *xt = new_tensor(MGE_I32, 2, d);
    for (int i = 0; i < 12; i++)
        ((int32_t *)xt->data)[i] = i - 5;
    const mge_tensor *given[1] = {xt};
    CHECK(gc_check(g, y, given, 1e-2, 0) <= 1e-2);
    free_tensor(xt);
    mge_graph_free(g);

    /* f32 -> f16 -> f32: the gradient is cast back, f16 in the middle */
    g = mge_graph_new();
    x = input(g, "x", MGE_F32, 2, d);
    int h = node(g, "h", MGE_OP_CAST, 1, &x, 1, (mge_attr[]){A(MGE_KEY_dtype, MGE_F16)});
    y = node(g, "y", MGE_OP_CAST, 1, &h, 1, (mge_attr[]){A(MGE_KEY_dtype, MGE_F32)});
    int R = input(g, "R", MGE_F32, 2, d);
    int gx = -1;
    CHECK_OK(mge_grad_build_from(g, y, R, 1, &x, &gx, &gc_err), gc_err);
    CHECK(gx >= 0 && g->values[gx].dtype == MGE_F32);
    mge_exec *e = NULL;
    mge_exec_opts o = {.backend = "ref", .noutputs = 1, .outputs = &gx};
    CHECK_OK(mge_exec_create(g, &o, &e, &gc_err), gc_err);
    mge_tensor *xs = ranged(2, d, -1, 1, NULL, 0), *rs = ranged(2, d, -1, 1, NULL, 0);
    const mge_tensor *ins[2] = {rs, xs};   /* dy alone is needed */
    if (e && mge_exec_ninputs(e) == 1 && mge_exec_input(e, 0) == R) {
        CHECK_OK(mge_exec_run(e, ins, &gc_err), gc_err);
        const mge_tensor *r = mge_exec_result(e, 0);
        for (int i = 0; r && i < 12; i++) {
            float want = mge_f16_to_f32(mge_f32_to_f16(((float *)rs->data)[i]));
            CHECK(((float *)r->data)[i] == want);
        }
    } else {
        CHECK(0);
    }
    mge_exec_free(e);
    free_tensor(xs);
    free_tensor(rs);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- binary FD */

typedef struct bshape {
    int na, nb;
    int64_t a[4], b[4];
} bshape;

/* values for op: b away from 0 for div, a > 0 for pow; a and b on grids
 * 0.05 apart for maximum/minimum, so no pair is within the FD step of a tie */
static mge_tensor *operand(int op, int which, int nd, const int64_t *dims)
{
    mge_tensor *t = new_tensor(MGE_F32, nd, dims);
    float *p = t->data;
    for (int64_t i = 0; i < mge_tensor_numel(t); i++) {
        float v = urand(-1, 1);
        if (op == MGE_OP_DIV && which == 1)
            v = (v < 0 ? -1 : 1) * urand(0.5f, 1.5f);
        if (op == MGE_OP_POW)
            v = which == 0 ? urand(0.5f, 1.5f) : urand(-1.5f, 1.5f);
        if (op == MGE_OP_MAXIMUM || op == MGE_OP_MINIMUM)
            v = ((float)rnd(-10, 10) + (which ? 0.5f : 0.0f)) * 0.1f;
        p[i] = v;
    }
    return t;
}

static void test_binary_fd(void)
{
    static const int ops[] = {MGE_OP_ADD, MGE_OP_SUB,     MGE_OP_MUL,    MGE_OP_DIV,
                              MGE_OP_POW, MGE_OP_MAXIMUM, MGE_OP_MINIMUM};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        int64_t N = rnd(1, 3), C = rnd(2, 4), H = rnd(1, 3), W = rnd(2, 4);
        bshape sh[] = {
            {2, 2, {C, W}, {C, W}},                       /* same shape */
            {0, 3, {0}, {N, C, W}},                       /* scalar a */
            {3, 0, {N, C, W}, {0}},                       /* scalar b */
            {3, 4, {C, 1, 1}, {N, C, H, W}},              /* per channel */
            {4, 1, {N, C, H, W}, {W}},                    /* rank mismatch */
            {1, 4, {W}, {N, C, H, W}},
            {4, 4, {N, 1, H, 1}, {1, C, 1, W}},           /* both stretched */
            {2, 2, {1, W}, {C, 1}},
        };
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
            mge_graph *g = mge_graph_new();
            int a = param(g, "a", operand(ops[k], 0, sh[s].na, sh[s].a));
            int b = param(g, "b", operand(ops[k], 1, sh[s].nb, sh[s].b));
            int y = bin(g, "y", ops[k], a, b);
            double w = gc_check(g, y, NULL, 1e-2, 0);
            CHECK_MSG(w <= 1e-2, "%s shapes #%zu: worst %g", mge_op_info(ops[k])->name, s, w);
            mge_graph_free(g);
        }
    }
}

/* The same value on both sides: contributions accumulate (x*x, x-x). */
static void test_binary_same_operand(void)
{
    static const int ops[] = {MGE_OP_MUL, MGE_OP_SUB, MGE_OP_ADD, MGE_OP_DIV};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        mge_graph *g = mge_graph_new();
        int64_t d[2] = {3, 5};
        float kink = 0;
        int x = param(g, "x", ranged(2, d, -1, 1, &kink, 1));
        int y = bin(g, "y", ops[k], x, x);
        CHECK(gc_check(g, y, NULL, 1e-2, 0) <= 1e-2);
        mge_graph_free(g);
    }
}

/* ---------------------------------------------------------------- losses */

static mge_tensor *labels(mge_dtype dt, int64_t N, int64_t C)
{
    mge_tensor *t = new_tensor(dt, 1, &N);
    for (int64_t i = 0; i < N; i++) {
        int64_t c = rnd(0, C - 1);
        if (dt == MGE_I32)
            ((int32_t *)t->data)[i] = (int32_t)c;
        else
            ((int64_t *)t->data)[i] = c;
    }
    return t;
}

static void test_loss_fd(void)
{
    for (int rep = 0; rep < 4; rep++) {
        mge_dtype ldt = rep % 2 ? MGE_I64 : MGE_I32;
        int64_t N = rnd(1, 6), C = rnd(1, 9), d[2] = {N, C};
        mge_graph *g = mge_graph_new();
        int x = input(g, "x", MGE_F32, 2, d);
        int l = input(g, "label", ldt, 1, &N);
        int y = bin(g, "loss", MGE_OP_CROSS_ENTROPY, x, l);
        mge_tensor *xt = ranged(2, d, -3, 3, NULL, 0), *lt = labels(ldt, N, C);
        const mge_tensor *given[2] = {xt, lt};
        double w = gc_check(g, y, given, 1e-2, 0);
        CHECK_MSG(w <= 1e-2, "cross_entropy %s [%lld,%lld]: worst %g", mge_dtype_name(ldt), (long long)N,
                  (long long)C, w);
        free_tensor(xt);
        free_tensor(lt);
        mge_graph_free(g);
    }
    for (int rep = 0; rep < 3; rep++) {
        int64_t dims[MGE_MAX_DIMS];
        int nd = rand_shape(dims, 3, 5);
        mge_graph *g = mge_graph_new();
        int a = input(g, "a", MGE_F32, nd, dims);
        int b = mge_graph_add_value(g, "b", MGE_VAL_PARAM, MGE_F32, nd, dims, &gc_err);
        int y = bin(g, "loss", MGE_OP_MSE, a, b);
        CHECK(gc_check(g, y, NULL, 1e-2, 0) <= 1e-2);
        mge_graph_free(g);
    }
    /* a small net through the loss: relu and a bias broadcast (the lenet path) */
    {
        int64_t N = 5, C = 4, d[2] = {N, C};
        mge_graph *g = mge_graph_new();
        int x = input(g, "x", MGE_F32, 2, d);
        int l = input(g, "label", MGE_I32, 1, &N);
        int bias = mge_graph_add_value(g, "bias", MGE_VAL_PARAM, MGE_F32, 1, &C, &gc_err);
        int h = bin(g, "h", MGE_OP_ADD, x, bias);
        int r = un(g, "r", MGE_OP_RELU, h);
        int y = bin(g, "loss", MGE_OP_CROSS_ENTROPY, r, l);
        float kink = 0;
        mge_tensor *xt = ranged(2, d, -1, 1, &kink, 1), *lt = labels(MGE_I32, N, C);
        const mge_tensor *given[2] = {xt, lt};
        /* keep x + bias off relu's kink: bias 0 */
        mge_tensor *bt = new_tensor(MGE_F32, 1, &C);
        memset(bt->data, 0, sizeof(float) * 4);
        g->values[bias].data = bt;
        CHECK(gc_check(g, y, given, 1e-2, 0) <= 1e-2);
        free_tensor(xt);
        free_tensor(lt);
        mge_graph_free(g);
    }
}

/* ---------------------------------------------------------------- direct kernel runs */

typedef struct kcase {
    mge_graph *g;
    int node, nin, nout;
    mge_tensor *in[3];
    mge_tensor *out[2];
} kcase;

/* A node of op on inputs in[] (taken over by the case), outputs allocated. */
static int kcase_make(kcase *k, int op, int nin, mge_tensor **in, int nout, int nattr, const mge_attr *attrs)
{
    memset(k, 0, sizeof *k);
    k->g = mge_graph_new();
    int ids[3];
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = mge_graph_add_value(k->g, name, MGE_VAL_INPUT, in[i]->dtype, in[i]->ndim, in[i]->dims, &gc_err);
        k->in[i] = in[i];
    }
    k->nin = nin;
    const char *on[2] = {"o0", "o1"};
    k->node = mge_graph_add_node(k->g, "n", op, nin, ids, nattr, attrs, nout, on, &gc_err);
    CHECK_MSG(k->node >= 0, "%s: %s", mge_op_info(op)->name, gc_err.msg);
    if (k->node < 0)
        return 0;
    k->nout = nout;
    for (int i = 0; i < nout; i++) {
        const mge_value *v = &k->g->values[k->g->nodes[k->node].out[i]];
        k->out[i] = new_tensor(v->dtype, v->ndim, v->dims);
    }
    return 1;
}

static void kcase_free(kcase *k)
{
    for (int i = 0; i < k->nin; i++)
        free_tensor(k->in[i]);
    for (int i = 0; i < k->nout; i++)
        free_tensor(k->out[i]);
    mge_graph_free(k->g);
}

static mge_status krun(const mge_backend *be, mge_pool *pool, int training, kcase *k, mge_tensor **in,
                       mge_tensor **out, mge_error *err)
{
    const mge_node *n = &k->g->nodes[k->node];
    const mge_kernel *kr = mge_backend_kernel(be, n->op, in[0]->dtype);
    if (!kr || !kr->run)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "no kernel");
    int threads = pool ? mge_pool_size(pool) : 1;
    size_t ws = kr->ws ? kr->ws(n, in, out, threads) : 0;
    void *wsp = ws ? mge_aligned_alloc(ws) : NULL;
    mge_kctx ctx = {.pool = pool,
                    .threads = threads,
                    .ws = wsp,
                    .ws_size = ws,
                    .training = training,
                    .opname = mge_op_info(n->op)->name};
    mge_status s = kr->run(&ctx, n, in, out, err);
    mge_aligned_free(wsp);
    return s;
}

static double max_rel(const mge_tensor *a, const mge_tensor *b)
{
    int64_t n = mge_tensor_numel(b);
    double m = 0, e = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(((const float *)b->data)[i]));
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs((double)((const float *)a->data)[i] - ((const float *)b->data)[i]) / (m + 1e-12));
    return e;
}

static mge_pool *pool3;

/* ref, cpu serial, cpu at 3 threads (bit-identical to serial), and in place
 * on dy's buffer when inplace is set. */
static void kcheck(kcase *k, const char *desc, double tol, int training, int inplace)
{
    mge_tensor *want[2], *got1[2], *got3[2];
    const mge_node *n = &k->g->nodes[k->node];
    const mge_kernel *kc = mge_backend_kernel(mge_backend_cpu(), n->op, k->in[0]->dtype);
    const mge_kernel *kr = mge_backend_kernel(mge_backend_ref(), n->op, k->in[0]->dtype);
    CHECK_MSG(kc && kr && kc->run != kr->run, "%s: no cpu kernel of its own", desc);
    for (int i = 0; i < k->nout; i++) {
        want[i] = new_tensor(k->out[i]->dtype, k->out[i]->ndim, k->out[i]->dims);
        got1[i] = new_tensor(k->out[i]->dtype, k->out[i]->ndim, k->out[i]->dims);
        got3[i] = new_tensor(k->out[i]->dtype, k->out[i]->ndim, k->out[i]->dims);
    }
    mge_error err = {0};
    CHECK_OK(krun(mge_backend_ref(), NULL, training, k, k->in, want, &err), err);
    CHECK_OK(krun(mge_backend_cpu(), NULL, training, k, k->in, got1, &err), err);
    CHECK_OK(krun(mge_backend_cpu(), pool3, training, k, k->in, got3, &err), err);
    for (int i = 0; i < k->nout; i++) {
        double e = max_rel(got1[i], want[i]);
        CHECK_MSG(e <= tol, "%s: cpu differs from ref by %g", desc, e);
        CHECK_MSG(memcmp(got1[i]->data, got3[i]->data, got1[i]->nbytes) == 0, "%s: 1 and 3 threads differ", desc);
    }
    if (inplace) {
        mge_tensor *dy = new_tensor(k->in[0]->dtype, k->in[0]->ndim, k->in[0]->dims);
        memcpy(dy->data, k->in[0]->data, dy->nbytes);
        mge_tensor *in2[3] = {dy, k->in[1], k->in[2]}, *o2[1] = {dy};
        CHECK_OK(krun(mge_backend_cpu(), pool3, training, k, in2, o2, &err), err);
        CHECK_MSG(memcmp(dy->data, got1[0]->data, dy->nbytes) == 0, "%s: in place differs", desc);
        free_tensor(dy);
    }
    for (int i = 0; i < k->nout; i++) {
        free_tensor(want[i]);
        free_tensor(got1[i]);
        free_tensor(got3[i]);
    }
}

static void test_cpu_act_grads(void)
{
    static const int ops[] = {MGE_OP_RELU_GRAD, MGE_OP_RELU6_GRAD,   MGE_OP_LEAKY_RELU_GRAD, MGE_OP_SIGMOID_GRAD,
                              MGE_OP_TANH_GRAD, MGE_OP_GELU_GRAD,    MGE_OP_SILU_GRAD,       MGE_OP_HSWISH_GRAD,
                              MGE_OP_HSIGMOID_GRAD, MGE_OP_ABS_GRAD, MGE_OP_DROPOUT_GRAD};
    static const int64_t sizes[] = {1, 7, 33, 1000, 70001};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int training = 0; training < (ops[k] == MGE_OP_DROPOUT_GRAD ? 2 : 1); training++) {
                int64_t n = sizes[s];
                mge_tensor *dy = ranged(1, &n, -2, 2, NULL, 0), *t = ranged(1, &n, -8, 8, NULL, 0);
                /* exact kinks and zeros (dropped elements) appear too */
                for (int64_t i = 0; i < n; i += 5)
                    ((float *)t->data)[i] = (float)(rnd(-3, 6) == 0 ? 0 : rnd(-3, 6));
                mge_tensor *in[2] = {dy, t};
                mge_attr at[1] = {A_f(MGE_KEY_alpha, 0.1)};
                if (ops[k] == MGE_OP_DROPOUT_GRAD)
                    at[0] = A_f(MGE_KEY_p, 0.25);
                kcase kc;
                if (kcase_make(&kc, ops[k], 2, in, 1, ops[k] == MGE_OP_LEAKY_RELU_GRAD || ops[k] == MGE_OP_DROPOUT_GRAD,
                               at)) {
                    char desc[96];
                    snprintf(desc, sizeof desc, "%s n=%lld training=%d", mge_op_info(ops[k])->name, (long long)n,
                             training);
                    kcheck(&kc, desc, 2e-6, training, 1);
                }
                kcase_free(&kc);
            }
}

static void test_cpu_sum_to(void)
{
    typedef struct {
        int nx, nl;
        int64_t x[4], l[4];
    } st;
    static const st cases[] = {
        {2, 1, {64, 10}, {10}},
        {2, 2, {3000, 7}, {1, 7}},
        {2, 2, {300, 200}, {300, 1}},
        {4, 3, {8, 16, 13, 13}, {16, 1, 1}},
        {4, 4, {8, 16, 13, 13}, {1, 16, 1, 1}},
        {4, 1, {8, 16, 13, 13}, {13}},
        {4, 0, {3, 5, 70, 100}, {0}},
        {2, 1, {2, 70000}, {1}},
        {4, 4, {9, 3, 5, 5}, {9, 1, 1, 1}},
        {4, 4, {9, 3, 5, 5}, {9, 3, 1, 1}},
        {4, 2, {9, 3, 5, 5}, {5, 5}},
        {3, 3, {4, 1, 5}, {4, 1, 5}},        /* nothing to reduce */
        {4, 4, {4, 3, 5, 6}, {1, 3, 1, 6}},  /* not one block: ref */
        {2, 1, {1, 20000}, {20000}},
        {2, 1, {0, 5}, {5}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mge_tensor *x = ranged(cases[c].nx, cases[c].x, -1, 1, NULL, 0);
        mge_tensor *l = new_tensor(MGE_F32, cases[c].nl, cases[c].l);
        mge_tensor *in[2] = {x, l};
        kcase kc;
        if (kcase_make(&kc, MGE_OP_SUM_TO, 2, in, 1, 0, NULL)) {
            char desc[64];
            snprintf(desc, sizeof desc, "sum_to case %zu", c);
            kcheck(&kc, desc, 1e-6, 0, 0);
        }
        kcase_free(&kc);
    }
}

/* cross_entropy or its gradient on logits [N,C] with ldt labels: cpu == ref. */
static void ce_check(int op, int nin, mge_tensor **in, int64_t N, int64_t C, mge_dtype ldt)
{
    kcase kc;
    if (kcase_make(&kc, op, nin, in, 1, 0, NULL)) {
        char desc[96];
        snprintf(desc, sizeof desc, "%s [%lld,%lld] %s", mge_op_info(op)->name, (long long)N, (long long)C,
                 mge_dtype_name(ldt));
        kcheck(&kc, desc, 1e-5, 0, 0);
    }
    kcase_free(&kc);
}

/* cross_entropy rows holding NaN (past the first 16 lanes), +inf, or only
 * -inf, and a clean row: the cpu kernels give NaN exactly where ref does
 * (the loss; each gradient element) and agree elsewhere. */
static void test_cpu_ce_nonfinite(void)
{
    int64_t dims[2] = {4, 37};
    for (int grad = 0; grad < 2; grad++) {
        mge_tensor *x = ranged(2, dims, -5, 5, NULL, 0), *lab = labels(MGE_I32, 4, 37);
        float *xv = x->data;
        xv[0 * 37 + 20] = NAN;
        xv[1 * 37 + 3] = INFINITY;
        for (int c = 0; c < 37; c++)
            xv[2 * 37 + c] = -INFINITY;
        mge_tensor *dy = new_tensor(MGE_F32, 0, NULL);
        *(float *)dy->data = 1.0f;
        mge_tensor *in3[3] = {dy, x, lab};
        kcase kc;
        int ok = grad ? kcase_make(&kc, MGE_OP_CROSS_ENTROPY_GRAD, 3, in3, 1, 0, NULL)
                      : kcase_make(&kc, MGE_OP_CROSS_ENTROPY, 2, in3 + 1, 1, 0, NULL);
        if (!grad)
            free_tensor(dy);
        if (!ok)
            continue;
        mge_tensor *want = new_tensor(kc.out[0]->dtype, kc.out[0]->ndim, kc.out[0]->dims);
        mge_tensor *got = new_tensor(kc.out[0]->dtype, kc.out[0]->ndim, kc.out[0]->dims);
        mge_error err = {0};
        CHECK_OK(krun(mge_backend_ref(), NULL, 0, &kc, kc.in, &want, &err), err);
        CHECK_OK(krun(mge_backend_cpu(), NULL, 0, &kc, kc.in, &got, &err), err);
        const float *w = want->data, *g = got->data;
        int64_t n = mge_tensor_numel(want), bad = 0, nans = 0;
        for (int64_t i = 0; i < n; i++) {
            nans += isnan(w[i]) != 0;
            if (isnan(w[i]) != isnan(g[i]) || (!isnan(w[i]) && fabs((double)w[i] - g[i]) > 1e-5 * (1 + fabs(w[i]))))
                bad++;
        }
        CHECK_MSG(nans > 0, "cross_entropy%s: ref gives no NaN", grad ? "_grad" : "");
        CHECK_MSG(bad == 0, "cross_entropy%s with NaN/inf logits: %lld of %lld elements differ from ref",
                  grad ? "_grad" : "", (long long)bad, (long long)n);
        free_tensor(want);
        free_tensor(got);
        kcase_free(&kc);
    }
}

/* The planner sizes workspaces before any data is bound: cross_entropy's
 * cpu kernel must ask for its per-position losses from the shapes alone,
 * or every planned forward falls back to ref. */
static void test_cpu_ce_ws_unbound(void)
{
    int64_t dims[2] = {64, 10};
    mge_tensor *x = ranged(2, dims, -1, 1, NULL, 0), *lab = labels(MGE_I32, 64, 10);
    mge_tensor *in[2] = {x, lab};
    kcase kc;
    if (!kcase_make(&kc, MGE_OP_CROSS_ENTROPY, 2, in, 1, 0, NULL))
        return;
    const mge_kernel *k = mge_backend_kernel(mge_backend_cpu(), MGE_OP_CROSS_ENTROPY, MGE_F32);
    mge_tensor ux = *x, ul = *lab, uo = *kc.out[0];
    ux.data = NULL, ul.data = NULL, uo.data = NULL;
    mge_tensor *uin[2] = {&ux, &ul}, *uout[1] = {&uo};
    size_t ws = k && k->ws ? k->ws(&kc.g->nodes[kc.node], uin, uout, 1) : 0;
    CHECK_MSG(ws >= sizeof(double) * 64, "cross_entropy cpu workspace without data: %zu bytes, want >= %zu", ws,
              sizeof(double) * 64);
    kcase_free(&kc);
}

static void test_cpu_losses(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {7, 10}, {64, 10}, {300, 1000}, {5, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int l64 = 0; l64 < 2; l64++) {
            mge_dtype ldt = l64 ? MGE_I64 : MGE_I32;
            int64_t N = shapes[s][0], C = shapes[s][1];
            /* forward */
            {
                mge_tensor *x = ranged(2, shapes[s], -5, 5, NULL, 0), *lab = labels(ldt, N, C);
                mge_tensor *in[2] = {x, lab};
                ce_check(MGE_OP_CROSS_ENTROPY, 2, in, N, C, ldt);
            }
            /* gradient */
            {
                mge_tensor *dy = new_tensor(MGE_F32, 0, NULL);
                *(float *)dy->data = 0.75f;
                mge_tensor *x = ranged(2, shapes[s], -5, 5, NULL, 0), *lab = labels(ldt, N, C);
                mge_tensor *in[3] = {dy, x, lab};
                ce_check(MGE_OP_CROSS_ENTROPY_GRAD, 3, in, N, C, ldt);
            }
        }
    int64_t sz[] = {5, 40000};
    for (int s = 0; s < 2; s++) {
        mge_tensor *dy = new_tensor(MGE_F32, 0, NULL);
        *(float *)dy->data = 1.5f;
        mge_tensor *in[3] = {dy, ranged(1, &sz[s], -1, 1, NULL, 0), ranged(1, &sz[s], -1, 1, NULL, 0)};
        kcase kc;
        if (kcase_make(&kc, MGE_OP_MSE_GRAD, 3, in, 1, 0, NULL))
            kcheck(&kc, "mse_grad", 1e-6, 0, 0);
        kcase_free(&kc);
    }
}

/* Ties split evenly; the ref kernel is the only one. */
static void test_minmax_ties(void)
{
    int64_t d[1] = {4};
    for (int mx = 0; mx < 2; mx++) {
        mge_tensor *dy = new_tensor(MGE_F32, 1, d), *a = new_tensor(MGE_F32, 1, d), *b = new_tensor(MGE_F32, 0, NULL);
        float av[4] = {1, 2, 3, 2};
        for (int i = 0; i < 4; i++) {
            ((float *)dy->data)[i] = 4;
            ((float *)a->data)[i] = av[i];
        }
        *(float *)b->data = 2;
        mge_tensor *in[3] = {dy, a, b};
        kcase kc;
        if (kcase_make(&kc, mx ? MGE_OP_MAXIMUM_GRAD : MGE_OP_MINIMUM_GRAD, 3, in, 2, 0, NULL)) {
            CHECK_OK(krun(mge_backend_cpu(), NULL, 0, &kc, kc.in, kc.out, &gc_err), gc_err);
            const float *ga = kc.out[0]->data, *gb = kc.out[1]->data;
            float wa[4] = {mx ? 0.f : 4.f, 2, mx ? 4.f : 0.f, 2};
            for (int i = 0; i < 4; i++) {
                CHECK(ga[i] == wa[i]);
                CHECK(gb[i] == 4 - wa[i]);
            }
        }
        kcase_free(&kc);
    }
}

/* Out-of-range labels fail with the label named, forward and gradient, ref and cpu. */
static void test_bad_label(void)
{
    int64_t N = 3, C = 5, d[2] = {3, 5};
    for (int l64 = 0; l64 < 2; l64++)
        for (int be = 0; be < 2; be++) {
            mge_dtype ldt = l64 ? MGE_I64 : MGE_I32;
            const mge_backend *b = be ? mge_backend_cpu() : mge_backend_ref();
            for (int grad = 0; grad < 2; grad++) {
                mge_tensor *x = ranged(2, d, -1, 1, NULL, 0), *lab = labels(ldt, N, C);
                if (l64)
                    ((int64_t *)lab->data)[1] = grad ? -1 : 7;
                else
                    ((int32_t *)lab->data)[1] = grad ? -1 : 7;
                mge_tensor *dy = new_tensor(MGE_F32, 0, NULL);
                *(float *)dy->data = 1;
                mge_tensor *in[3] = {dy, x, lab};
                kcase kc;
                int ok = grad ? kcase_make(&kc, MGE_OP_CROSS_ENTROPY_GRAD, 3, in, 1, 0, NULL)
                              : kcase_make(&kc, MGE_OP_CROSS_ENTROPY, 2, in + 1, 1, 0, NULL);
                if (!grad)
                    free_tensor(dy);
                if (ok) {
                    mge_error err = {0};
                    mge_status s = krun(b, NULL, 0, &kc, kc.in, kc.out, &err);
                    CHECK(s == MGE_ERR_INVALID);
                    CHECK_MSG(strstr(err.msg, grad ? "label[1] = -1" : "label[1] = 7") != NULL, "message: %s",
                              err.msg);
                }
                kcase_free(&kc);
            }
        }
}

/* Shape inference of the gradient ops refuses mismatched inputs clearly. */
static void test_infer_errors(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d4[1] = {4}, d2[1] = {2};
    int a = input(g, "a", MGE_F32, 2, d23), b = input(g, "b", MGE_F32, 2, d32), c = input(g, "c", MGE_F32, 1, d4);
    int l = input(g, "l", MGE_I32, 1, d2), s = input(g, "s", MGE_F32, 0, NULL);
    const char *o[2] = {"o", "o1"};
    int in[3] = {a, b};
    CHECK(mge_graph_add_node(g, "n1", MGE_OP_RELU_GRAD, 2, in, 0, NULL, 1, o, &gc_err) < 0);
    CHECK(strstr(gc_err.msg, "relu_grad") != NULL);
    in[0] = a, in[1] = c;
    CHECK(mge_graph_add_node(g, "n2", MGE_OP_SUM_TO, 2, in, 0, NULL, 1, o, &gc_err) < 0);
    CHECK(strstr(gc_err.msg, "sum_to") != NULL);
    in[0] = s, in[1] = a, in[2] = l;
    CHECK(mge_graph_add_node(g, "n3", MGE_OP_CROSS_ENTROPY_GRAD, 3, in, 0, NULL, 1, o, &gc_err) >= 0);
    in[0] = a;
    CHECK(mge_graph_add_node(g, "n4", MGE_OP_CROSS_ENTROPY_GRAD, 3, in, 0, NULL, 1, o + 1, &gc_err) < 0);
    CHECK(strstr(gc_err.msg, "dy") != NULL);
    mge_graph_free(g);
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261201);
    pool3 = mge_pool_create(3);
    RUN(test_relu_uses_y);
    RUN(test_unary_fd);
    RUN(test_dropout_fd);
    RUN(test_cast);
    RUN(test_binary_fd);
    RUN(test_binary_same_operand);
    RUN(test_loss_fd);
    RUN(test_cpu_act_grads);
    RUN(test_cpu_sum_to);
    RUN(test_cpu_losses);
    RUN(test_cpu_ce_nonfinite);
    RUN(test_cpu_ce_ws_unbound);
    RUN(test_minmax_ties);
    RUN(test_bad_label);
    RUN(test_infer_errors);
    mge_pool_free(pool3);
    return unit_rerun_baseline(argv, "test_grad_elem", unit_done());
}
