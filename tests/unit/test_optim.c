/* test_optim.c — optimizer ops, mge_optim_build and schedules.
 *
 * The update kernels run through the executor on ref and cpu for several
 * steps and are compared with the PyTorch rules written out here in plain
 * double code (no rounding of stored tensors, so agreement within 1e-5
 * relative is what is asserted). cpu == ref and cpu at 1 thread == cpu at 3
 * threads are asserted bit for bit (params, states and the outputs) on
 * tensors spanning several blocks. A few values after three steps come from
 * PyTorch 1.13 itself (torch.optim.SGD/Adam/AdamW, clip_grad_norm_). */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <math.h>
#include <stdint.h>

static mge_error err;
static const char *backends[2] = {"ref", "cpu"};

/* ---------------------------------------------------------------- helpers */

static float *attach(mge_graph *g, int v)
{
    mge_value *val = &g->values[v];
    val->data = calloc(1, sizeof *val->data);
    CHECK_OK(mge_tensor_alloc(val->data, val->dtype, val->ndim, val->dims, &err), err);
    return val->data->data;
}

static double p_init(int64_t i) { return 0.8 * cos((double)i * 0.11) + 0.05; }
static double g_at(int64_t i, int step) { return sin((double)i * 0.37 + step * 1.3) * (1 + (double)(i % 5)); }

/* One update node over a param "w" f32[n]: grad and (optional) scale are
 * graph inputs, the moments and hyper are state. */
typedef struct rig {
    mge_graph *g;
    int op, p, gr, s1, s2, hyper, scale, out;
    int64_t n;
    mge_exec *e;
    mge_tensor gt, st;
} rig;

static int rig_make(rig *r, int op, int64_t n, int nattr, const mge_attr *at, int with_scale)
{
    memset(r, 0, sizeof *r);
    r->op = op;
    r->n = n;
    r->g = mge_graph_new();
    int64_t d[1] = {n}, two = 2;
    mge_graph *g = r->g;
    r->p = mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 1, d, &err);
    r->gr = mge_graph_add_value(g, "w.grad", MGE_VAL_INPUT, MGE_F32, 1, d, &err);
    r->s1 = mge_graph_add_value(g, "w.__opt.s1", MGE_VAL_STATE, MGE_F32, 1, d, &err);
    r->s2 = op == MGE_OP_ADAM ? mge_graph_add_value(g, "w.__opt.s2", MGE_VAL_STATE, MGE_F32, 1, d, &err) : -1;
    r->hyper = mge_graph_add_value(g, "__opt.hyper", MGE_VAL_STATE, MGE_F32, 1, &two, &err);
    r->scale = with_scale ? mge_graph_add_value(g, "scale", MGE_VAL_INPUT, MGE_F32, 0, NULL, &err) : -1;
    float *p = attach(g, r->p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)p_init(i);
    attach(g, r->s1);
    if (r->s2 >= 0)
        attach(g, r->s2);
    attach(g, r->hyper);
    int in[6], nin = 0;
    in[nin++] = r->p;
    in[nin++] = r->gr;
    in[nin++] = r->s1;
    if (r->s2 >= 0)
        in[nin++] = r->s2;
    in[nin++] = r->hyper;
    if (r->scale >= 0)
        in[nin++] = r->scale;
    r->out = node(g, "upd", op, nin, in, nattr, at);
    if (r->out < 0)
        return 0;
    CHECK_OK(mge_graph_add_output(g, r->out, &err), err);
    CHECK_OK(mge_tensor_alloc(&r->gt, MGE_F32, 1, d, &err), err);
    CHECK_OK(mge_tensor_alloc(&r->st, MGE_F32, 0, NULL, &err), err);
    return 1;
}

static int rig_exec(rig *r, const char *be, int threads)
{
    mge_exec_opts o = {0};
    o.backend = be;
    o.threads = threads;
    o.training = 1;
    mge_status s = mge_exec_create(r->g, &o, &r->e, &err);
    CHECK_OK(s, err);
    return s == MGE_OK;
}

/* One update with grad g_at(., step) * gmul, scale sc; returns the output. */
static double rig_step(rig *r, int step, double lr, double sc, double gmul)
{
    float *g = r->gt.data;
    for (int64_t i = 0; i < r->n; i++)
        g[i] = (float)(g_at(i, step) * gmul);
    ((float *)r->st.data)[0] = (float)sc;
    CHECK_OK(mge_optim_set_hyper(r->g, r->hyper, lr, step, &err), err);
    const mge_tensor *ins[2];
    for (int i = 0; i < mge_exec_ninputs(r->e); i++)
        ins[i] = mge_exec_input(r->e, i) == r->gr ? &r->gt : &r->st;
    mge_status s = mge_exec_run(r->e, ins, &err);
    CHECK_OK(s, err);
    if (s)
        return NAN;
    return ((const float *)mge_exec_result(r->e, 0)->data)[0];
}

static void rig_free(rig *r)
{
    mge_exec_free(r->e);
    mge_graph_free(r->g);
    mge_tensor_free(&r->gt);
    mge_tensor_free(&r->st);
}

static float *vdata(rig *r, int v) { return v >= 0 ? r->g->values[v].data->data : NULL; }

static int near(double got, double want) { return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6; }

/* Every element of a[0..n) near want[0..n); reports the first miss. */
static void check_close(const char *what, const float *a, const double *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!near(a[i], want[i])) {
            CHECK_MSG(0, "%s[%lld] = %.9g, expected %.9g", what, (long long)i, a[i], want[i]);
            return;
        }
}

/* The sum of (b - a)^2, for the update norm the ops output. */
static double sq_diff(const float *b, const float *a, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += ((double)b[i] - a[i]) * ((double)b[i] - a[i]);
    return s;
}

/* ---------------------------------------------------------------- sgd */

typedef struct sgd_cfg {
    double mom, damp, wd;
    int nesterov, scaled;
} sgd_cfg;

static void sgd_model(const sgd_cfg *c, double *p, double *b, const double *g, int64_t n, int step, double lr,
                      double sc)
{
    for (int64_t i = 0; i < n; i++) {
        double d = g[i] * sc;
        if (c->wd != 0)
            d += c->wd * p[i];
        if (c->mom != 0) {
            b[i] = step == 1 ? d : c->mom * b[i] + (1 - c->damp) * d;
            d = c->nesterov ? d + c->mom * b[i] : b[i];
        }
        p[i] -= lr * d;
    }
}

static void test_sgd_rules(void)
{
    static const sgd_cfg cfgs[] = {
        {0, 0, 0, 0, 0},        /* plain */
        {0.9, 0, 0, 0, 0},      /* momentum */
        {0.8, 0.3, 0, 0, 0},    /* dampening */
        {0.9, 0, 0, 1, 0},      /* nesterov */
        {0.9, 0, 0.01, 0, 0},   /* weight decay */
        {0, 0, 0.05, 0, 1},     /* weight decay, scaled gradient */
        {0.7, 0.1, 0.02, 0, 1}, /* everything */
    };
    const int64_t n = 37;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (int b = 0; b < 2; b++) {
            const sgd_cfg *cf = &cfgs[c];
            mge_attr at[4] = {A_f(MGE_KEY_momentum, cf->mom), A_f(MGE_KEY_dampening, cf->damp),
                              A(MGE_KEY_nesterov, cf->nesterov), A_f(MGE_KEY_weight_decay, cf->wd)};
            rig r;
            if (!rig_make(&r, MGE_OP_SGD, n, 4, at, cf->scaled) || !rig_exec(&r, backends[b], 1)) {
                CHECK(0);
                rig_free(&r);
                continue;
            }
            double P[37], B[37] = {0}, G[37];
            float before[37];
            for (int64_t i = 0; i < n; i++)
                P[i] = (float)p_init(i);
            for (int step = 1; step <= 4; step++) {
                double lr = 0.1 / step, sc = cf->scaled ? 0.5 + 0.1 * step : 1;
                for (int64_t i = 0; i < n; i++)
                    G[i] = (float)g_at(i, step);
                memcpy(before, vdata(&r, r.p), sizeof before);
                double out = rig_step(&r, step, lr, sc, 1);
                sgd_model(cf, P, B, G, n, step, (float)lr, (float)sc);
                check_close("param", vdata(&r, r.p), P, n);
                if (cf->mom != 0)
                    check_close("momentum_buffer", vdata(&r, r.s1), B, n);
                CHECK_NEAR(out, sq_diff(vdata(&r, r.p), before, n), 1e-6 * out);
                CHECK(out > 0);
            }
            if (unit_failed_checks)
                fprintf(stderr, "  (sgd config %zu on %s)\n", c, backends[b]);
            rig_free(&r);
        }
}

/* ---------------------------------------------------------------- adam */

typedef struct adam_cfg {
    double b1, b2, eps, wd;
    int decoupled, scaled;
} adam_cfg;

static void adam_model(const adam_cfg *c, double *p, double *m, double *v, const double *g, int64_t n, int step,
                       double lr, double sc)
{
    double bc1 = 1 - pow(c->b1, step), bc2 = 1 - pow(c->b2, step);
    for (int64_t i = 0; i < n; i++) {
        double d = g[i] * sc;
        if (c->decoupled)
            p[i] *= 1 - lr * c->wd;
        else if (c->wd != 0)
            d += c->wd * p[i];
        m[i] = c->b1 * m[i] + (1 - c->b1) * d;
        v[i] = c->b2 * v[i] + (1 - c->b2) * d * d;
        p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + c->eps);
    }
}

static void test_adam_rules(void)
{
    static const adam_cfg cfgs[] = {
        {0.9, 0.999, 1e-8, 0, 0, 0},    /* Adam defaults */
        {0.9, 0.999, 1e-8, 0.1, 0, 0},  /* L2 weight decay */
        {0.9, 0.999, 1e-8, 0.01, 1, 0}, /* AdamW defaults */
        {0.3, 0.9, 1e-3, 0.05, 1, 1},   /* beta1 < 0.5: torch.lerp's other form; scaled */
        {0.5, 0.99, 1e-6, 0, 0, 1},
    };
    const int64_t n = 37;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (int b = 0; b < 2; b++) {
            const adam_cfg *cf = &cfgs[c];
            mge_attr at[5] = {A_f(MGE_KEY_beta1, cf->b1), A_f(MGE_KEY_beta2, cf->b2), A_f(MGE_KEY_eps, cf->eps),
                              A_f(MGE_KEY_weight_decay, cf->wd), A(MGE_KEY_decoupled, cf->decoupled)};
            rig r;
            if (!rig_make(&r, MGE_OP_ADAM, n, 5, at, cf->scaled) || !rig_exec(&r, backends[b], 1)) {
                CHECK(0);
                rig_free(&r);
                continue;
            }
            double P[37], M[37] = {0}, V[37] = {0}, G[37];
            float before[37];
            for (int64_t i = 0; i < n; i++)
                P[i] = (float)p_init(i);
            for (int step = 1; step <= 5; step++) {
                double lr = 0.01 * step, sc = cf->scaled ? 1.5 - 0.2 * step : 1;
                for (int64_t i = 0; i < n; i++)
                    G[i] = (float)g_at(i, step);
                memcpy(before, vdata(&r, r.p), sizeof before);
                double out = rig_step(&r, step, lr, sc, 1);
                adam_model(cf, P, M, V, G, n, step, (float)lr, (float)sc);
                check_close("param", vdata(&r, r.p), P, n);
                check_close("exp_avg", vdata(&r, r.s1), M, n);
                check_close("exp_avg_sq", vdata(&r, r.s2), V, n);
                CHECK_NEAR(out, sq_diff(vdata(&r, r.p), before, n), 1e-6 * out);
            }
            if (unit_failed_checks)
                fprintf(stderr, "  (adam config %zu on %s)\n", c, backends[b]);
            rig_free(&r);
        }
}

/* ---------------------------------------------------------------- PyTorch values */

/* Three steps on p = [0.5, -1.25, 2, 0.03]; the values printed by
 * torch 1.13 (torch.optim.*, float32) for the same gradients. */
static void test_torch_values(void)
{
    static const float p0[4] = {0.5f, -1.25f, 2.0f, 0.03f};
    static const float gs[3][4] = {{0.1f, -0.2f, 0.3f, 1.5f}, {-0.4f, 0.05f, 0.25f, -1.0f}, {0.2f, 0.2f, -0.6f, 0.7f}};
    static const struct {
        int op;
        int nattr;
        mge_attr at[5];
        double lr, want[4];
    } cases[] = {
        {MGE_OP_SGD, 3, {{MGE_KEY_momentum, 1, {0}, 0.9}, {MGE_KEY_nesterov, 1, {1}, 0}, {MGE_KEY_weight_decay, 1, {0}, 0.01}},
         0.1, {0.531950951, -1.22291386, 1.92740881, -0.346908361}},
        {MGE_OP_SGD, 2, {{MGE_KEY_momentum, 1, {0}, 0.8}, {MGE_KEY_dampening, 1, {0}, 0.3}},
         0.1, {0.511999965, -1.22149992, 1.93730009, -0.259000033}},
        {MGE_OP_ADAM, 1, {{MGE_KEY_weight_decay, 1, {0}, 0.1}},
         0.01, {0.493440062, -1.22708404, 1.97671938, 0.0151645895}},
        {MGE_OP_ADAM, 2, {{MGE_KEY_weight_decay, 1, {0}, 0.1}, {MGE_KEY_decoupled, 1, {1}, 0}},
         0.01, {0.495212674, -1.23343074, 1.97530234, 0.0151310768}},
        {MGE_OP_ADAM, 2, {{MGE_KEY_beta1, 1, {0}, 0.3}, {MGE_KEY_beta2, 1, {0}, 0.9}},
         0.05, {0.485691279, -1.23999453, 1.94458115, -0.0209105201}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int b = 0; b < 2; b++) {
            rig r;
            if (!rig_make(&r, cases[c].op, 4, cases[c].nattr, cases[c].at, 0) || !rig_exec(&r, backends[b], 1)) {
                CHECK(0);
                rig_free(&r);
                continue;
            }
            memcpy(vdata(&r, r.p), p0, sizeof p0);
            for (int step = 1; step <= 3; step++) {
                memcpy(r.gt.data, gs[step - 1], sizeof gs[0]);
                CHECK_OK(mge_optim_set_hyper(r.g, r.hyper, cases[c].lr, step, &err), err);
                const mge_tensor *ins[1] = {&r.gt};
                CHECK_OK(mge_exec_run(r.e, ins, &err), err);
            }
            const float *p = vdata(&r, r.p);
            for (int i = 0; i < 4; i++)
                CHECK_MSG(fabs(p[i] - cases[c].want[i]) <= 1e-5 * fabs(cases[c].want[i]),
                          "case %zu on %s: p[%d] = %.9g, torch %.9g", c, backends[b], i, p[i], cases[c].want[i]);
            rig_free(&r);
        }
}

/* ---------------------------------------------------------------- bit identity */

static int same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* The same steps on ref, cpu at 1 thread and cpu at 3 threads: identical
 * bits in params, states and outputs. n spans three blocks and a tail. */
static void test_cpu_ref_bits(void)
{
    const int64_t n = 3 * 8192 + 123;
    mge_attr sgd_at[4] = {A_f(MGE_KEY_momentum, 0.9), A_f(MGE_KEY_dampening, 0), A(MGE_KEY_nesterov, 1),
                          A_f(MGE_KEY_weight_decay, 1e-3)};
    mge_attr adam_at[2] = {A_f(MGE_KEY_weight_decay, 0.01), A(MGE_KEY_decoupled, 1)};
    for (int which = 0; which < 3; which++) {
        int op = which == 0 ? MGE_OP_SGD : MGE_OP_ADAM;
        rig r[3];
        const char *be[3] = {"ref", "cpu", "cpu"};
        int th[3] = {1, 1, 3}, ok = 1;
        for (int k = 0; k < 3; k++)
            ok &= rig_make(&r[k], op, n, which == 0 ? 4 : which == 1 ? 2 : 0, which == 0 ? sgd_at : adam_at, 1) &&
                  rig_exec(&r[k], be[k], th[k]);
        CHECK(ok);
        for (int step = 1; ok && step <= 3; step++) {
            float out[3];
            for (int k = 0; k < 3; k++)
                out[k] = (float)rig_step(&r[k], step, 0.01, 0.75, 1);
            for (int k = 1; k < 3; k++) {
                CHECK_MSG(same_bits(&out[0], &out[k], sizeof(float)), "%s step %d: output %.9g vs ref %.9g (run %d)",
                          op == MGE_OP_SGD ? "sgd" : "adam", step, out[k], out[0], k);
                CHECK(same_bits(vdata(&r[0], r[0].p), vdata(&r[k], r[k].p), sizeof(float) * (size_t)n));
                CHECK(same_bits(vdata(&r[0], r[0].s1), vdata(&r[k], r[k].s1), sizeof(float) * (size_t)n));
                if (op == MGE_OP_ADAM)
                    CHECK(same_bits(vdata(&r[0], r[0].s2), vdata(&r[k], r[k].s2), sizeof(float) * (size_t)n));
            }
        }
        for (int k = 0; k < 3; k++)
            rig_free(&r[k]);
    }
}

/* ---------------------------------------------------------------- sumsq, clip_coef */

static void test_sumsq_clip(void)
{
    const int64_t sizes[3] = {5, 3 * 8192 + 7, 1000};
    for (int run = 0; run < 3; run++) {
        mge_graph *g = mge_graph_new();
        int in[3];
        mge_tensor t[3];
        const mge_tensor *ins[3];
        double want = 0;
        for (int k = 0; k < 3; k++) {
            char name[16];
            snprintf(name, sizeof name, "g%d", k);
            in[k] = mge_graph_add_value(g, name, MGE_VAL_INPUT, MGE_F32, 1, &sizes[k], &err);
            CHECK_OK(mge_tensor_alloc(&t[k], MGE_F32, 1, &sizes[k], &err), err);
            for (int64_t i = 0; i < sizes[k]; i++) {
                float v = (float)(g_at(i, k) * 0.01);
                ((float *)t[k].data)[i] = v;
                want += (double)v * v;
            }
            ins[k] = &t[k];
        }
        int s1 = node(g, "s1", MGE_OP_SUMSQ, 2, in, 0, NULL);
        int s2 = node(g, "s2", MGE_OP_SUMSQ, 1, in + 2, 0, NULL);
        int parts[2] = {s1, s2};
        mge_attr small = A_f(MGE_KEY_max_norm, 0.5), big = A_f(MGE_KEY_max_norm, 100);
        int c1 = node(g, "c1", MGE_OP_CLIP_COEF, 2, parts, 1, &small);
        int c2 = node(g, "c2", MGE_OP_CLIP_COEF, 2, parts, 1, &big);
        int outs[4] = {s1, s2, c1, c2};
        mge_exec_opts o = {0};
        o.backend = run == 0 ? "ref" : "cpu";
        o.threads = run == 2 ? 3 : 1;
        o.noutputs = 4;
        o.outputs = outs;
        mge_exec *e = NULL;
        static float bits[4];
        CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
        if (e) {
            const mge_tensor *ord[3];
            for (int i = 0; i < mge_exec_ninputs(e); i++)
                for (int k = 0; k < 3; k++)
                    if (mge_exec_input(e, i) == in[k])
                        ord[i] = ins[k];
            CHECK_OK(mge_exec_run(e, ord, &err), err);
            float r[4];
            for (int k = 0; k < 4; k++)
                r[k] = ((const float *)mge_exec_result(e, k)->data)[0];
            CHECK_NEAR(r[0] + (double)r[1], want, 1e-6 * want);
            double norm = sqrt((double)r[0] + r[1]);
            CHECK(norm > 0.5 && norm < 100);
            CHECK_NEAR(r[2], 0.5 / (norm + 1e-6), 1e-6);
            CHECK(r[3] == 1.0f);
            if (run == 0)
                memcpy(bits, r, sizeof r);
            else
                CHECK_MSG(same_bits(bits, r, sizeof r), "sumsq/clip_coef differ from ref on cpu with %d threads",
                          o.threads);
            /* an infinite gradient makes the coefficient NaN */
            ((float *)t[0].data)[2] = INFINITY;
            CHECK_OK(mge_exec_run(e, ord, &err), err);
            CHECK(isnan(((const float *)mge_exec_result(e, 2)->data)[0]));
        }
        mge_exec_free(e);
        for (int k = 0; k < 3; k++)
            mge_tensor_free(&t[k]);
        mge_graph_free(g);
    }
}

/* ---------------------------------------------------------------- mge_optim_build */

/* nparams params "l<k>.w" f32[k%3+1] with data, gradients as graph inputs. */
typedef struct net {
    mge_graph *g;
    int n, *params, *grads, *updates, hyper;
    mge_tensor *gt;
} net;

static void net_make(net *t, int n)
{
    memset(t, 0, sizeof *t);
    t->g = mge_graph_new();
    t->n = n;
    size_t cnt = (size_t)(n > 0 ? n : 1);
    t->params = calloc(cnt, sizeof(int));
    t->grads = calloc(cnt, sizeof(int));
    t->updates = calloc(cnt, sizeof(int));
    t->gt = calloc(cnt, sizeof(mge_tensor));
    for (int k = 0; k < n; k++) {
        char name[32];
        int64_t d = k % 3 + 1;
        snprintf(name, sizeof name, "l%d.w", k);
        t->params[k] = mge_graph_add_value(t->g, name, MGE_VAL_PARAM, MGE_F32, 1, &d, &err);
        float *p = attach(t->g, t->params[k]);
        snprintf(name, sizeof name, "l%d.w.grad", k);
        t->grads[k] = mge_graph_add_value(t->g, name, MGE_VAL_INPUT, MGE_F32, 1, &d, &err);
        CHECK_OK(mge_tensor_alloc(&t->gt[k], MGE_F32, 1, &d, &err), err);
        for (int64_t i = 0; i < d; i++) {
            p[i] = (float)p_init(k + i);
            ((float *)t->gt[k].data)[i] = (float)(g_at(k * 3 + i, 1) * 0.05);
        }
    }
}

static void net_free(net *t)
{
    for (int k = 0; k < t->n; k++)
        mge_tensor_free(&t->gt[k]);
    free(t->gt);
    free(t->params);
    free(t->grads);
    free(t->updates);
    mge_graph_free(t->g);
}

/* Runs the update nodes once (set_hyper lr, step 1); 0 on failure. */
static int net_run(net *t, const char *be, double lr)
{
    int nout = 0, *outs = calloc((size_t)(t->n > 0 ? t->n : 1), sizeof(int));
    for (int k = 0; k < t->n; k++)
        if (t->updates[k] >= 0)
            outs[nout++] = t->updates[k];
    mge_exec_opts o = {0};
    o.backend = be;
    o.noutputs = nout;
    o.outputs = outs;
    o.training = 1;
    mge_exec *e = NULL;
    int ok = mge_exec_create(t->g, &o, &e, &err) == MGE_OK;
    CHECK_OK(ok ? MGE_OK : err.code, err);
    CHECK_OK(mge_optim_set_hyper(t->g, t->hyper, lr, 1, &err), err);
    if (ok) {
        int ni = mge_exec_ninputs(e);
        const mge_tensor **ins = calloc((size_t)(ni ? ni : 1), sizeof *ins);
        /* inputs are the gradients, declared in param order */
        for (int i = 0; i < ni; i++)
            for (int k = 0; k < t->n; k++)
                if (mge_exec_input(e, i) == t->grads[k])
                    ins[i] = &t->gt[k];
        ok = mge_exec_run(e, ins, &err) == MGE_OK;
        CHECK_OK(ok ? MGE_OK : err.code, err);
        free(ins);
    }
    mge_exec_free(e);
    free(outs);
    return ok;
}

static int count_op(const mge_graph *g, int op)
{
    int c = 0;
    for (int i = 0; i < g->nnodes; i++)
        c += g->nodes[i].op == op;
    return c;
}

/* Plain SGD with clipping: p -= lr * coef * g with the global coefficient. */
static void check_clipped_sgd(int n, double max_norm, int expect_sumsq, int expect_add)
{
    for (int b = 0; b < 2; b++) {
        net t;
        net_make(&t, n);
        mge_optim_opts o;
        mge_optim_defaults(MGE_OPTIM_SGD, &o);
        o.clip_norm = max_norm;
        CHECK_OK(mge_optim_build(t.g, &o, n, t.params, t.grads, t.updates, &t.hyper, &err), err);
        CHECK(count_op(t.g, MGE_OP_SUMSQ) == expect_sumsq);
        CHECK(count_op(t.g, MGE_OP_ADD) == expect_add);
        CHECK(count_op(t.g, MGE_OP_CLIP_COEF) == 1);
        CHECK(count_op(t.g, MGE_OP_SGD) == n);
        /* plain SGD keeps no buffer */
        CHECK(mge_graph_find(t.g, "l0.w.__opt.momentum_buffer") < 0);
        /* the updates are the last nodes */
        for (int k = 0; k < n; k++)
            CHECK(t.g->values[t.updates[k]].producer >= t.g->nnodes - n);
        double ss = 0;
        float **before = calloc((size_t)(n > 0 ? n : 1), sizeof(float *));
        for (int k = 0; k < n; k++) {
            int64_t d = t.gt[k].dims[0];
            before[k] = malloc(sizeof(float) * (size_t)d);
            memcpy(before[k], t.g->values[t.params[k]].data->data, sizeof(float) * (size_t)d);
            for (int64_t i = 0; i < d; i++)
                ss += (double)((float *)t.gt[k].data)[i] * ((float *)t.gt[k].data)[i];
        }
        double coef = max_norm / (sqrt(ss) + 1e-6);
        coef = coef > 1 ? 1 : coef;
        CHECK(coef < 1);
        if (net_run(&t, backends[b], 0.1))
            for (int k = 0; k < n; k++)
                for (int64_t i = 0; i < t.gt[k].dims[0]; i++) {
                    double want = before[k][i] - (double)(float)0.1 * coef * ((float *)t.gt[k].data)[i];
                    double got = ((float *)t.g->values[t.params[k]].data->data)[i];
                    if (!near(got, want)) {
                        CHECK_MSG(0, "n=%d %s: l%d.w[%lld] = %.9g, expected %.9g", n, backends[b], k, (long long)i,
                                  got, want);
                        k = n;
                        break;
                    }
                }
        for (int k = 0; k < n; k++)
            free(before[k]);
        free(before);
        net_free(&t);
    }
}

static void test_build_clip(void)
{
    check_clipped_sgd(5, 0.1, 1, 0);
    check_clipped_sgd(70, 0.3, 2, 0);
    /* 64*65+3 gradients: 66 partial sums, two pairs of them added */
    check_clipped_sgd(64 * 65 + 3, 1.0, 66, 2);
}

static void test_build_state(void)
{
    /* adam: zeroed moments named after the param, hyper {lr, 1} */
    net t;
    net_make(&t, 4);
    t.grads[2] = -1;   /* no gradient: no update, no state */
    mge_optim_opts o;
    mge_optim_defaults(MGE_OPTIM_ADAMW, &o);
    CHECK(o.weight_decay == 0.01 && o.lr == 0.001 && o.beta1 == 0.9 && o.beta2 == 0.999 && o.eps == 1e-8);
    CHECK_OK(mge_optim_build(t.g, &o, 4, t.params, t.grads, t.updates, &t.hyper, &err), err);
    CHECK(t.updates[2] == -1 && t.updates[0] >= 0 && t.updates[3] >= 0);
    CHECK(t.hyper == mge_graph_find(t.g, "__opt.hyper"));
    const float *h = t.g->values[t.hyper].data->data;
    CHECK(h[0] == 0.001f && h[1] == 1.0f);
    int m = mge_graph_find(t.g, "l1.w.__opt.exp_avg"), v = mge_graph_find(t.g, "l1.w.__opt.exp_avg_sq");
    CHECK(m >= 0 && v >= 0);
    CHECK(mge_graph_find(t.g, "l2.w.__opt.exp_avg") < 0);
    if (m >= 0 && v >= 0) {
        CHECK(t.g->values[m].kind == MGE_VAL_STATE && t.g->values[m].data && t.g->values[m].ndim == 1 &&
              t.g->values[m].dims[0] == 2);
        CHECK(((float *)t.g->values[v].data->data)[1] == 0.0f);
    }
    const mge_node *un1 = &t.g->nodes[t.g->values[t.updates[1]].producer];
    CHECK(un1->op == MGE_OP_ADAM && un1->nin == 5 && mge_node_int(un1, MGE_KEY_decoupled, 0) == 1);
    CHECK(mge_node_float(un1, MGE_KEY_weight_decay, 0) == 0.01);
    CHECK(net_run(&t, "cpu", 0.001));
    if (m >= 0)
        CHECK(((float *)t.g->values[m].data->data)[0] != 0.0f);
    net_free(&t);

    /* sgd with momentum: a buffer per param; existing state is reused */
    net_make(&t, 2);
    int64_t d = 2;
    int pre = mge_graph_add_value(t.g, "l1.w.__opt.momentum_buffer", MGE_VAL_STATE, MGE_F32, 1, &d, &err);
    float *pb = attach(t.g, pre);
    pb[0] = 3, pb[1] = -3;
    mge_optim_defaults(MGE_OPTIM_SGD, &o);
    o.momentum = 0.5;
    CHECK_OK(mge_optim_build(t.g, &o, 2, t.params, t.grads, t.updates, &t.hyper, &err), err);
    CHECK(mge_graph_find(t.g, "l0.w.__opt.momentum_buffer") >= 0);
    CHECK(mge_graph_find(t.g, "l1.w.__opt.momentum_buffer") == pre);
    CHECK(pb == t.g->values[pre].data->data && pb[0] == 3);
    net_free(&t);

    /* existing state of the wrong shape is refused */
    net_make(&t, 2);
    d = 5;
    mge_graph_add_value(t.g, "l0.w.__opt.exp_avg", MGE_VAL_STATE, MGE_F32, 1, &d, &err);
    mge_optim_defaults(MGE_OPTIM_ADAM, &o);
    CHECK(mge_optim_build(t.g, &o, 2, t.params, t.grads, t.updates, &t.hyper, &err) == MGE_ERR_SHAPE);
    CHECK(strstr(err.msg, "l0.w.__opt.exp_avg") != NULL);
    net_free(&t);

    /* a param listed twice, a gradient of the wrong shape, a non-param */
    net_make(&t, 3);
    mge_optim_defaults(MGE_OPTIM_SGD, &o);
    int pp[2] = {t.params[0], t.params[0]}, gg[2] = {t.grads[0], t.grads[0]}, up[2];
    CHECK(mge_optim_build(t.g, &o, 2, pp, gg, up, &t.hyper, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "twice") != NULL);
    gg[0] = t.grads[1];
    CHECK(mge_optim_build(t.g, &o, 1, pp, gg, up, &t.hyper, &err) == MGE_ERR_SHAPE);
    CHECK(mge_optim_build(t.g, &o, 1, t.grads, t.grads, up, &t.hyper, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "not a trainable param") != NULL);
    net_free(&t);
}

/* ---------------------------------------------------------------- bad options */

static void test_bad_options(void)
{
    mge_optim_opts o;
    mge_optim_defaults(MGE_OPTIM_SGD, &o);
    CHECK(o.lr == 0.01 && o.momentum == 0 && o.weight_decay == 0);
    CHECK_OK(mge_optim_check(&o, &err), err);
    o.nesterov = 1;
    CHECK(mge_optim_check(&o, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "nesterov") && strstr(err.msg, "momentum > 0"));
    o.momentum = 0.9;
    o.dampening = 0.1;
    CHECK(mge_optim_check(&o, &err) == MGE_ERR_INVALID);
    o.dampening = 0;
    CHECK_OK(mge_optim_check(&o, &err), err);
    o.lr = -1;
    CHECK(mge_optim_check(&o, &err) == MGE_ERR_INVALID && strstr(err.msg, "lr=-1"));
    mge_optim_defaults(MGE_OPTIM_ADAM, &o);
    CHECK(o.lr == 0.001 && o.weight_decay == 0);
    o.beta1 = 1;
    CHECK(mge_optim_check(&o, &err) == MGE_ERR_INVALID && strstr(err.msg, "beta1"));
    o.beta1 = 0.9;
    o.eps = NAN;
    CHECK(mge_optim_check(&o, &err) == MGE_ERR_INVALID);

    /* the same checks when a node is added, and shape checks */
    rig r;
    mge_attr nest[2] = {A(MGE_KEY_nesterov, 1), A_f(MGE_KEY_momentum, 0)};
    CHECK(!rig_make(&r, MGE_OP_SGD, 3, 2, nest, 0));
    CHECK(strstr(ug_err.msg, "nesterov=true needs momentum > 0") != NULL);
    rig_free(&r);
    mge_attr b2 = A_f(MGE_KEY_beta2, 1.5);
    CHECK(!rig_make(&r, MGE_OP_ADAM, 3, 1, &b2, 0));
    CHECK(strstr(ug_err.msg, "beta2=1.5") != NULL);
    rig_free(&r);

    mge_graph *g = mge_graph_new();
    int64_t d3 = 3, d4 = 4, two = 2, three = 3;
    int p = mge_graph_add_value(g, "p", MGE_VAL_PARAM, MGE_F32, 1, &d3, &err);
    int gb = mge_graph_add_value(g, "gbad", MGE_VAL_INPUT, MGE_F32, 1, &d4, &err);
    int gi = mge_graph_add_value(g, "gint", MGE_VAL_INPUT, MGE_I32, 1, &d3, &err);
    int gok = mge_graph_add_value(g, "g", MGE_VAL_INPUT, MGE_F32, 1, &d3, &err);
    int h = mge_graph_add_value(g, "h", MGE_VAL_STATE, MGE_F32, 1, &two, &err);
    int h3 = mge_graph_add_value(g, "h3", MGE_VAL_STATE, MGE_F32, 1, &three, &err);
    int sc = mge_graph_add_value(g, "sc", MGE_VAL_INPUT, MGE_F32, 1, &d3, &err);
    mge_attr mom = A_f(MGE_KEY_momentum, 0.9);
    int in1[4] = {p, gb, p, h};
    CHECK(node(g, "u1", MGE_OP_SGD, 4, in1, 0, NULL) < 0 && strstr(ug_err.msg, "grad is f32[4]"));
    int in2[4] = {p, gok, gb, h};
    CHECK(node(g, "u2", MGE_OP_SGD, 4, in2, 1, &mom) < 0 && strstr(ug_err.msg, "momentum_buffer"));
    int in3[4] = {p, gok, p, h3};
    CHECK(node(g, "u3", MGE_OP_SGD, 4, in3, 0, NULL) < 0 && strstr(ug_err.msg, "hyper"));
    int in4[5] = {p, gok, p, h, sc};
    CHECK(node(g, "u4", MGE_OP_SGD, 5, in4, 0, NULL) < 0 && strstr(ug_err.msg, "scale"));
    int in5[5] = {p, gok, gok, gb, h};
    CHECK(node(g, "u5", MGE_OP_ADAM, 5, in5, 0, NULL) < 0 && strstr(ug_err.msg, "exp_avg_sq"));
    CHECK(node(g, "s", MGE_OP_SUMSQ, 1, &gi, 0, NULL) < 0 && strstr(ug_err.msg, "float"));
    mge_attr mn = A_f(MGE_KEY_max_norm, 0);
    CHECK(node(g, "c", MGE_OP_CLIP_COEF, 1, &gok, 1, &mn) < 0 && strstr(ug_err.msg, "max_norm"));
    int in6[4] = {p, gok, p, h};
    int u = node(g, "u6", MGE_OP_SGD, 4, in6, 0, NULL);
    CHECK(u >= 0);
    /* no gradient through an optimizer op */
    if (u >= 0) {
        int dy = -1, dx[4] = {-1, -1, -1, -1};
        char want[4] = {1, 1, 1, 1};
        mge_grad_fn fn = mge_op_grad_fn(MGE_OP_SGD);
        CHECK(fn && fn(g, g->values[u].producer, &dy, want, dx, &err) == MGE_ERR_UNSUPPORTED);
        CHECK(strstr(err.msg, "no gradient") != NULL);
        CHECK(unit_flops(g, g->values[u].producer, 1) == 5 * 3);
    }
    /* a hyper never set (step 0) fails at run time, pointing at set_hyper */
    attach(g, p);
    attach(g, h);
    CHECK(mge_optim_set_hyper(g, h, 0.1, 0, &err) == MGE_ERR_INVALID);
    CHECK(mge_optim_set_hyper(g, p, 0.1, 1, &err) == MGE_ERR_INVALID);
    mge_tensor gt;
    CHECK_OK(mge_tensor_alloc(&gt, MGE_F32, 1, &d3, &err), err);
    for (int b = 0; b < 2 && u >= 0; b++) {
        mge_exec_opts o2 = {0};
        o2.backend = backends[b];
        o2.noutputs = 1;
        o2.outputs = &u;
        mge_exec *e = NULL;
        CHECK_OK(mge_exec_create(g, &o2, &e, &err), err);
        const mge_tensor *ins[1] = {&gt};
        CHECK(e && mge_exec_run(e, ins, &err) == MGE_ERR_INVALID);
        CHECK(strstr(err.msg, "mge_optim_set_hyper") != NULL);
        mge_exec_free(e);
    }
    mge_tensor_free(&gt);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- schedules */

static void test_sched(void)
{
    mge_sched s;
    CHECK_OK(mge_sched_parse("constant", 0.1, 0, 0, &s, &err), err);
    CHECK(mge_sched_lr(&s, 1) == 0.1 && mge_sched_lr(&s, 1000) == 0.1);
    CHECK_OK(mge_sched_parse(NULL, 0.1, 0, 0, &s, &err), err);
    CHECK(s.kind == MGE_SCHED_CONSTANT);

    CHECK_OK(mge_sched_parse("step:3:0.5", 0.1, 0, 0, &s, &err), err);
    CHECK_NEAR(mge_sched_lr(&s, 1), 0.1, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 3), 0.1, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 4), 0.05, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 7), 0.025, 1e-15);
    CHECK_OK(mge_sched_parse("step:10", 1, 0, 0, &s, &err), err);
    CHECK_NEAR(mge_sched_lr(&s, 10), 1, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 11), 0.1, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 21), 0.01, 1e-15);

    /* CosineAnnealingLR(T_max=100, eta_min=0.001): epoch e = step - 1 */
    CHECK_OK(mge_sched_parse("cosine:0.001", 0.1, 0, 100, &s, &err), err);
    CHECK_NEAR(mge_sched_lr(&s, 1), 0.1, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 51), 0.0505, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 26), 0.001 + 0.099 * (1 + cos(M_PI / 4)) / 2, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 101), 0.001, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 500), 0.001, 1e-15);
    CHECK_OK(mge_sched_parse("cosine", 0.1, 0, 10, &s, &err), err);
    CHECK(s.min_lr == 0);
    CHECK_NEAR(mge_sched_lr(&s, 11), 0, 1e-15);

    /* warm-up scales any schedule for the first steps */
    CHECK_OK(mge_sched_parse("cosine", 0.1, 5, 100, &s, &err), err);
    CHECK_NEAR(mge_sched_lr(&s, 1), 0.1 * (1 + cos(0)) / 2 / 5, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 3), 0.05 * (1 + cos(M_PI * 2 / 100)) * 3 / 5, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 5), 0.05 * (1 + cos(M_PI * 4 / 100)), 1e-15);
    CHECK_OK(mge_sched_parse("constant", 0.2, 4, 0, &s, &err), err);
    CHECK_NEAR(mge_sched_lr(&s, 2), 0.1, 1e-15);
    CHECK_NEAR(mge_sched_lr(&s, 4), 0.2, 1e-15);

    static const char *bad[] = {"", "foo", "step", "step:0", "step:x", "step:3:", "step:3:-1", "step:3:0.5:1",
                                "step:-2", "cosine:abc", "cosine:-1", "constant:1", "cosine:nan", "Step:3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mge_status st = mge_sched_parse(bad[i], 0.1, 0, 100, &s, &err);
        CHECK_MSG(st == MGE_ERR_INVALID, "'%s' accepted", bad[i]);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        CHECK_MSG(strstr(err.msg, quoted) && strstr(err.msg, "step:EVERY[:GAMMA]"), "'%s': %s", bad[i], err.msg);
    }
    CHECK(mge_sched_parse("cosine", 0.1, 0, 0, &s, &err) == MGE_ERR_INVALID && strstr(err.msg, "total"));
    CHECK(mge_sched_parse("constant", -0.1, 0, 0, &s, &err) == MGE_ERR_INVALID);
    CHECK(mge_sched_parse("constant", 0.1, -1, 0, &s, &err) == MGE_ERR_INVALID);
}

int main(void)
{
    RUN(test_sgd_rules);
    RUN(test_adam_rules);
    RUN(test_torch_values);
    RUN(test_cpu_ref_bits);
    RUN(test_sumsq_clip);
    RUN(test_build_clip);
    RUN(test_build_state);
    RUN(test_bad_options);
    RUN(test_sched);
    return unit_done();
}
