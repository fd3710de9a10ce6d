/* test_train_guard.c — the trainer's guard (mge_train_opts.guard): a step
 * that overflows or gives a non-finite loss is undone exactly, params and
 * state included; with sparser snapshots the trainer goes back to the
 * snapshot and replaying the steps since gives the same bits; a finite step
 * whose update norm overflows f32 is kept; a model that is already
 * non-finite is refused; export never writes NaN or inf, guard or not. */
#include <math.h>

#include "internal.h"
#include "unit.h"

static mge_error err;

static mge_graph *parse(const char *src)
{
    mge_graph *g = NULL;
    if (mge_text_parse(src, strlen(src), ".", &g, &err)) {
        fprintf(stderr, "parse: %s\n", err.msg);
        return NULL;
    }
    if (mge_graph_init_params(g, 7, &err)) {
        fprintf(stderr, "init: %s\n", err.msg);
        mge_graph_free(g);
        return NULL;
    }
    return g;
}

static const char *mlp_src = "input x : f32[N,4]\n"
                             "input label : i32[N]\n"
                             "fc1 = linear(x, out=8)\n"
                             "act1 = relu(fc1)\n"
                             "fc2 = linear(act1, out=3)\n"
                             "loss = cross_entropy(fc2, label)\n"
                             "output fc2\n"
                             "minimize loss\n";

/* with batchnorm: running statistics are state the step writes */
static const char *bn_src = "input x : f32[N,4]\n"
                            "input label : i32[N]\n"
                            "fc1 = linear(x, out=8)\n"
                            "bn1 = batchnorm(fc1)\n"
                            "act1 = relu(bn1)\n"
                            "fc2 = linear(act1, out=3)\n"
                            "loss = cross_entropy(fc2, label)\n"
                            "output fc2\n"
                            "minimize loss\n";

/* guard: 0 off, else snapshots every guard steps (-1: by time) */
static mge_trainer *trainer(const mge_graph *g, mge_optim_kind kind, double momentum, int guard)
{
    mge_train_opts o;
    memset(&o, 0, sizeof o);
    mge_optim_defaults(kind, &o.optim);
    o.optim.momentum = momentum;
    o.threads = 2;
    o.guard = guard != 0;
    o.guard_every = guard > 0 ? guard : 0;
    mge_trainer *t = NULL;
    CHECK_OK(mge_trainer_create(g, &o, &t, &err), err);
    return t;
}

/* 8 samples: x = scale * (a fixed pattern), labels 0, 1, 2, ... */
static void batch(double scale, mge_tensor *x, mge_tensor *y)
{
    int64_t dx[2] = {8, 4}, dy[1] = {8};
    mge_tensor_alloc(x, MGE_F32, 2, dx, &err);
    mge_tensor_alloc(y, MGE_I32, 1, dy, &err);
    for (int i = 0; i < 32; i++)
        ((float *)x->data)[i] = (float)(scale * (((i * 7) % 11) - 5) / 5.0);
    for (int i = 0; i < 8; i++)
        ((int32_t *)y->data)[i] = i % 3;
}

static mge_status step(mge_trainer *t, double scale, double lr, int64_t k, mge_train_result *r)
{
    mge_tensor x, y;
    batch(scale, &x, &y);
    const mge_tensor *b[2] = {&x, &y};
    mge_error_clear(&err);
    mge_status s = mge_trainer_step(t, b, lr, k, r, &err);
    mge_tensor_free(&x);
    mge_tensor_free(&y);
    return s;
}

/* every param and state value (moments included) byte for byte */
static int same_values(const mge_graph *a, const mge_graph *b)
{
    int n = 0;
    for (int v = 0; v < a->nvalues; v++) {
        const mge_value *va = &a->values[v];
        if ((va->kind != MGE_VAL_PARAM && va->kind != MGE_VAL_STATE) || !va->data)
            continue;
        int w = mge_graph_find(b, va->name);
        if (w < 0 || !b->values[w].data || va->data->nbytes != b->values[w].data->nbytes ||
            memcmp(va->data->data, b->values[w].data->data, va->data->nbytes) != 0) {
            fprintf(stderr, "differs: %s\n", va->name);
            return 0;
        }
        n++;
    }
    return n > 0;
}

static int all_finite(const mge_graph *g)
{
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        if ((val->kind != MGE_VAL_PARAM && val->kind != MGE_VAL_STATE) || !val->data || val->dtype != MGE_F32)
            continue;
        for (int64_t i = 0; i < mge_tensor_numel(val->data); i++)
            if (!isfinite(((const float *)val->data->data)[i]))
                return 0;
    }
    return 1;
}

/* A step whose update overflows is undone: the trainer holds the step before
 * (momentum buffers too), the error names the step and the first param, and
 * training goes on from there. */
static void test_overflow_undone(void)
{
    mge_graph *g = parse(mlp_src);
    if (!g)
        return;
    mge_trainer *t = trainer(g, MGE_OPTIM_SGD, 0.9, 1);   /* a snapshot before every step */
    mge_train_result r;
    CHECK_OK(step(t, 1, 0.01, 1, &r), err);
    CHECK_OK(step(t, 1, 0.01, 2, &r), err);
    mge_graph *before = NULL, *after = NULL;
    CHECK_OK(mge_trainer_export(t, g, 1, &before, &err), err);
    /* inputs of 1e20 and lr 1e30: updates far beyond f32 */
    mge_status s = step(t, 1e20, 1e30, 3, &r);
    CHECK_MSG(s == MGE_ERR_NONFINITE, "status %s: %s", mge_status_name(s), err.msg);
    CHECK_MSG(strstr(err.msg, "step 3: the update made parameter fc1.weight non-finite") != NULL, "%s", err.msg);
    CHECK_OK(mge_trainer_export(t, g, 1, &after, &err), err);
    CHECK(before && after && same_values(before, after));
    CHECK(after && all_finite(after));
    /* the same step again at a sane rate trains on */
    CHECK_OK(step(t, 1, 0.01, 3, &r), err);
    CHECK(isfinite(r.loss));
    mge_graph_free(before);
    mge_graph_free(after);
    mge_trainer_free(t);
    mge_graph_free(g);
}

/* Snapshots every 3 steps: a failure at step 5 goes back to step 3, and
 * running step 4 again gives what a trainer that never failed has. The
 * same by time (guard_every 0), wherever its snapshot fell. */
static void test_replay(void)
{
    mge_graph *g = parse(bn_src);
    if (!g)
        return;
    for (int every = 3; every >= -1; every -= 4) {
        mge_trainer *a = trainer(g, MGE_OPTIM_ADAM, 0, every), *ref = trainer(g, MGE_OPTIM_ADAM, 0, 0);
        mge_train_result r;
        for (int k = 1; k <= 4; k++) {
            CHECK_OK(step(a, 1 + 0.1 * k, 0.01, k, &r), err);
            CHECK_OK(step(ref, 1 + 0.1 * k, 0.01, k, &r), err);
        }
        mge_tensor x, y;
        batch(1, &x, &y);
        ((float *)x.data)[0] = INFINITY;
        const mge_tensor *b[2] = {&x, &y};
        CHECK(mge_trainer_step(a, b, 0.01, 5, &r, &err) == MGE_ERR_NONFINITE);
        mge_tensor_free(&x);
        mge_tensor_free(&y);
        int64_t good = mge_trainer_good_step(a);
        if (every > 0)
            CHECK_MSG(good == 3, "good step %lld", (long long)good);
        CHECK_MSG(good >= 0 && good <= 4, "good step %lld", (long long)good);
        for (int64_t k = good + 1; k <= 4; k++)
            CHECK_OK(step(a, 1 + 0.1 * (double)k, 0.01, k, &r), err);
        mge_graph *ga = NULL, *gr = NULL;
        CHECK_OK(mge_trainer_export(a, g, 1, &ga, &err), err);
        CHECK_OK(mge_trainer_export(ref, g, 1, &gr, &err), err);
        CHECK(ga && gr && same_values(ga, gr));
        CHECK(mge_trainer_good_step(ref) == -1);
        mge_graph_free(ga);
        mge_graph_free(gr);
        mge_trainer_free(a);
        mge_trainer_free(ref);
    }
    mge_graph_free(g);
}

/* A NaN in the batch makes the loss NaN; the running statistics it touched
 * and the Adam moments come back too. */
static void test_nan_loss_undone(void)
{
    mge_graph *g = parse(bn_src);
    if (!g)
        return;
    mge_trainer *t = trainer(g, MGE_OPTIM_ADAM, 0, 1);
    mge_train_result r;
    CHECK_OK(step(t, 1, 0.01, 1, &r), err);
    mge_graph *before = NULL, *after = NULL;
    CHECK_OK(mge_trainer_export(t, g, 1, &before, &err), err);
    mge_tensor x, y;
    batch(1, &x, &y);
    ((float *)x.data)[5] = NAN;
    const mge_tensor *b[2] = {&x, &y};
    mge_status s = mge_trainer_step(t, b, 0.01, 2, &r, &err);
    CHECK_MSG(s == MGE_ERR_NONFINITE, "status %s: %s", mge_status_name(s), err.msg);
    CHECK_MSG(strstr(err.msg, "step 2: the loss is NaN") != NULL, "%s", err.msg);
    CHECK_OK(mge_trainer_export(t, g, 1, &after, &err), err);
    CHECK(before && after && same_values(before, after));
    mge_tensor_free(&x);
    mge_tensor_free(&y);
    mge_graph_free(before);
    mge_graph_free(after);
    mge_trainer_free(t);
    mge_graph_free(g);
}

/* Updates of about 1e20 per element: the squared norm overflows f32 but
 * every param stays finite, so the step is kept (the norm only triggers a
 * scan). */
static void test_big_finite_update_kept(void)
{
    mge_graph *g = parse(mlp_src);
    if (!g)
        return;
    mge_trainer *t = trainer(g, MGE_OPTIM_SGD, 0, 1);
    mge_train_result r;
    mge_status s = step(t, 1, 1e21, 1, &r);
    CHECK_MSG(s == MGE_OK, "status %s: %s", mge_status_name(s), err.msg);
    /* the norm the update node reported is not finite, the params are */
    const mge_exec *e = mge_trainer_exec(t);
    int inf_norms = 0;
    for (int i = 0; i < mge_exec_noutputs(e); i++) {
        const mge_tensor *o = mge_exec_result(e, i);
        const mge_value *ov = &mge_trainer_graph(t)->values[mge_exec_output(e, i)];
        if (o && o->ndim == 0 && strstr(ov->name, "__opt.sgd") && !isfinite(*(const float *)o->data))
            inf_norms++;
    }
    CHECK(inf_norms > 0);
    mge_graph *out = NULL;
    CHECK_OK(mge_trainer_export(t, g, 1, &out, &err), err);
    CHECK(out && all_finite(out));
    mge_graph_free(out);
    mge_trainer_free(t);
    mge_graph_free(g);
}

/* Without the guard nothing is checked per step, but export refuses. */
static void test_export_refuses(void)
{
    mge_graph *g = parse(mlp_src);
    if (!g)
        return;
    mge_trainer *t = trainer(g, MGE_OPTIM_SGD, 0, 0);
    mge_train_result r;
    CHECK_OK(step(t, 1e20, 1e30, 1, &r), err);
    mge_graph *out = (mge_graph *)1;
    mge_status s = mge_trainer_export(t, g, 0, &out, &err);
    CHECK_MSG(s == MGE_ERR_NONFINITE, "status %s: %s", mge_status_name(s), err.msg);
    CHECK_MSG(strstr(err.msg, "parameter fc1.weight holds non-finite values") != NULL, "%s", err.msg);
    CHECK(out == NULL);
    mge_trainer_free(t);
    mge_graph_free(g);
}

/* An optimizer moment that is not finite blocks an export with the state
 * and not one without it. */
static void test_export_moments(void)
{
    mge_graph *g = parse(mlp_src);
    if (!g)
        return;
    mge_trainer *t = trainer(g, MGE_OPTIM_ADAM, 0, 1);
    mge_train_result r;
    CHECK_OK(step(t, 1, 0.01, 1, &r), err);
    const mge_graph *tg = mge_trainer_graph(t);
    int v = mge_graph_find(tg, "fc2.bias.__opt.exp_avg_sq");
    CHECK(v >= 0);
    if (v >= 0) {
        ((float *)tg->values[v].data->data)[1] = INFINITY;
        mge_graph *out = NULL;
        mge_status s = mge_trainer_export(t, g, 1, &out, &err);
        CHECK_MSG(s == MGE_ERR_NONFINITE, "status %s: %s", mge_status_name(s), err.msg);
        CHECK_MSG(strstr(err.msg, "optimizer state fc2.bias.__opt.exp_avg_sq holds non-finite values (element 1 is inf)"),
                  "%s", err.msg);
        CHECK_OK(mge_trainer_export(t, g, 0, &out, &err), err);
        mge_graph_free(out);
    }
    mge_trainer_free(t);
    mge_graph_free(g);
}

/* A model that is non-finite before training: the guard refuses it at once,
 * rather than blame the first update. */
static void test_nonfinite_model(void)
{
    mge_graph *g = parse(mlp_src);
    if (!g)
        return;
    int v = mge_graph_find(g, "fc2.weight");
    CHECK(v >= 0);
    if (v < 0)
        return;
    ((float *)g->values[v].data->data)[4] = NAN;
    mge_train_opts o;
    memset(&o, 0, sizeof o);
    mge_optim_defaults(MGE_OPTIM_SGD, &o.optim);
    o.guard = 1;
    mge_trainer *t = NULL;
    mge_status s = mge_trainer_create(g, &o, &t, &err);
    CHECK_MSG(s == MGE_ERR_NONFINITE, "status %s: %s", mge_status_name(s), err.msg);
    CHECK_MSG(strstr(err.msg, "parameter fc2.weight holds non-finite values (element 4 is nan)"), "%s", err.msg);
    CHECK(t == NULL);
    o.guard = 0;
    CHECK_OK(mge_trainer_create(g, &o, &t, &err), err);
    mge_trainer_free(t);
    mge_graph_free(g);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_overflow_undone);
    RUN(test_nan_loss_undone);
    RUN(test_replay);
    RUN(test_big_finite_update_kept);
    RUN(test_export_refuses);
    RUN(test_export_moments);
    RUN(test_nonfinite_model);
    return unit_rerun_baseline(argv, "test_train_guard", unit_done());
}
