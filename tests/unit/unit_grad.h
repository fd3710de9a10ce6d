/* unit_grad.h — finite-difference checks of gradient rules for tests/unit.
 *
 * gc_check(g, out, given, tol, training) differentiates
 *     loss = sum(out * R)          (R: a fixed random tensor of out's shape)
 * by seeding d(loss)/d(out) = R (mge_grad_build_from, so only the rules of
 * the ops under test are involved) with respect to every float graph input and every
 * param, runs the gradient graph on the "ref" and "cpu" backends, and
 * compares:
 *   - ref gradients with central differences of the loss (ref backend),
 *     on up to GC_POINTS elements of each input: the error of an element is
 *     |analytic - numeric| / (|numeric| + 0.05 * max|numeric| of that input + 1e-3);
 *   - cpu gradients with ref gradients (relative to the tensor's max |ref|).
 * Graph inputs must have concrete shapes (no N). given[i] (may be NULL, or
 * hold NULLs) supplies data for graph input i (labels, indices); others get
 * uniform(-1, 1). Params without data get uniform(-1, 1), state without data
 * uniform(0.5, 1.5) (variances), integer state zeros. Training mode reseeds
 * the generator before every run, so dropout masks repeat. Returns the worst
 * error found (CHECKs it against tol; cpu against tol too). */
#ifndef MGE_UNIT_GRAD_H
#define MGE_UNIT_GRAD_H
#include "internal.h"
#include "unit.h"

#define GC_POINTS 24

static mge_error gc_err;

static void gc_fill(mge_tensor *t, mge_rng *r, float lo, float hi)
{
    int64_t n = mge_tensor_numel(t);
    if (t->dtype == MGE_F32)
        for (int64_t i = 0; i < n; i++)
            ((float *)t->data)[i] = lo + (hi - lo) * mge_rng_uniform(r);
}

static float *gc_elem(mge_tensor *t, int64_t i)
{
    return (float *)t->data + i;
}

/* Runs e on the graph inputs it needs (ins holds all graph inputs, in order). */
static mge_status gc_run(const mge_graph *g, mge_exec *e, const mge_tensor *const *ins)
{
    const mge_tensor *argv[64];
    int n = mge_exec_ninputs(e);
    for (int i = 0; i < n && i < 64; i++)
        for (int k = 0; k < g->ninputs; k++)
            if (g->inputs[k] == mge_exec_input(e, i))
                argv[i] = ins[k];
    return mge_exec_run(e, argv, &gc_err);
}

/* sum(out * R) at the current data (ref backend, output 0 = out). */
static double gc_loss(const mge_graph *g, mge_exec *e, const mge_tensor *R, const mge_tensor *const *ins,
                      int training, int *ok)
{
    if (training)
        mge_exec_set_seed(e, 42);
    if (gc_run(g, e, ins)) {
        fprintf(stderr, "gc: forward run: %s\n", gc_err.msg);
        *ok = 0;
        return 0;
    }
    const mge_tensor *y = mge_exec_result(e, 0);
    double s = 0;
    for (int64_t i = 0; i < mge_tensor_numel(R); i++)
        s += (double)((const float *)y->data)[i] * ((const float *)R->data)[i];
    return s;
}

static double gc_check(mge_graph *g, int out, const mge_tensor *const *given, double tol, int training)
{
    mge_rng r;
    mge_rng_seed(&r, 1234);
    double worst = 0;
    int ok = 1;
    const mge_value *ov = &g->values[out];
    if (ov->dtype != MGE_F32) {
        fprintf(stderr, "gc: output '%s' is not f32\n", ov->name);
        CHECK(0);
        return 1e9;
    }
    /* d(loss)/d(out) = R, a const; the loss itself is summed on the host */
    mge_tensor *R = calloc(1, sizeof *R);
    CHECK_OK(mge_tensor_alloc(R, MGE_F32, ov->ndim, ov->dims, &gc_err), gc_err);
    gc_fill(R, &r, -1, 1);
    int rv = mge_graph_add_value(g, "gc.R", MGE_VAL_CONST, MGE_F32, ov->ndim, ov->dims, &gc_err);
    CHECK(rv >= 0);
    if (rv < 0)
        return 1e9;
    g->values[rv].data = R;
    int loss = out;
    /* data for inputs, params and state */
    int nin = g->ninputs;
    mge_tensor *inb = calloc((size_t)(nin ? nin : 1), sizeof *inb);
    const mge_tensor **ins = calloc((size_t)(nin ? nin : 1), sizeof *ins);
    int *wrt = calloc((size_t)g->nvalues, sizeof *wrt), nwrt = 0;
    for (int i = 0; i < nin; i++) {
        const mge_value *v = &g->values[g->inputs[i]];
        if (given && given[i]) {
            CHECK_OK(mge_tensor_copy(&inb[i], given[i], &gc_err), gc_err);
        } else {
            CHECK_OK(mge_tensor_alloc(&inb[i], v->dtype, v->ndim, v->dims, &gc_err), gc_err);
            gc_fill(&inb[i], &r, -1, 1);
        }
        ins[i] = &inb[i];
        if (v->dtype == MGE_F32)
            wrt[nwrt++] = g->inputs[i];
    }
    for (int v = 0; v < g->nvalues; v++) {
        mge_value *val = &g->values[v];
        if (val->kind != MGE_VAL_PARAM && val->kind != MGE_VAL_STATE)
            continue;
        if (!val->data) {
            val->data = calloc(1, sizeof *val->data);
            CHECK_OK(mge_tensor_alloc(val->data, val->dtype, val->ndim, val->dims, &gc_err), gc_err);
            if (val->kind == MGE_VAL_PARAM)
                gc_fill(val->data, &r, -1, 1);
            else
                gc_fill(val->data, &r, 0.5f, 1.5f);
        }
        if (val->kind == MGE_VAL_PARAM && val->dtype == MGE_F32)
            wrt[nwrt++] = v;
    }
    int *grads = calloc((size_t)(nwrt ? nwrt : 1), sizeof *grads);
    mge_status st = mge_grad_build_from(g, out, rv, nwrt, wrt, grads, &gc_err);
    CHECK_MSG(st == MGE_OK, "grad_build: %s", gc_err.msg);
    if (st != MGE_OK)
        return 1e9;
    int *outs = calloc((size_t)(nwrt ? nwrt : 1), sizeof *outs), nouts = 0;
    for (int i = 0; i < nwrt; i++)
        if (grads[i] >= 0)
            outs[nouts++] = grads[i];
    CHECK_MSG(nouts > 0, "no gradient reached any input");

    mge_exec *ef = NULL, *eref = NULL, *ecpu = NULL;
    mge_exec_opts fo = {.backend = "ref", .noutputs = 1, .outputs = &loss, .training = training};
    mge_exec_opts ro = {.backend = "ref", .noutputs = nouts, .outputs = outs, .training = training};
    mge_exec_opts co = {.backend = "cpu", .threads = 2, .noutputs = nouts, .outputs = outs, .training = training};
    CHECK_OK(mge_exec_create(g, &fo, &ef, &gc_err), gc_err);
    CHECK_OK(mge_exec_create(g, &ro, &eref, &gc_err), gc_err);
    CHECK_OK(mge_exec_create(g, &co, &ecpu, &gc_err), gc_err);
    if (!ef || !eref || !ecpu || nouts == 0)
        return 1e9;
    if (training) {
        mge_exec_set_seed(eref, 42);
        mge_exec_set_seed(ecpu, 42);
    }
    CHECK_OK(gc_run(g, eref, (const mge_tensor *const *)ins), gc_err);
    CHECK_OK(gc_run(g, ecpu, (const mge_tensor *const *)ins), gc_err);

    int oi = 0;
    for (int w = 0; w < nwrt && ok; w++) {
        if (grads[w] < 0)
            continue;
        const mge_tensor *ga = mge_exec_result(eref, oi), *gcpu = mge_exec_result(ecpu, oi);
        oi++;
        if (!ga || !gcpu) {
            CHECK(0);
            break;
        }
        const mge_value *wv = &g->values[wrt[w]];
        /* the element data to perturb */
        mge_tensor *x = NULL;
        for (int i = 0; i < nin; i++)
            if (g->inputs[i] == wrt[w])
                x = &inb[i];
        if (!x)
            x = wv->data;
        int64_t n = mge_tensor_numel(x);
        /* cpu vs ref */
        double gmax = 0, cerr = 0;
        for (int64_t i = 0; i < n; i++)
            if (fabs(((const float *)ga->data)[i]) > gmax)
                gmax = fabs(((const float *)ga->data)[i]);
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)((const float *)ga->data)[i] - ((const float *)gcpu->data)[i]) / (gmax + 1e-6);
            if (d > cerr)
                cerr = d;
        }
        CHECK_MSG(cerr <= tol, "'%s': cpu gradient differs from ref by %g (relative to max %g)", wv->name, cerr, gmax);
        /* central differences */
        int64_t npts = n < GC_POINTS ? n : GC_POINTS;
        double num[GC_POINTS], ana[GC_POINTS], nmax = 0;
        for (int64_t k = 0; k < npts; k++) {
            int64_t i = n <= GC_POINTS ? k : (int64_t)(mge_rng_next(&r) % (uint64_t)n);
            float *p = gc_elem(x, i), x0 = *p;
            const float h = 1e-3f;
            *p = x0 + h;
            double lp = gc_loss(g, ef, R, (const mge_tensor *const *)ins, training, &ok);
            *p = x0 - h;
            double lm = gc_loss(g, ef, R, (const mge_tensor *const *)ins, training, &ok);
            *p = x0;
            num[k] = (lp - lm) / (2.0 * (double)h);
            ana[k] = ((const float *)ga->data)[i];
            if (fabs(num[k]) > nmax)
                nmax = fabs(num[k]);
        }
        for (int64_t k = 0; k < npts; k++) {
            double e = fabs(ana[k] - num[k]) / (fabs(num[k]) + 0.05 * nmax + 1e-3);
            if (e > worst)
                worst = e;
            CHECK_MSG(e <= tol, "'%s' element sample %lld: analytic %g, numeric %g", wv->name, (long long)k, ana[k],
                      num[k]);
        }
    }
    CHECK(ok);
    mge_exec_free(ef);
    mge_exec_free(eref);
    mge_exec_free(ecpu);
    for (int i = 0; i < nin; i++)
        mge_tensor_free(&inb[i]);
    free(inb);
    free(ins);
    free(wrt);
    free(grads);
    free(outs);
    return worst;
}
#endif
