/* run_topk.c — the K best classes per sample, with names from a labels file. */
#include "run_topk.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int run_topk_labels(run_topk *t, const char *path)
{
    void *buf;
    size_t n;
    int mapped;
    if (cli_slurp(path, &buf, &n, &mapped))
        return -1;
    const char *p = buf, *end = p + n;
    int64_t cap = 0;
    int rc = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        size_t len = (size_t)(e - p);
        if (len && p[len - 1] == '\r')
            len--;
        if (t->nnames == cap) {
            cap = cap ? 2 * cap : 1024;
            char **nn = realloc(t->names, sizeof *nn * (size_t)cap);
            if (!nn) {
                rc = -1;
                break;
            }
            t->names = nn;
        }
        if (!(t->names[t->nnames] = strndup(p, len))) {
            rc = -1;
            break;
        }
        t->nnames++;
        p = nl ? nl + 1 : end;
    }
    mge_file_unslurp(buf, n, mapped);
    if (rc) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    if (t->nnames == 0) {
        cli_error(cli_name(path), "no class names (expected one per line)");
        return -1;
    }
    t->names_path = path;
    return 0;
}

/* Fewer names than classes cannot name them all; more is most likely an
 * off-by-one (a "background" line) that would name every class wrongly. */
static int check_names(run_topk *t, const char *oname, int64_t c)
{
    if (t->nnames < c) {
        cli_error(cli_name(t->names_path), "%lld class names, but output '%s' has %lld classes", (long long)t->nnames,
                  oname, (long long)c);
        return -1;
    }
    if (t->nnames > c && t->seen == 0)
        cli_warn(cli_name(t->names_path), "%lld class names, but output '%s' has %lld classes: the last %lld are "
                 "not used", (long long)t->nnames, oname, (long long)c, (long long)(t->nnames - c));
    return 0;
}

void run_topk_free(run_topk *t)
{
    for (int64_t i = 0; i < t->nnames; i++)
        free(t->names[i]);
    free(t->names);
    mge_buf_free(&t->js);
    memset(t, 0, sizeof *t);
}

int run_topk_add(run_topk *t, const mge_tensor *out, const char *oname, const char *const *files)
{
    char so[128];
    int64_t c = out->ndim >= 2 ? out->dims[1] : -1;
    for (int i = 2; i < out->ndim; i++)
        if (out->dims[i] != 1)
            c = -1;
    if (c < 1) {
        cli_error(NULL, "--top-k: output '%s' is %s: class scores [N,C] are needed", oname,
                  mge_shape_str(out->dtype, out->ndim, out->dims, so, sizeof so));
        return -1;
    }
    if (t->k > c) {
        cli_error(NULL, "--top-k %d: output '%s' has only %lld classes", t->k, oname, (long long)c);
        return -1;
    }
    if (t->names && check_names(t, oname, c))
        return -1;
    int64_t *best = malloc(sizeof *best * (size_t)t->k);
    double *sc = malloc(sizeof *sc * (size_t)c);
    if (!best || !sc) {
        free(best);
        free(sc);
        cli_error(NULL, "out of memory");
        return -1;
    }
    for (int64_t s = 0; s < out->dims[0]; s++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < c; j++) {
            sc[j] = cli_tensor_value(out, s * c + j);
            if (sc[j] > mx)
                mx = sc[j];
        }
        if (t->softmax) {
            for (int64_t j = 0; j < c; j++)
                sum += (sc[j] = exp(sc[j] - mx));
            for (int64_t j = 0; j < c; j++)
                sc[j] /= sum;
        }
        /* insertion into the K best; NaN ranks last, ties keep the lower index */
        int nb = 0;
        for (int64_t j = 0; j < c; j++) {
            double v = isnan(sc[j]) ? -INFINITY : sc[j];
            int at = nb;
            while (at > 0 && v > (isnan(sc[best[at - 1]]) ? -INFINITY : sc[best[at - 1]]))
                at--;
            if (at >= t->k)
                continue;
            if (nb < t->k)
                nb++;
            memmove(best + at + 1, best + at, sizeof *best * (size_t)(nb - 1 - at));
            best[at] = j;
        }
        int64_t idx = t->seen + s;
        if (t->json) {
            if (t->js.n)
                mge_buf_put(&t->js, ", ", 2);
            mge_buf_printf(&t->js, "{\"sample\": %lld", (long long)idx);
            if (files) {
                mge_buf_put(&t->js, ", \"file\": ", 10);
                cli_json_str(&t->js, files[s]);
            }
            mge_buf_put(&t->js, ", \"classes\": [", 14);
            for (int r = 0; r < nb; r++)
                mge_buf_printf(&t->js, "%s%lld", r ? ", " : "", (long long)best[r]);
            mge_buf_put(&t->js, "], \"scores\": [", 14);
            for (int r = 0; r < nb; r++)
                mge_buf_printf(&t->js, isfinite(sc[best[r]]) ? "%s%.9g" : "%snull", r ? ", " : "", sc[best[r]]);
            mge_buf_put(&t->js, "]", 1);
            if (t->names) {
                mge_buf_put(&t->js, ", \"names\": [", 12);
                for (int r = 0; r < nb; r++) {
                    if (r)
                        mge_buf_put(&t->js, ", ", 2);
                    cli_json_str(&t->js, t->names[best[r]]);
                }
                mge_buf_put(&t->js, "]", 1);
            }
            mge_buf_put(&t->js, "}", 1);
        } else {
            for (int r = 0; r < nb; r++) {
                if (files)
                    printf("%s", files[s]);
                else
                    printf("%lld", (long long)idx);
                printf("\t%d\t%lld\t%.6g", r + 1, (long long)best[r], sc[best[r]]);
                if (t->names)
                    printf("\t%s", t->names[best[r]]);
                putchar('\n');
            }
        }
    }
    t->seen += out->dims[0];
    free(best);
    free(sc);
    if (t->js.failed) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    return 0;
}
