/* run_metrics.c — accuracy, top-K and regression scores over batches. */
#include "run_metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { M_TOPK, M_MSE, M_RMSE, M_MAE, M_R2 };

typedef struct metric {
    int kind;
    int k;              /* M_TOPK: K (accuracy is top-1) */
    char name[16];
    int64_t hits;       /* M_TOPK */
} metric;

#define MAX_METRICS 16

struct run_metrics {
    int n;
    metric m[MAX_METRICS];
    int classes, regress;   /* any metric of each family */
    int64_t samples;
    /* regression: per output value (column) c of a sample */
    int64_t cols;
    double *mean, *m2, *ss_res;   /* Welford's running mean and M2 of the labels, squared error */
    double sum_abs, sum_sq;
};

run_metrics *run_metrics_parse(const char *opt, const char *list)
{
    run_metrics *m = calloc(1, sizeof *m);
    char *copy = strdup(list);
    if (!m || !copy) {
        free(m);
        free(copy);
        cli_error(NULL, "out of memory");
        return NULL;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        metric x = {0};
        if (strcmp(t, "accuracy") == 0 || strcmp(t, "top1") == 0) {
            x.kind = M_TOPK;
            x.k = 1;
        } else if (strncmp(t, "top", 3) == 0 && t[3] >= '1' && t[3] <= '9') {
            char *end;
            errno = 0;
            long k = strtol(t + 3, &end, 10);
            if (*end || errno || k > 1000000)
                cli_usage("%s: '%s': expected topK with K from 1 to 1000000 (top5)", opt, t);
            x.kind = M_TOPK;
            x.k = (int)k;
        } else if (strcmp(t, "mse") == 0) {
            x.kind = M_MSE;
        } else if (strcmp(t, "rmse") == 0) {
            x.kind = M_RMSE;
        } else if (strcmp(t, "mae") == 0) {
            x.kind = M_MAE;
        } else if (strcmp(t, "r2") == 0) {
            x.kind = M_R2;
        } else {
            cli_usage("%s: unknown metric '%s' (accuracy, topK such as top5, mse, rmse, mae, r2)", opt, t);
        }
        if (x.kind == M_TOPK && x.k == 1)
            snprintf(x.name, sizeof x.name, "accuracy");
        else if (x.kind == M_TOPK)
            snprintf(x.name, sizeof x.name, "top%d", x.k);
        else
            snprintf(x.name, sizeof x.name, "%s", t);
        for (int i = 0; i < m->n; i++)
            if (strcmp(m->m[i].name, x.name) == 0)
                cli_usage("%s: '%s' is listed twice", opt, t);
        if (m->n == MAX_METRICS)
            cli_usage("%s: more than %d metrics", opt, MAX_METRICS);
        m->classes |= x.kind == M_TOPK;
        m->regress |= x.kind != M_TOPK;
        m->m[m->n++] = x;
    }
    free(copy);
    if (m->n == 0)
        cli_usage("%s: no metric named in '%s'", opt, list);
    return m;
}

void run_metrics_free(run_metrics *m)
{
    if (!m)
        return;
    free(m->mean);
    free(m->m2);
    free(m->ss_res);
    free(m);
}

static int64_t per_sample(const mge_tensor *t)
{
    return t->ndim == 0 || t->dims[0] == 0 ? 0 : mge_tensor_numel(t) / t->dims[0];
}

/* Classes of a score tensor [N,C,1,...], or -1. */
static int64_t class_count(const mge_tensor *t)
{
    if (t->ndim < 2)
        return -1;
    for (int i = 2; i < t->ndim; i++)
        if (t->dims[i] != 1)
            return -1;
    return t->dims[1];
}

static const char *first_of(const run_metrics *m, int classes)
{
    for (int i = 0; i < m->n; i++)
        if ((m->m[i].kind == M_TOPK) == classes)
            return m->m[i].name;
    return "";
}

static int add_classes(run_metrics *m, const mge_tensor *out, const char *oname, const mge_tensor *lab,
                       const char *lname)
{
    char so[128], sl[128];
    int64_t n = out->dims[0], c = class_count(out);
    mge_shape_str(out->dtype, out->ndim, out->dims, so, sizeof so);
    mge_shape_str(lab->dtype, lab->ndim, lab->dims, sl, sizeof sl);
    const char *what = first_of(m, 1);
    if (c < 1) {
        cli_error(NULL, "--metrics %s: output '%s' is %s: %s needs class scores [N,C]%s", what, oname, so, what,
                  out->ndim == 1 ? " (a regression output? use mse, rmse, mae or r2)" : "");
        return -1;
    }
    if (per_sample(lab) != 1) {
        cli_error(NULL, "--metrics %s: the labels (%s) are %s: %s needs one class index per sample, [N]", what, lname,
                  sl, what);
        return -1;
    }
    for (int i = 0; i < m->n; i++)
        if (m->m[i].kind == M_TOPK && m->m[i].k > c) {
            cli_error(NULL, "--metrics %s: output '%s' has %lld classes, fewer than %d", m->m[i].name, oname,
                      (long long)c, m->m[i].k);
            return -1;
        }
    for (int64_t s = 0; s < n; s++) {
        double y = cli_tensor_value(lab, s);
        if (!(y >= 0 && y < (double)c && y == floor(y))) {
            cli_error(NULL, "--metrics %s: label %g of sample %lld (%s) is not a class of output '%s' (0 to %lld)",
                      what, y, (long long)(m->samples + s), lname, oname, (long long)c - 1);
            return -1;
        }
        int64_t yi = (int64_t)y, rank = 0;
        double sy = cli_tensor_value(out, s * c + yi);
        if (isnan(sy)) {
            rank = c;
        } else {
            for (int64_t j = 0; j < c; j++) {
                double sj = cli_tensor_value(out, s * c + j);
                rank += sj > sy || (sj == sy && j < yi);
            }
        }
        for (int i = 0; i < m->n; i++)
            if (m->m[i].kind == M_TOPK)
                m->m[i].hits += rank < m->m[i].k;
    }
    return 0;
}

static int add_regress(run_metrics *m, const mge_tensor *out, const char *oname, const mge_tensor *lab,
                       const char *lname)
{
    char so[128], sl[128];
    int64_t n = out->dims[0], cols = per_sample(out);
    if (per_sample(lab) != cols || cols == 0) {
        const char *what = first_of(m, 0);
        cli_error(NULL, "--metrics %s: output '%s' is %s but the labels (%s) are %s: %s needs one label per output "
                  "value", what, oname, mge_shape_str(out->dtype, out->ndim, out->dims, so, sizeof so), lname,
                  mge_shape_str(lab->dtype, lab->ndim, lab->dims, sl, sizeof sl), what);
        return -1;
    }
    if (!m->mean) {
        m->cols = cols;
        m->mean = calloc((size_t)cols, sizeof(double));
        m->m2 = calloc((size_t)cols, sizeof(double));
        m->ss_res = calloc((size_t)cols, sizeof(double));
        if (!m->mean || !m->m2 || !m->ss_res) {
            cli_error(NULL, "out of memory");
            return -1;
        }
    } else if (m->cols != cols) {
        cli_error(NULL, "--metrics: output '%s' changed from %lld to %lld values per sample", oname,
                  (long long)m->cols, (long long)cols);
        return -1;
    }
    for (int64_t s = 0; s < n; s++) {
        double cnt = (double)(m->samples + s + 1);
        for (int64_t k = 0; k < cols; k++) {
            double y = cli_tensor_value(lab, s * cols + k), p = cli_tensor_value(out, s * cols + k);
            double d = p - y, dm = y - m->mean[k];
            m->mean[k] += dm / cnt;
            m->m2[k] += dm * (y - m->mean[k]);
            m->ss_res[k] += d * d;
            m->sum_sq += d * d;
            m->sum_abs += fabs(d);
        }
    }
    return 0;
}

int run_metrics_add(run_metrics *m, const mge_tensor *out, const char *oname, const mge_tensor *labels,
                    const char *lname)
{
    char so[128], sl[128];
    if (out->ndim < 1 || labels->ndim < 1 || out->dims[0] != labels->dims[0]) {
        cli_error(NULL, "--metrics: output '%s' is %s but the labels (%s) are %s: the sample counts differ", oname,
                  mge_shape_str(out->dtype, out->ndim, out->dims, so, sizeof so), lname,
                  mge_shape_str(labels->dtype, labels->ndim, labels->dims, sl, sizeof sl));
        return -1;
    }
    if (m->classes && add_classes(m, out, oname, labels, lname))
        return -1;
    if (m->regress && add_regress(m, out, oname, labels, lname))
        return -1;
    m->samples += out->dims[0];
    return 0;
}

static double value(const run_metrics *m, const metric *x)
{
    double nv = (double)m->samples * (double)m->cols;
    switch (x->kind) {
    case M_TOPK: return m->samples ? (double)x->hits / (double)m->samples : 0;
    case M_MSE: return nv ? m->sum_sq / nv : 0;
    case M_RMSE: return nv ? sqrt(m->sum_sq / nv) : 0;
    case M_MAE: return nv ? m->sum_abs / nv : 0;
    default: {
        double r = 0;
        for (int64_t k = 0; k < m->cols; k++)
            r += m->m2[k] > 0 ? 1 - m->ss_res[k] / m->m2[k] : m->ss_res[k] == 0 ? 1 : 0;
        return m->cols ? r / (double)m->cols : 0;
    }
    }
}

void run_metrics_print(const run_metrics *m)
{
    for (int i = 0; i < m->n; i++) {
        const metric *x = &m->m[i];
        if (x->kind == M_TOPK)
            printf("%s %.4f (%lld of %lld)\n", x->name, value(m, x), (long long)x->hits, (long long)m->samples);
        else
            printf("%s %.6g\n", x->name, value(m, x));
    }
}

void run_metrics_json(const run_metrics *m, mge_buf *b)
{
    mge_buf_printf(b, "\"samples\": %lld", (long long)m->samples);
    for (int i = 0; i < m->n; i++) {
        const metric *x = &m->m[i];
        mge_buf_printf(b, ", \"%s\": %.9g", x->name, value(m, x));
        if (x->kind == M_TOPK)
            mge_buf_printf(b, ", \"%s_correct\": %lld", x->name, (long long)x->hits);
    }
}
