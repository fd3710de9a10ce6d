/* init.c — initial values for params/state declared without data.
 * Specs: zeros, ones, value(V) (every element V: prelu's 0.25),
 * uniform(B) = U(-B, B), normal(S) = N(0, S^2).
 * Each value draws from its own stream seeded by (seed, name), so adding or
 * reordering values does not change the others' initial values. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int spec_arg(const char *spec, const char *fn, double *arg)
{
    size_t n = strlen(fn);
    if (strncmp(spec, fn, n) != 0 || spec[n] != '(')
        return 0;
    char *end;
    *arg = strtod(spec + n + 1, &end);
    return end != spec + n + 1 && *end == ')' && end[1] == 0;
}

static mge_status fill(mge_tensor *t, const char *spec, mge_rng *r, mge_error *err)
{
    int64_t n = mge_tensor_numel(t);
    double a;
    int kind; /* 0 const, 1 uniform, 2 normal */
    double c = 0;
    if (!spec || strcmp(spec, "zeros") == 0)
        kind = 0, c = 0;
    else if (strcmp(spec, "ones") == 0)
        kind = 0, c = 1;
    else if (spec_arg(spec, "value", &a))
        kind = 0, c = a;
    else if (spec_arg(spec, "uniform", &a))
        kind = 1;
    else if (spec_arg(spec, "normal", &a))
        kind = 2;
    else
        return mge_error_set(err, MGE_ERR_INVALID, "unknown init '%s' (zeros, ones, value(V), uniform(B), normal(S))", spec);
    for (int64_t i = 0; i < n; i++) {
        double v = kind == 0 ? c : kind == 1 ? (2.0 * mge_rng_uniform(r) - 1.0) * a : mge_rng_normal(r) * a;
        switch (t->dtype) {
        case MGE_F32: ((float *)t->data)[i] = (float)v; break;
        case MGE_F16: ((uint16_t *)t->data)[i] = mge_f32_to_f16((float)v); break;
        case MGE_BF16: ((uint16_t *)t->data)[i] = mge_f32_to_bf16((float)v); break;
        case MGE_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
        case MGE_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
        case MGE_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
        case MGE_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
        case MGE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
        case MGE_F64: case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64: mge_dtype_set(t->dtype, t->data, i, v); break;
        default: return mge_error_set(err, MGE_ERR_UNSUPPORTED, "cannot initialize %s values", mge_dtype_name(t->dtype));
        }
    }
    return MGE_OK;
}

mge_status mge_graph_init_params(mge_graph *g, uint64_t seed, mge_error *err)
{
    for (int v = 0; v < g->nvalues; v++) {
        mge_value *val = &g->values[v];
        if (val->data || (val->kind != MGE_VAL_PARAM && val->kind != MGE_VAL_STATE))
            continue;
        mge_tensor *t = calloc(1, sizeof *t);
        if (!t)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        mge_status s = mge_tensor_alloc(t, val->dtype, val->ndim, val->dims, err);
        mge_rng r;
        mge_rng_seed(&r, seed ^ mge_hash_str(val->name));
        if (!s)
            s = fill(t, val->init, &r, err);
        if (s) {
            mge_tensor_free(t);
            free(t);
            mge_error_prefix(err, "%s", val->name);
            return s;
        }
        val->data = t;
    }
    return MGE_OK;
}
