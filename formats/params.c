/* params.c — a model's parameters and state by name (DESIGN "Parameters as
 * .npz"), in PyTorch's state_dict conventions: NODE.weight, NODE.bias,
 * NODE.running_mean, NODE.running_var, NODE.num_batches_tracked.
 *
 * Binding is all or nothing: every name, dtype and shape is checked before
 * the graph is touched. Because NPY has no bfloat16 and no quantized types,
 * a float32 tensor binds to a bf16 value (rounded), int8 to qs8 and int32 to
 * qs32 (keeping the value's existing scales), so an export written through
 * .npz binds back. */
#include "internal.h"
#include "text.h"

#include <stdlib.h>
#include <string.h>

/* Names listed in one message before "and N more". */
#define LIST_MAX 10

static int bindable(const mge_value *v)
{
    return v->kind == MGE_VAL_PARAM || v->kind == MGE_VAL_STATE || v->kind == MGE_VAL_CONST;
}

/* Whether a tensor of dtype got may be bound to a value of dtype want. */
static int dtype_fits(mge_dtype want, mge_dtype got)
{
    return want == got || (want == MGE_BF16 && got == MGE_F32) || (want == MGE_QS8 && got == MGE_I8) ||
           (want == MGE_QS32 && got == MGE_I32);
}

static int shape_fits(const mge_value *v, const mge_tensor *t)
{
    if (v->ndim != t->ndim)
        return 0;
    for (int i = 0; i < v->ndim; i++)
        if (v->dims[i] != t->dims[i])
            return 0;
    return 1;
}

/* Appends name to a "a, b, c and N more" list held in b. */
static void list_name(mge_buf *b, int *count, const char *name)
{
    if (*count < LIST_MAX)
        mge_buf_printf(b, "%s%s", *count ? ", " : "", name);
    (*count)++;
}

static void list_end(mge_buf *b, int count)
{
    if (count > LIST_MAX)
        mge_buf_printf(b, " and %d more", count - LIST_MAX);
}

/* The tensor a value takes for l->t[i]: a deep copy, converted if needed. */
static mge_status make_copy(const mge_value *v, const mge_tensor *src, mge_tensor *dst, mge_error *err)
{
    mge_status s;
    if (v->dtype == MGE_BF16 && src->dtype == MGE_F32) {
        if ((s = mge_tensor_alloc(dst, MGE_BF16, src->ndim, src->dims, err)))
            return s;
        const float *f = src->data;
        uint16_t *h = dst->data;
        for (size_t i = 0; i < dst->nbytes / 2; i++)
            h[i] = mge_f32_to_bf16(f[i]);
        return MGE_OK;
    }
    if ((s = mge_tensor_copy(dst, src, err)))
        return s;
    if (dst->dtype != v->dtype) { /* i8 -> qs8, i32 -> qs32: same bytes, scales from the value */
        dst->dtype = v->dtype;
        const mge_quant *q = v->data ? &v->data->q : NULL;
        if (q && q->nscale > 0 && !dst->q.nscale) {
            dst->q.scale = malloc(sizeof(float) * (size_t)q->nscale);
            if (!dst->q.scale) {
                mge_tensor_free(dst);
                return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            }
            memcpy(dst->q.scale, q->scale, sizeof(float) * (size_t)q->nscale);
            dst->q.nscale = q->nscale;
            dst->q.axis = q->axis;
            dst->q.zero = q->zero;
        }
    }
    return MGE_OK;
}

/* Checks every entry: unknown names, dtype/shape mismatches, missing values.
 * idx[i] receives the value index of entry i. */
static mge_status check_all(const mge_graph *g, const mge_tlist *l, int allow_partial, int *idx, mge_error *err)
{
    char want[160], got[160];
    for (int i = 0; i < l->n; i++) {
        int v = mge_graph_find(g, l->names[i]);
        idx[i] = v >= 0 && bindable(&g->values[v]) ? v : -1;
        if (idx[i] < 0)
            continue;
        const mge_value *val = &g->values[v];
        const mge_tensor *t = &l->t[i];
        if (!dtype_fits(val->dtype, t->dtype) || !shape_fits(val, t))
            return mge_error_set(err, MGE_ERR_SHAPE, "'%s': expected %s, got %s%s", l->names[i],
                                 mge_shape_str(val->dtype, val->ndim, val->dims, want, sizeof want),
                                 mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got),
                                 val->dtype == MGE_F32 && t->dtype == MGE_F64 ? " (save float32)" : "");
        if (t->nbytes && !t->data)
            return mge_error_set(err, MGE_ERR_INVALID, "'%s': tensor has no data", l->names[i]);
        for (int j = 0; j < i; j++)
            if (idx[j] == v)
                return mge_error_set(err, MGE_ERR_INVALID, "'%s' is given twice", l->names[i]);
    }
    mge_buf unk = {0}, mis = {0};
    int nunk = 0, nmis = 0;
    for (int i = 0; i < l->n; i++)
        if (idx[i] < 0)
            list_name(&unk, &nunk, l->names[i]);
    list_end(&unk, nunk);
    if (!allow_partial) {
        char *given = calloc((size_t)g->nvalues + 1, 1);
        if (!given) {
            mge_buf_free(&unk);
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < l->n; i++)
            if (idx[i] >= 0)
                given[idx[i]] = 1;
        for (int v = 0; v < g->nvalues; v++) {
            const mge_value *val = &g->values[v];
            if ((val->kind == MGE_VAL_PARAM || val->kind == MGE_VAL_STATE) && !val->data && !given[v])
                list_name(&mis, &nmis, val->name);
        }
        list_end(&mis, nmis);
        free(given);
    }
    /* a key the text form cannot spell (block1-0.weight, 0.weight) can only
     * match after renaming: say how */
    for (int i = 0; i < l->n && !unk.failed; i++) {
        const char *k = l->names[i];
        if (idx[i] >= 0 || mge_text_is_name(k))
            continue;
        const char *bad = k + strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.");
        char rename[96];
        if (*bad) /* a character no name holds; else the first one is a digit or '.' */
            snprintf(rename, sizeof rename, "k.replace('%c', '_')", *bad);
        else
            snprintf(rename, sizeof rename, "('_' + k if k[:1].isdigit() else k)");
        mge_buf_printf(&unk, "; '%s' cannot be a name in the text form (names hold letters, digits, '_' and '.', "
                       "and do not start with a digit or '.'), so a model in the text form has no value of that "
                       "name: rename the keys when saving and use the new names in the model, e.g. np.savez('w.npz', **{%s: v.numpy() for k, v in sd.items()})",
                       k, rename);
        break;
    }
    mge_status s = MGE_OK;
    if (unk.failed || mis.failed)
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    else if (nunk && nmis)
        s = mge_error_set(err, MGE_ERR_INVALID,
                          "%d unknown name%s (not a parameter, state or constant of the model): %s; "
                          "%d parameter%s without a value: %s",
                          nunk, nunk == 1 ? "" : "s", unk.p, nmis, nmis == 1 ? "" : "s", mis.p);
    else if (nunk)
        s = mge_error_set(err, MGE_ERR_INVALID,
                          "%d unknown name%s (not a parameter, state or constant of the model): %s", nunk,
                          nunk == 1 ? "" : "s", unk.p);
    else if (nmis)
        s = mge_error_set(err, MGE_ERR_INVALID, "%d parameter%s without a value: %s", nmis, nmis == 1 ? "" : "s",
                          mis.p);
    mge_buf_free(&unk);
    mge_buf_free(&mis);
    return s;
}

mge_status mge_params_bind(mge_graph *g, const mge_tlist *l, int allow_partial, mge_error *err)
{
    if (l->n == 0 && allow_partial)
        return MGE_OK;
    int *idx = malloc(sizeof(int) * (size_t)(l->n ? l->n : 1));
    mge_tensor **copies = calloc((size_t)(l->n ? l->n : 1), sizeof *copies);
    mge_status s = MGE_OK;
    if (!idx || !copies) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((s = check_all(g, l, allow_partial, idx, err)))
        goto done;
    /* Copy everything first, so running out of memory leaves the graph as it was. */
    for (int i = 0; i < l->n; i++) {
        if (idx[i] < 0)
            continue;
        copies[i] = calloc(1, sizeof(mge_tensor));
        if (!copies[i]) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        if ((s = make_copy(&g->values[idx[i]], &l->t[i], copies[i], err))) {
            mge_error_prefix(err, "'%s'", l->names[i]);
            goto done;
        }
    }
    for (int i = 0; i < l->n; i++) {
        if (idx[i] < 0)
            continue;
        mge_value *v = &g->values[idx[i]];
        if (v->data) {
            mge_tensor_free(v->data);
            free(v->data);
        }
        v->data = copies[i];
        copies[i] = NULL;
    }
done:
    if (copies)
        for (int i = 0; i < l->n; i++)
            if (copies[i]) {
                mge_tensor_free(copies[i]);
                free(copies[i]);
            }
    free(copies);
    free(idx);
    return s;
}

mge_status mge_params_export(const mge_graph *g, mge_tlist *out, mge_error *err)
{
    int start = out->n;
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        if ((val->kind != MGE_VAL_PARAM && val->kind != MGE_VAL_STATE) || !val->data)
            continue;
        /* optimizer moments and step: training state, not the model's (a
         * state_dict has no such names, and strict loading would refuse them) */
        if (mge_value_is_opt_state(val))
            continue;
        mge_tensor t;
        mge_status s = mge_tensor_copy(&t, val->data, err);
        if (!s && (s = mge_tlist_add(out, val->name, &t, err)))
            mge_tensor_free(&t);
        if (s) {
            /* undo: out ends as it began */
            for (int i = start; i < out->n; i++) {
                free(out->names[i]);
                mge_tensor_free(&out->t[i]);
            }
            out->n = start;
            mge_error_prefix(err, "'%s'", val->name);
            return s;
        }
    }
    return MGE_OK;
}
