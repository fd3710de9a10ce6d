/* registry.c — the op table generated from ops.def, attribute schemas and
 * the shape helpers every op family shares. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    mge_attr_type type;
    const char *words;       /* ENUM keys: the words, space-separated */
} keys[MGE_NKEYS] = {
#define MGE_KEY(name, type) {#name, MGE_ATTR_##type, ""},
#define MGE_KEY_ENUM(name, words) {#name, MGE_ATTR_ENUM, words},
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema)
#include "ops.def"
#undef MGE_KEY
#undef MGE_KEY_ENUM
#undef MGE_OP
};

static mge_opinfo ops[MGE_NOPS] = {
#define MGE_KEY(name, type)
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema) \
    {#name, #family, min_in, max_in, nout, flags, schema, 0, {{0}}},
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
};

static const mge_infer_fn infer_fns[MGE_NOPS] = {
#define MGE_KEY(name, type)
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema) mge_##family##_infer,
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
};

static const mge_flops_fn flops_fns[MGE_NOPS] = {
#define MGE_KEY(name, type)
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema) mge_##family##_flops,
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
};

static const mge_grad_fn grad_fns[MGE_NOPS] = {
#define MGE_KEY(name, type)
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema) mge_##family##_grad,
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
};

mge_grad_fn mge_op_grad_fn(int op)
{
    return op >= 0 && op < MGE_NOPS ? grad_fns[op] : NULL;
}

const char *mge_key_name(int key)
{
    return key >= 0 && key < MGE_NKEYS ? keys[key].name : "?";
}

mge_attr_type mge_key_type(int key)
{
    return key >= 0 && key < MGE_NKEYS ? keys[key].type : MGE_ATTR_INT;
}

const char *mge_attr_op_name(int64_t op)
{
    return op == -1 ? "none" : op >= 0 && op < MGE_NOPS ? ops[op].name : "?";
}

const char *mge_key_enum_words(int key)
{
    return key >= 0 && key < MGE_NKEYS ? keys[key].words : "";
}

/* Word idx of a word list into *w, *n; 0 when there is none. */
static int enum_word_at(const char *words, int64_t idx, const char **w, size_t *n)
{
    const char *p = words;
    for (int64_t k = 0; *p; k++) {
        while (*p == ' ')
            p++;
        const char *b = p;
        while (*p && *p != ' ')
            p++;
        if (p == b)
            break;
        if (k == idx) {
            *w = b;
            *n = (size_t)(p - b);
            return 1;
        }
    }
    return 0;
}

/* ENUM words NUL-terminated, filled once with the schemas */
#define MAX_WORDS 16
static char enum_names[MGE_NKEYS][MAX_WORDS][24];

static void fill_enum_names(void)
{
    for (int key = 0; key < MGE_NKEYS; key++) {
        const char *w;
        size_t n;
        for (int k = 0; k < MAX_WORDS && enum_word_at(keys[key].words, k, &w, &n); k++) {
            if (n >= sizeof enum_names[0][0])
                abort(); /* ops.def is wrong: a build-time mistake, caught by any test */
            memcpy(enum_names[key][k], w, n);
        }
    }
}

static void parse_schemas(void);
static pthread_once_t once = PTHREAD_ONCE_INIT;

const char *mge_key_enum_word(int key, int64_t idx)
{
    if (key < 0 || key >= MGE_NKEYS || keys[key].type != MGE_ATTR_ENUM || idx < 0 || idx >= MAX_WORDS)
        return NULL;
    pthread_once(&once, parse_schemas);
    return enum_names[key][idx][0] ? enum_names[key][idx] : NULL;
}

int mge_key_enum_lookup(int key, const char *w, size_t n)
{
    if (key < 0 || key >= MGE_NKEYS || keys[key].type != MGE_ATTR_ENUM)
        return -1;
    const char *x;
    size_t xn;
    for (int k = 0; enum_word_at(keys[key].words, k, &x, &xn); k++)
        if (xn == n && memcmp(x, w, n) == 0)
            return k;
    return -1;
}

double mge_attr_float_at(const mge_attr *a, int k)
{
    double v = 0;
    if (k >= 0 && k < MGE_MAX_DIMS)
        memcpy(&v, &a->i[k], sizeof v);
    return v;
}

void mge_attr_float_set(mge_attr *a, int k, double v)
{
    if (k >= 0 && k < MGE_MAX_DIMS)
        memcpy(&a->i[k], &v, sizeof v);
}

int mge_key_lookup(const char *name, size_t n)
{
    for (int i = 0; i < MGE_NKEYS; i++)
        if (strlen(keys[i].name) == n && memcmp(keys[i].name, name, n) == 0)
            return i;
    return -1;
}

/* Parses a schema default ("3", "[1,2]", "1e-05", "true", "f32"). */
static int parse_default(int key, const char *s, size_t n, mge_attr *a)
{
    char tmp[64];
    if (n >= sizeof tmp)
        return 0;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    memset(a, 0, sizeof *a);
    a->key = key;
    a->n = 1;
    switch (keys[key].type) {
    case MGE_ATTR_BOOL:
        a->i[0] = strcmp(tmp, "true") == 0;
        return strcmp(tmp, "true") == 0 || strcmp(tmp, "false") == 0;
    case MGE_ATTR_FLOAT:
        a->f = strtod(tmp, NULL);
        return 1;
    case MGE_ATTR_DTYPE: {
        mge_dtype dt;
        if (!mge_dtype_parse(tmp, n, &dt))
            return 0;
        a->i[0] = dt;
        return 1;
    }
    case MGE_ATTR_INT:
        a->i[0] = strtoll(tmp, NULL, 10);
        return 1;
    case MGE_ATTR_OPS:
        if (strcmp(tmp, "none") == 0) {
            a->i[0] = -1;
            return 1;
        }
        a->i[0] = mge_op_lookup(tmp, n);
        return a->i[0] >= 0;
    case MGE_ATTR_ENUM:
        a->i[0] = mge_key_enum_lookup(key, tmp, n);
        return a->i[0] >= 0;
    case MGE_ATTR_INTS:
    case MGE_ATTR_FLOATS: {
        char *p = tmp;
        if (*p == '[')
            p++;
        a->n = 0;
        while (*p && *p != ']' && a->n < MGE_MAX_DIMS) {
            if (keys[key].type == MGE_ATTR_FLOATS)
                mge_attr_float_set(a, a->n++, strtod(p, &p));
            else
                a->i[a->n++] = strtoll(p, &p, 10);
            while (*p == ',' || *p == ' ')
                p++;
        }
        return a->n > 0;
    }
    }
    return 0;
}

static void parse_schemas(void)
{
    fill_enum_names();
    for (int op = 0; op < MGE_NOPS; op++) {
        mge_opinfo *oi = &ops[op];
        const char *p = oi->schema;
        oi->nschema = 0;
        while (*p) {
            while (*p == ' ')
                p++;
            if (!*p)
                break;
            const char *w = p;
            while (*p && *p != ' ')
                p++;
            size_t wl = (size_t)(p - w);
            const char *eq = memchr(w, '=', wl);
            size_t kl = eq ? (size_t)(eq - w) : wl;
            int optional = 0;
            if (!eq && w[kl - 1] == '?') {
                optional = 1;
                kl--;
            }
            int key = mge_key_lookup(w, kl);
            if (key < 0 || oi->nschema >= (int)(sizeof oi->sch / sizeof oi->sch[0]))
                abort(); /* ops.def is wrong: a build-time mistake, caught by any test */
            mge_schema_entry *e = &oi->sch[oi->nschema++];
            memset(e, 0, sizeof *e);
            e->key = key;
            e->optional = optional;
            e->required = !eq && !optional;
            e->def.key = key;
            if (eq && !parse_default(key, eq + 1, wl - kl - 1, &e->def))
                abort();
        }
    }
}

const mge_opinfo *mge_op_info(int op)
{
    if (op < 0 || op >= MGE_NOPS)
        return NULL;
    pthread_once(&once, parse_schemas);
    return &ops[op];
}

int mge_op_nout_ok(int op, int nout)
{
    const mge_opinfo *oi = mge_op_info(op);
    if (!oi)
        return 0;
    return oi->flags & MGE_OPF_VAROUT ? nout >= 1 && nout <= oi->nout : nout == oi->nout;
}

int mge_op_lookup(const char *name, size_t n)
{
    for (int i = 0; i < MGE_NOPS; i++)
        if (strlen(ops[i].name) == n && memcmp(ops[i].name, name, n) == 0)
            return i;
    return -1;
}

mge_infer_fn mge_op_infer_fn(int op)
{
    return op >= 0 && op < MGE_NOPS ? infer_fns[op] : NULL;
}

mge_flops_fn mge_op_flops_fn(int op)
{
    return op >= 0 && op < MGE_NOPS ? flops_fns[op] : NULL;
}

mge_params_fn mge_op_params_fn(int op)
{
    switch (op) {
    case MGE_OP_CONV2D: return mge_conv_params;
    case MGE_OP_LINEAR: return mge_linear_params;
    case MGE_OP_BATCHNORM:
    case MGE_OP_LAYERNORM: return mge_norm_params;
    case MGE_OP_CONV_TRANSPOSE2D:
    case MGE_OP_CONV1D:
    case MGE_OP_CONV3D: return mge_convt_params;
    case MGE_OP_LSTM:
    case MGE_OP_GRU:
    case MGE_OP_RNN: return mge_rnn_params;
    case MGE_OP_GROUP_NORM:
    case MGE_OP_INSTANCE_NORM:
    case MGE_OP_RMS_NORM: return mge_gnorm_params;
    case MGE_OP_EMBEDDING: return mge_attn_params;
    case MGE_OP_PRELU: return mge_unary_params;
    }
    return NULL;
}

const mge_attr *mge_attrs_find(int nattr, const mge_attr *attrs, int key)
{
    for (int i = 0; i < nattr; i++)
        if (attrs[i].key == key)
            return &attrs[i];
    return NULL;
}

mge_status mge_attrs_complete(int op, int nattr, const mge_attr *attrs, mge_attr *out, int *nout, mge_error *err)
{
    const mge_opinfo *oi = mge_op_info(op);
    if (!oi)
        return mge_error_set(err, MGE_ERR_INVALID, "unknown op %d", op);
    for (int i = 0; i < nattr; i++) {
        int k = attrs[i].key, found = 0;
        for (int j = 0; j < oi->nschema; j++)
            found |= oi->sch[j].key == k;
        if (!found)
            return mge_error_set(err, MGE_ERR_INVALID, "%s has no attribute '%s'", oi->name, mge_key_name(k));
        for (int j = 0; j < i; j++)
            if (attrs[j].key == k)
                return mge_error_set(err, MGE_ERR_INVALID, "attribute '%s' given twice", mge_key_name(k));
        if ((keys[k].type == MGE_ATTR_INTS || keys[k].type == MGE_ATTR_OPS || keys[k].type == MGE_ATTR_FLOATS) &&
            (attrs[i].n < 1 || attrs[i].n > MGE_MAX_DIMS))
            return mge_error_set(err, MGE_ERR_INVALID, "attribute '%s' needs 1..%d values", mge_key_name(k),
                                 MGE_MAX_DIMS);
        if (keys[k].type == MGE_ATTR_OPS)
            for (int j = 0; j < attrs[i].n; j++)
                if (attrs[i].i[j] < (attrs[i].n == 1 ? -1 : 0) || attrs[i].i[j] >= MGE_NOPS)
                    return mge_error_set(err, MGE_ERR_INVALID, "attribute '%s': op %lld out of range",
                                         mge_key_name(k), (long long)attrs[i].i[j]);
        if (keys[k].type == MGE_ATTR_ENUM && !mge_key_enum_word(k, attrs[i].i[0]))
            return mge_error_set(err, MGE_ERR_INVALID, "attribute '%s': %lld is none of its words (%s)",
                                 mge_key_name(k), (long long)attrs[i].i[0], keys[k].words);
    }
    int n = 0;
    for (int j = 0; j < oi->nschema; j++) {
        const mge_schema_entry *e = &oi->sch[j];
        const mge_attr *a = mge_attrs_find(nattr, attrs, e->key);
        if (a)
            out[n++] = *a;
        else if (e->required)
            return mge_error_set(err, MGE_ERR_INVALID, "%s needs attribute '%s'", oi->name, mge_key_name(e->key));
        else if (!e->optional)
            out[n++] = e->def;
    }
    *nout = n;
    return MGE_OK;
}

/* ---------------------------------------------------------------- shape helpers */

int64_t mge_tdesc_numel(const mge_tdesc *d)
{
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= d->dims[i];
    return n;
}

double mge_tdesc_count(const mge_tdesc *d)
{
    double c = 1;
    for (int i = 0; i < d->ndim; i++)
        c *= (double)d->dims[i];
    return c;
}

const char *mge_tdesc_str(const mge_tdesc *d, char *b, size_t n)
{
    return mge_shape_str(d->dtype, d->ndim, d->dims, b, n);
}

void mge_param_spec_set(mge_param_spec *p, const char *suffix, mge_valkind kind, mge_dtype dt, int ndim,
                        const int64_t *dims, const char *init)
{
    p->suffix = suffix;
    p->kind = kind;
    p->dtype = dt;
    p->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        p->dims[i] = dims[i];
    snprintf(p->init, sizeof p->init, "%s", init);
}

int mge_broadcast(const mge_tdesc *a, const mge_tdesc *b, mge_tdesc *out)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    mge_tdesc r;
    r.dtype = a->dtype;
    r.ndim = nd;
    for (int i = 0; i < nd; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1;
        int64_t db = ib >= 0 ? b->dims[ib] : 1;
        if (da == db || db == 1)
            r.dims[i] = da;
        else if (da == 1)
            r.dims[i] = db;
        else
            return 0;
    }
    *out = r;
    return 1;
}
