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

/* Binds the symbolic dims of template v to dims into b (src[i] says where
 * b's entry i came from, for messages). Returns 0, or -1 with why set. */
int bench_bind_dims(const mge_value *v, int ndim, const int64_t *dims, mge_binding *b, const char **src,
                    const char *here, char *why, size_t n)
{
    if (ndim != v->ndim) {
        snprintf(why, n, "rank %d, not %d", ndim, v->ndim);
        return -1;
    }
    for (int k = 0; k < ndim; k++) {
        if (v->dims[k] >= 0) {
            if (v->dims[k] != dims[k]) {
                snprintf(why, n, "dimension %d is %lld, not %lld", k, (long long)dims[k], (long long)v->dims[k]);
                return -1;
            }
            continue;
        }
        int64_t have;
        const char *sn = mge_dim_name(v->dims[k]);
        if (mge_binding_get(b, v->dims[k], &have)) {
            if (have != dims[k]) {
                int j = 0;
                while (b->sym[j] != v->dims[k])
                    j++;
                snprintf(why, n, "%s is %lld from %s but %lld from %s", sn ? sn : "?", (long long)have, src[j],
                         (long long)dims[k], here);
                return -1;
            }
            continue;
        }
        if (b->n == MGE_MAX_SYMS || mge_binding_set(b, v->dims[k], dims[k], NULL)) {
            snprintf(why, n, "too many symbols");
            return -1;
        }
        src[b->n - 1] = here;
    }
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
        case MGE_F64: ((double *)t->data)[i] = u; break;
        case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64: mge_dtype_set(t->dtype, t->data, i, (double)c); break;
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
    const char *src[MGE_MAX_SYMS];
    char here[MGE_MAX_SYMS][48];
    if (batch > 0) {
        mge_binding_set(&b->bind, MGE_DIM_N, batch, NULL);
        src[0] = "--batch";
    }
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
        char want[160], got[160], why[256];
        snprintf(here[i < MGE_MAX_SYMS ? i : MGE_MAX_SYMS - 1], sizeof here[0], "record %d ('%s')", i + 1, v->name);
        if (t->dtype != v->dtype) {
            cli_error(fn, "record %d is %s, but input '%s' is %s", i + 1,
                      mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got), v->name,
                      mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want));
            goto done;
        }
        if (bench_bind_dims(v, t->ndim, t->dims, &b->bind, src, here[i < MGE_MAX_SYMS ? i : MGE_MAX_SYMS - 1], why,
                      sizeof why)) {
            cli_error(fn, "record %d is %s, but input '%s' is %s: %s", i + 1,
                      mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got), v->name,
                      mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want), why);
            goto done;
        }
        b->ptr[i] = t;
    }
    if (!mge_binding_get(&b->bind, MGE_DIM_N, &b->batch))
        b->batch = 1;
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

    /* Every --shape must name an input and fit it; its symbolic dims bind the symbols. */
    const char *src[MGE_MAX_SYMS];
    if (batch > 0) {
        mge_binding_set(&out->bind, MGE_DIM_N, batch, NULL);
        src[0] = "--batch";
    }
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
        char want[160], why[256];
        if (bench_bind_dims(val, sh->ndim, sh->dims, &out->bind, src, sh->arg, why, sizeof why)) {
            cli_error(where, "--shape %s does not fit input '%s' %s: %s", sh->arg, sh->name,
                      mge_shape_str(val->dtype, val->ndim, val->dims, want, sizeof want), why);
            free(shape_of);
            goto fail;
        }
        shape_of[v] = i;
    }
    /* N defaults to 1; other symbols need a --shape */
    if (!mge_binding_get(&out->bind, MGE_DIM_N, NULL))
        mge_binding_set(&out->bind, MGE_DIM_N, 1, NULL);
    for (int i = 0; i < nin; i++) {
        const mge_value *val = &g->values[inputs[i]];
        for (int k = 0; k < val->ndim; k++)
            if (val->dims[k] < 0 && !mge_binding_get(&out->bind, val->dims[k], NULL)) {
                char want[160];
                cli_error(where, "input '%s' is %s: give %s a value with --shape %s=DIMS", val->name,
                          mge_shape_str(val->dtype, val->ndim, val->dims, want, sizeof want),
                          mge_dim_name(val->dims[k]), val->name);
                free(shape_of);
                goto fail;
            }
    }

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
    for (int i = 0; i < nin; i++) {
        const mge_value *val = &g->values[inputs[i]];
        int64_t dims[MGE_MAX_DIMS];
        int si = shape_of[inputs[i]];
        for (int k = 0; k < val->ndim; k++) {
            dims[k] = val->dims[k];
            if (si >= 0)
                dims[k] = shapes->s[si].dims[k];
            else if (val->dims[k] < 0)
                mge_binding_get(&out->bind, val->dims[k], &dims[k]);
        }
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
    mge_binding_get(&out->bind, MGE_DIM_N, &out->batch);
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
