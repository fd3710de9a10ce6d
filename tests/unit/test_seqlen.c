/* test_seqlen.c — variable-length sequences: a dataset with a "lengths"
 * array feeds an input with a symbol at dim 1 in batches cut to their
 * longest sample, and a trainer steps through batches of different lengths. */
#include "internal.h"
#include "unit.h"

static mge_error err;

static char *sdup(const char *s)
{
    char *p = malloc(strlen(s) + 1);
    strcpy(p, s);
    return p;
}

/* x f32[n,S,2] with x[i,t,c] = 100 i + 10 t + c, label i32[n], lengths. */
static void make(mge_dataset *ds, int64_t n, int64_t S, const int64_t *len)
{
    memset(ds, 0, sizeof *ds);
    ds->n = 3;
    ds->names = calloc(3, sizeof *ds->names);
    ds->t = calloc(3, sizeof *ds->t);
    ds->names[0] = sdup("x");
    ds->names[1] = sdup("label");
    ds->names[2] = sdup("lengths");
    ds->count = n;
    int64_t dx[3] = {n, S, 2}, dl[1] = {n};
    mge_tensor_alloc(&ds->t[0], MGE_F32, 3, dx, NULL);
    mge_tensor_alloc(&ds->t[1], MGE_I32, 1, dl, NULL);
    mge_tensor_alloc(&ds->t[2], MGE_I64, 1, dl, NULL);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t t = 0; t < S; t++)
            for (int c = 0; c < 2; c++)
                ((float *)ds->t[0].data)[(i * S + t) * 2 + c] = t < len[i] ? (float)(100 * i + 10 * t + c) : 0;
        ((int32_t *)ds->t[1].data)[i] = (int32_t)(i % 3);
        ((int64_t *)ds->t[2].data)[i] = len[i];
    }
}

static mge_graph *model(int *in)
{
    mge_graph *g = NULL;
    const char *t = "input x : f32[N,S,2]\ninput label : i32[N]\n"
                    "h = linear(x, out=4)\nm = mean(h, axis=1)\nfc = linear(m, out=3)\n"
                    "loss = cross_entropy(fc, label)\noutput fc\nminimize loss\n";
    mge_error e;
    CHECK_MSG(mge_text_parse(t, strlen(t), NULL, &g, &e) == MGE_OK, "%s", e.msg);
    if (g) {
        in[0] = mge_graph_find(g, "x");
        in[1] = mge_graph_find(g, "label");
    }
    return g;
}

static void test_batches(void)
{
    const int64_t len[7] = {3, 1, 5, 2, 2, 4, 1};
    mge_dataset ds;
    make(&ds, 7, 5, len);
    int in[2];
    mge_graph *g = model(in);
    if (!g)
        return;
    CHECK_OK(mge_dataset_bind(&ds, g, 2, in, NULL, &err), err);
    CHECK(ds.lengths == 1 && ds.n == 3 && (ds.trim & 1u) && !(ds.trim & 2u));
    mge_loader *l = NULL;
    CHECK_OK(mge_loader_create(&ds, 3, 0, 0, 0, 1, &l, &err), err);
    const int64_t want[3] = {5, 4, 1}; /* max of {3,1,5}, {2,2,4}, {1} */
    for (int b = 0; b < 3; b++) {
        const mge_tensor *const *bt;
        CHECK_OK(mge_loader_next(l, &bt, &err), err);
        const mge_tensor *x = bt[0];
        CHECK_MSG(x->ndim == 3 && x->dims[1] == want[b] && x->dims[2] == 2, "batch %d: S=%lld", b,
                  (long long)x->dims[1]);
        for (int64_t r = 0; r < x->dims[0]; r++)
            for (int64_t t = 0; t < x->dims[1]; t++) {
                int64_t i = 3 * b + r;
                float v = ((const float *)x->data)[(r * x->dims[1] + t) * 2 + 1];
                CHECK(v == (t < len[i] ? (float)(100 * i + 10 * t + 1) : 0.0f));
            }
    }
    /* the trainer takes batches of different lengths, one plan each */
    mge_trainer *tr = NULL;
    mge_train_opts to;
    memset(&to, 0, sizeof to);
    CHECK_OK(mge_graph_init_params(g, 1, &err), err);
    CHECK_OK(mge_trainer_create(g, &to, &tr, &err), err);
    if (tr) {
        CHECK_OK(mge_loader_start(l, 1, 0, &err), err);
        const mge_tensor *const *bt;
        for (int64_t s = 1; mge_loader_next(l, &bt, &err) == MGE_OK; s++) {
            mge_train_result r;
            CHECK_OK(mge_trainer_step(tr, bt, 0.1, s, &r, &err), err);
            CHECK(isfinite(r.loss));
        }
        mge_trainer_free(tr);
    }
    mge_loader_free(l);
    mge_dataset_free(&ds);
    mge_graph_free(g);
}

static void test_bad_lengths(void)
{
    const int64_t len[3] = {2, 0, 6};
    mge_dataset ds;
    make(&ds, 3, 5, len);
    int in[2];
    mge_graph *g = model(in);
    if (!g)
        return;
    CHECK(mge_dataset_bind(&ds, g, 2, in, NULL, &err) == MGE_ERR_SHAPE);
    CHECK_MSG(strstr(err.msg, "lengths[1] is 0: must be 1 to 5"), "%s", err.msg);
    mge_dataset_free(&ds);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_batches);
    RUN(test_bad_lengths);
    return unit_done();
}
