/* inputs.c — shapes, random data and --input records for mge-bench and
 * mge-prof (see inputs.h). */
#include "inputs.h"
#include "run_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int bench_shape_parse(bench_shapes *s, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        cli_usage("--shape %s: expected NAME=DIMS (e.g. x=1x3x224x224)", arg);
    bench_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.arg = arg;
    const char *p = eq + 1;
    for (;;) {
        if (*p < '0' || *p > '9')
            cli_usage("--shape %s: expected positive integers joined by 'x' after '='", arg);
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (errno || d <= 0 || d > (1LL << 40))
            cli_usage("--shape %s: dimension %d must be 1..%lld", arg, sh.ndim, 1LL << 40);
        if (sh.ndim == MGE_MAX_DIMS)
            cli_usage("--shape %s: more than %d dimensions", arg, MGE_MAX_DIMS);
        sh.dims[sh.ndim++] = d;
        p = end;
        if (!*p)
            break;
        if (*p != 'x' && *p != ',')
            cli_usage("--shape %s: expected positive integers joined by 'x' after '='", arg);
        p++;
    }
    size_t nl = (size_t)(eq - arg);
    for (int i = 0; i < s->n; i++)
        if (strlen(s->s[i].name) == nl && memcmp(s->s[i].name, arg, nl) == 0)
            cli_usage("--shape: input '%s' given twice", s->s[i].name);
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        bench_shape *ns = realloc(s->s, sizeof *ns * (size_t)cap);
        if (!ns) {
            cli_error(NULL, "out of memory");
            return -1;
        }
        s->s = ns;
        s->cap = cap;
    }
    if (!(sh.name = strndup(arg, nl))) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    s->s[s->n++] = sh;
    return 0;
}

void bench_shapes_free(bench_shapes *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->s[i].name);
    free(s->s);
    memset(s, 0, sizeof *s);
}

static char *dims_str(int ndim, const int64_t *dims, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && k < n; i++) {
        int w = dims[i] == MGE_DIM_N ? snprintf(buf + k, n - k, "%sN", i ? "x" : "")
                                      : snprintf(buf + k, n - k, "%s%lld", i ? "x" : "", (long long)dims[i]);
        if (w < 0)
            break;
        k += (size_t)w;
    }
    if (ndim == 0)
        snprintf(buf, n, "(scalar)");
    return buf;
}

/* Checks dims against the template of v; *nb gets the dims at N (-1 when
 * the template has no N), or -2 when they disagree among themselves.
 * Returns 1 when the rank and every fixed dim fit. */
static int fits(const mge_value *v, int ndim, const int64_t *dims, int64_t *nb)
{
    *nb = -1;
    if (ndim != v->ndim)
        return 0;
    for (int k = 0; k < ndim; k++) {
        if (v->dims[k] == MGE_DIM_N) {
            if (*nb == -1)
                *nb = dims[k];
            else if (*nb != dims[k])
                *nb = -2;
        } else if (v->dims[k] != dims[k]) {
            return 0;
        }
    }
    return 1;
}

static int has_n(const mge_value *v)
{
    for (int k = 0; k < v->ndim; k++)
        if (v->dims[k] == MGE_DIM_N)
            return 1;
    return 0;
}

/* Random data for t, whose dtype and shape are set and data allocated. */
static int fill_random(mge_tensor *t, mge_rng *r, int64_t classes, const char *where, const char *name)
{
    int64_t n = mge_tensor_numel(t);
    int64_t hi = classes > 0 ? classes : 10;
    for (int64_t i = 0; i < n; i++) {
        float u = 2.0f * mge_rng_uniform(r) - 1.0f;
        int64_t c = (int64_t)(mge_rng_next(r) % (uint64_t)hi);
        switch (t->dtype) {
        case MGE_F32: ((float *)t->data)[i] = u; break;
        case MGE_F16: ((uint16_t *)t->data)[i] = mge_f32_to_f16(u); break;
        case MGE_BF16: ((uint16_t *)t->data)[i] = mge_f32_to_bf16(u); break;
        case MGE_I8: ((int8_t *)t->data)[i] = (int8_t)(c % 10); break;
        case MGE_U8: ((uint8_t *)t->data)[i] = (uint8_t)(c % 10); break;
        case MGE_I32: ((int32_t *)t->data)[i] = (int32_t)c; break;
        case MGE_I64: ((int64_t *)t->data)[i] = c; break;
        case MGE_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)(c & 1); break;
        default:
            cli_error(where, "input '%s': no random data for dtype %s (give real data with --input)", name,
                      mge_dtype_name(t->dtype));
            return -1;
        }
    }
    return 0;
}

static int from_file(const mge_graph *g, const char *path, bench_inputs *b, int64_t batch)
{
    if (cli_stdin_ready(path, "NPY records", "give --input FILE or redirect stdin"))
        return -1;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    const char *fn = cli_name(path);
    if (!f) {
        cli_error(fn, "%s", strerror(errno));
        return -1;
    }
    mge_error err;
    mge_error_clear(&err);
    int rc = -1;
    int64_t fb = -1;      /* the batch the records carry */
    int first_n = -1;     /* the record that set fb */
    for (int i = 0; i < b->n; i++) {
        const mge_value *v = &g->values[b->values[i]];
        mge_status s = mge_npy_read(f, &b->t[i], &err);
        if (s == MGE_ERR_EOF) {
            cli_error(fn, "%d record%s, but the model needs %d (one per input: this one for '%s')", i,
                      i == 1 ? "" : "s", b->n, v->name);
            goto done;
        }
        if (s) {
            cli_error(fn, "record %d (input '%s'): %s", i + 1, v->name, err.msg);
            goto done;
        }
        const mge_tensor *t = &b->t[i];
        int64_t nb;
        char want[160], got[160];
        if (t->dtype != v->dtype || !fits(v, t->ndim, t->dims, &nb) || nb == -2) {
            cli_error(fn, "record %d is %s, but input '%s' is %s", i + 1,
                      mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got), v->name,
                      mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want));
            goto done;
        }
        if (nb >= 0 && fb >= 0 && nb != fb) {
            cli_error(fn, "record %d (input '%s') has batch %lld, record %d has %lld", i + 1, v->name,
                      (long long)nb, first_n + 1, (long long)fb);
            goto done;
        }
        if (nb >= 0 && fb < 0) {
            fb = nb;
            first_n = i;
        }
        b->ptr[i] = t;
    }
    if (batch > 0 && fb >= 0 && fb != batch) {
        cli_error(fn, "the records have batch %lld, but --batch is %lld", (long long)fb, (long long)batch);
        goto done;
    }
    b->batch = fb > 0 ? fb : 1;
    rc = 0;
done:
    if (f != stdin)
        fclose(f);
    return rc;
}

int bench_inputs_make(const mge_graph *g, const char *where, int nin, const int *inputs, const bench_shapes *shapes,
                      int64_t batch, const char *input_file, uint64_t seed, bench_inputs *out)
{
    memset(out, 0, sizeof *out);
    out->n = nin;
    out->values = calloc((size_t)nin + 1, sizeof *out->values);
    out->t = calloc((size_t)nin + 1, sizeof *out->t);
    out->ptr = calloc((size_t)nin + 1, sizeof *out->ptr);
    if (!out->values || !out->t || !out->ptr) {
        cli_error(NULL, "out of memory");
        goto fail;
    }
    memcpy(out->values, inputs, sizeof(int) * (size_t)nin);
    if (input_file) {
        if (from_file(g, input_file, out, batch))
            goto fail;
        return 0;
    }

    /* Every --shape must name an input and fit it; the N dims give the batch. */
    int64_t sb = -1;
    const char *sb_arg = NULL;
    int *shape_of = malloc(sizeof(int) * (size_t)(g->nvalues + 1));
    if (!shape_of) {
        cli_error(NULL, "out of memory");
        goto fail;
    }
    for (int v = 0; v < g->nvalues; v++)
        shape_of[v] = -1;
    for (int i = 0; shapes && i < shapes->n; i++) {
        const bench_shape *sh = &shapes->s[i];
        int v = mge_graph_find(g, sh->name);
        if (v < 0 || g->values[v].kind != MGE_VAL_INPUT) {
            char list[512];
            size_t k = 0;
            list[0] = 0;
            for (int j = 0; j < g->ninputs && k < sizeof list; j++) {
                int w = snprintf(list + k, sizeof list - k, "%s%s", j ? ", " : "", g->values[g->inputs[j]].name);
                if (w < 0)
                    break;
                k += (size_t)w;
            }
            cli_error(where, "--shape %s: the model has no input named '%s' (its inputs: %s)", sh->arg, sh->name,
                      g->ninputs ? list : "none");
            free(shape_of);
            goto fail;
        }
        const mge_value *val = &g->values[v];
        int64_t nb;
        char want[160], got[160];
        if (!fits(val, sh->ndim, sh->dims, &nb) || nb == -2) {
            char why[96];
            int k = 0;
            while (k < sh->ndim && k < val->ndim && (val->dims[k] == MGE_DIM_N || val->dims[k] == sh->dims[k]))
                k++;
            if (sh->ndim != val->ndim)
                snprintf(why, sizeof why, "rank %d, not %d", sh->ndim, val->ndim);
            else if (nb == -2)
                snprintf(why, sizeof why, "its batch dimensions (N) differ");
            else
                snprintf(why, sizeof why, "dimension %d is %lld, not %lld", k, (long long)sh->dims[k],
                         (long long)val->dims[k]);
            cli_error(where, "--shape %s does not fit input '%s' %s: %s", sh->arg, sh->name,
                      mge_shape_str(val->dtype, val->ndim, val->dims, want, sizeof want), why);
            free(shape_of);
            goto fail;
        }
        if (nb >= 0) {
            if (batch > 0 && nb != batch) {
                cli_error(where, "--shape %s gives batch %lld, but --batch is %lld (input '%s' is %s)", sh->arg,
                          (long long)nb, (long long)batch, sh->name, dims_str(val->ndim, val->dims, got, sizeof got));
                free(shape_of);
                goto fail;
            }
            if (sb >= 0 && nb != sb) {
                cli_error(where, "--shape %s gives batch %lld, but --shape %s gives %lld", sh->arg, (long long)nb,
                          sb_arg, (long long)sb);
                free(shape_of);
                goto fail;
            }
            sb = nb;
            sb_arg = sh->arg;
        }
        shape_of[v] = i;
    }
    int64_t B = batch > 0 ? batch : sb > 0 ? sb : 1;

    /* Class count for labels of a cross_entropy loss. */
    int logits = -1, labels = -1;
    run_data_classifier(g, &logits, &labels);
    int64_t classes = 0;
    if (logits >= 0 && g->values[logits].ndim >= 1 && g->values[logits].dims[g->values[logits].ndim - 1] > 0)
        classes = g->values[logits].dims[g->values[logits].ndim - 1];

    mge_rng r;
    mge_rng_seed(&r, seed);
    mge_error err;
    mge_error_clear(&err);
    int any_n = 0;
    for (int i = 0; i < nin; i++) {
        const mge_value *val = &g->values[inputs[i]];
        int64_t dims[MGE_MAX_DIMS];
        int si = shape_of[inputs[i]];
        for (int k = 0; k < val->ndim; k++)
            dims[k] = si >= 0 ? shapes->s[si].dims[k] : val->dims[k] == MGE_DIM_N ? B : val->dims[k];
        any_n |= has_n(val);
        if (mge_tensor_alloc(&out->t[i], val->dtype, val->ndim, dims, &err)) {
            cli_error(where, "input '%s': %s", val->name, err.msg);
            free(shape_of);
            goto fail;
        }
        if (fill_random(&out->t[i], &r, inputs[i] == labels ? classes : 0, where, val->name)) {
            free(shape_of);
            goto fail;
        }
        out->ptr[i] = &out->t[i];
    }
    free(shape_of);
    out->batch = any_n ? B : 1;
    return 0;
fail:
    bench_inputs_free(out);
    return -1;
}

void bench_inputs_free(bench_inputs *b)
{
    for (int i = 0; b->t && i < b->n; i++)
        mge_tensor_free(&b->t[i]);
    free(b->t);
    free(b->ptr);
    free(b->values);
    memset(b, 0, sizeof *b);
}
