/* run_sink.c — mge-run's results: records per step or gathered, top-k,
 * metrics, JSON. Gathering exists because numpy's np.load reads one record
 * of a file and stops: a user who gets four records for 1000 samples sees
 * the first 256 rows and no warning. */
#include "run_sink.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct run_gather {
    int n;
    mge_tensor *t;   /* dtype and shape; dims[0] counts the rows gathered */
    mge_buf *b;      /* the bytes */
};

static void gather_free(run_gather *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        mge_buf_free(&g->b[i]);
    free(g->t);
    free(g->b);
    free(g);
}

static int gather_add(run_sink *s, const mge_graph *g, mge_exec *e)
{
    int n = mge_exec_noutputs(e);
    if (!s->gather) {
        run_gather *ga = calloc(1, sizeof *ga);
        if (ga) {
            ga->t = calloc((size_t)n, sizeof *ga->t);
            ga->b = calloc((size_t)n, sizeof *ga->b);
            ga->n = n;
        }
        if (!ga || !ga->t || !ga->b) {
            gather_free(ga);
            cli_error(NULL, "out of memory");
            return -1;
        }
        s->gather = ga;
    }
    run_gather *ga = s->gather;
    for (int k = 0; k < n; k++) {
        const mge_tensor *t = mge_exec_result(e, k);
        mge_tensor *acc = &ga->t[k];
        const char *name = g->values[mge_exec_output(e, k)].name;
        char sa[128], sb[128];
        if (t->q.nscale > 0) {
            cli_error(NULL, "output '%s' is quantized (%s): its records cannot be gathered into one; write them "
                      "per step (NPY streams without --concat)", name, mge_dtype_name(t->dtype));
            return -1;
        }
        /* a scalar per step gathers into a vector */
        int nd = t->ndim ? t->ndim : 1;
        int64_t rows = t->ndim ? t->dims[0] : 1;
        if (s->steps == 0) {
            acc->dtype = t->dtype;
            acc->ndim = nd;
            acc->dims[0] = 0;
            for (int i = 1; i < nd; i++)
                acc->dims[i] = t->dims[i];
        } else {
            int same = acc->dtype == t->dtype && acc->ndim == nd;
            for (int i = 1; same && i < nd; i++)
                same = acc->dims[i] == t->dims[i];
            if (!same) {
                int64_t d0 = acc->dims[0];
                acc->dims[0] = -1;
                cli_error(NULL, "output '%s' is %s in step %d but %s in the steps before: records of different "
                          "shapes cannot be gathered into one (write them per step: no --concat, no .npz)", name,
                          mge_shape_str(t->dtype, t->ndim, t->dims, sa, sizeof sa), s->steps,
                          mge_shape_str(acc->dtype, acc->ndim, acc->dims, sb, sizeof sb));
                acc->dims[0] = d0;
                return -1;
            }
        }
        if (!mge_buf_put(&ga->b[k], t->data, t->nbytes) && t->nbytes) {
            cli_error(NULL, "out of memory gathering output '%s' (%lld rows so far)", name, (long long)acc->dims[0]);
            return -1;
        }
        acc->dims[0] += rows;
    }
    return 0;
}

int run_sink_step(run_sink *s, const mge_graph *g, mge_exec *e, const mge_tensor *labels, const char *labels_name,
                  const char *const *files)
{
    mge_error err;
    mge_error_clear(&err);
    FILE *f = s->out ? s->out->f : NULL;
    if (f && s->concat) {
        if (gather_add(s, g, e))
            return -1;
    } else if (f) {
        for (int k = 0; k < mge_exec_noutputs(e); k++)
            if (mge_npy_write(f, mge_exec_result(e, k), &err)) {
                cli_mge_error(s->out_name, &err);
                return -1;
            }
        if (fflush(f)) {
            cli_error(s->out_name, "write failed: %s", strerror(errno));
            return -1;
        }
    }
    if (s->score_k >= 0) {
        const mge_tensor *t = mge_exec_result(e, s->score_k);
        const char *name = g->values[mge_exec_output(e, s->score_k)].name;
        if (s->metrics && labels && run_metrics_add(s->metrics, t, name, labels, labels_name))
            return -1;
        if (s->topk && run_topk_add(s->topk, t, name, files))
            return -1;
        if (s->topk && !s->json && cli_stdout_flush())
            return -1;
    }
    s->steps++;
    return 0;
}

static int write_gathered(run_sink *s, const mge_graph *g, mge_exec *e)
{
    mge_error err;
    mge_error_clear(&err);
    run_gather *ga = s->gather;
    FILE *f = s->out->f;
    if (s->npz) {
        mge_tlist l = {0};
        mge_buf z = {0};
        int rc = 0;
        for (int k = 0; ga && k < ga->n && !rc; k++) {
            mge_tensor t = ga->t[k];
            t.data = ga->b[k].p;
            t.nbytes = ga->b[k].n;
            t.flags = 0;   /* the bytes stay the gather's */
            if (mge_tlist_add(&l, g->values[mge_exec_output(e, k)].name, &t, &err)) {
                cli_mge_error(s->out_name, &err);
                rc = -1;
            }
        }
        if (!rc && mge_npz_write(&l, &z, &err)) {
            cli_mge_error(s->out_name, &err);
            rc = -1;
        }
        if (!rc && fwrite(z.p, 1, z.n, f) != z.n) {
            cli_error(s->out_name, "write failed: %s", strerror(errno));
            rc = -1;
        }
        mge_tlist_free(&l);
        mge_buf_free(&z);
        return rc;
    }
    for (int k = 0; ga && k < ga->n; k++) {
        mge_tensor t = ga->t[k];
        t.data = ga->b[k].p;
        t.nbytes = ga->b[k].n;
        if (mge_npy_write(f, &t, &err)) {
            cli_mge_error(s->out_name, &err);
            return -1;
        }
    }
    return 0;
}

int run_sink_finish(run_sink *s, const mge_graph *g, mge_exec *e)
{
    if (s->out && s->out->f && s->concat && write_gathered(s, g, e))
        return -1;
    if (s->json) {
        mge_buf b = {0};
        mge_buf_put(&b, "{\"output\": ", 11);
        cli_json_str(&b, s->score_k >= 0 ? g->values[mge_exec_output(e, s->score_k)].name : "");
        mge_buf_put(&b, ", ", 2);
        if (s->metrics)
            run_metrics_json(s->metrics, &b);
        else
            mge_buf_printf(&b, "\"samples\": %lld", (long long)(s->topk ? s->topk->seen : 0));
        if (s->topk) {
            mge_buf_put(&b, ", \"top_k\": [", 12);
            mge_buf_put(&b, s->topk->js.p ? s->topk->js.p : "", s->topk->js.n);
            mge_buf_put(&b, "]", 1);
        }
        mge_buf_put(&b, "}\n", 2);
        if (b.failed) {
            mge_buf_free(&b);
            cli_error(NULL, "out of memory");
            return -1;
        }
        fwrite(b.p, 1, b.n, stdout);
        mge_buf_free(&b);
    } else if (s->metrics) {
        run_metrics_print(s->metrics);
    }
    return cli_stdout_flush();
}

void run_sink_free(run_sink *s)
{
    gather_free(s->gather);
    s->gather = NULL;
}
