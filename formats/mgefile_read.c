/* mgefile_read.c — the .mge reader (layout: man/man5/mge-format.5).
 *
 * The buffer is hostile: every length, offset, count and index is checked
 * before it is used, checksums are verified before a section is parsed, and
 * the graph is rebuilt through the public API (mge_graph_add_value,
 * mge_graph_add_node, ...) so the IR's own checks and shape inference apply
 * to what the file claims. Every byte of a well-formed file is covered by
 * the signature, the version, a CRC32, or the rule that padding is zero, so
 * a single changed byte is always detected. */
#include "mgefile.h"
#include "unpack.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A fuzzer cannot forge CRCs; builds for fuzzing skip the comparison so it
 * reaches the parser (the unit tests check the CRCs). */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CRC_BAD(a, b) ((void)(a), (void)(b), 0)
#else
#define CRC_BAD(a, b) ((a) != (b))
#endif

typedef struct rd {
    const unsigned char *p;   /* file start */
    size_t n;                 /* file size */
    size_t pos;               /* absolute offset of the next byte */
    size_t end;               /* end of the current section's payload */
    const char *what;         /* current section, for messages */
    mge_error *err;
    uint32_t version;
    int nsyms;                /* the file's symbol table (version 2; version 1: N only) */
    int64_t syms[MGE_MAX_SYMS];
} rd;

/* ---------------------------------------------------------------- primitives */

static int need(rd *r, size_t k)
{
    if (r->pos <= r->end && k <= r->end - r->pos)
        return 1;
    if (r->end == r->n)
        mge_error_set(r->err, MGE_ERR_FORMAT, "truncated file (needs %zu bytes at offset %zu, has %zu)", k, r->pos,
                      r->n);
    else
        mge_error_set(r->err, MGE_ERR_FORMAT,
                      "malformed %s: a record runs past its end (needs %zu bytes at offset %zu, section ends at %zu)",
                      r->what, k, r->pos, r->end);
    return 0;
}

static uint64_t le(const unsigned char *c, int k)
{
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = (v << 8) | c[i];
    return v;
}

static int get_u8(rd *r, unsigned *v)
{
    if (!need(r, 1))
        return 0;
    *v = r->p[r->pos++];
    return 1;
}

static int get_u32(rd *r, uint32_t *v)
{
    if (!need(r, 4))
        return 0;
    *v = (uint32_t)le(r->p + r->pos, 4);
    r->pos += 4;
    return 1;
}

static int get_u64(rd *r, uint64_t *v)
{
    if (!need(r, 8))
        return 0;
    *v = le(r->p + r->pos, 8);
    r->pos += 8;
    return 1;
}

static int get_i64(rd *r, int64_t *v)
{
    uint64_t u;
    if (!get_u64(r, &u))
        return 0;
    memcpy(v, &u, 8); /* two's complement reinterpretation */
    return 1;
}

static int get_i32(rd *r, int32_t *v)
{
    uint32_t u;
    if (!get_u32(r, &u))
        return 0;
    memcpy(v, &u, 4);
    return 1;
}

/* A string as a freshly allocated C string ("" for length 0). */
static int get_str(rd *r, char **s)
{
    uint32_t len;
    size_t at = r->pos;
    *s = NULL;
    if (!get_u32(r, &len) || !need(r, len))
        return 0;
    const unsigned char *c = r->p + r->pos;
    if (memchr(c, 0, len)) {
        mge_error_set(r->err, MGE_ERR_FORMAT, "malformed %s: string at offset %zu contains a NUL byte", r->what, at);
        return 0;
    }
    *s = mge_strndup((const char *)c, len);
    if (!*s) {
        mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory");
        return 0;
    }
    r->pos += len;
    return 1;
}

/* A count of records of at least min_size bytes each: bounded by what is left. */
static int get_count(rd *r, size_t min_size, const char *what, uint32_t *count)
{
    size_t at = r->pos;
    if (!get_u32(r, count))
        return 0;
    if (*count > (r->end - r->pos) / min_size || *count > INT_MAX / 2) {
        mge_error_set(r->err, MGE_ERR_FORMAT, "malformed %s: %u %s at offset %zu do not fit in %zu bytes", r->what,
                      (unsigned)*count, what, at, r->end - r->pos);
        return 0;
    }
    return 1;
}

static int bad(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(rd *r, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mge_error_set(r->err, MGE_ERR_FORMAT, "malformed %s: %s", r->what, msg);
    return 0;
}

/* A file-level problem: the message as given. */
static int ferr(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ferr(rd *r, const char *fmt, ...)
{
    char msg[1000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mge_error_set(r->err, MGE_ERR_FORMAT, "%s", msg);
    return 0;
}

/* An error from the graph API on file contents: the file is what is wrong. */
static int api_bad(rd *r, const mge_error *e, const char *fmt, const char *name)
{
    char pre[300];
    snprintf(pre, sizeof pre, fmt, name);
    mge_error_set(r->err, e->code == MGE_ERR_NOMEM ? MGE_ERR_NOMEM : MGE_ERR_FORMAT, "malformed %s: %s: %s",
                  r->what, pre, e->msg);
    return 0;
}

static size_t align_up(size_t n)
{
    return (n + (MGEF_ALIGN - 1)) & ~(size_t)(MGEF_ALIGN - 1);
}

/* Zero padding in [from, to): padding is not under any CRC, so it must be zero. */
static int zero_pad(rd *r, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (r->p[i])
            return ferr(r, "malformed file: nonzero padding byte at offset %zu", i);
    return 1;
}

/* ---------------------------------------------------------------- sections */

/* Opens the section with the given tag at r->pos: checks its bounds and CRC
 * and limits r->end to its payload. */
static int open_section(rd *r, const char *tag, const char *what)
{
    size_t start = r->pos;
    r->what = what;
    r->end = r->n;
    if (!need(r, 12))
        return 0;
    if (memcmp(r->p + start, tag, 4) != 0) {
        char got[5];
        for (int i = 0; i < 4; i++) {
            unsigned char c = r->p[start + (size_t)i];
            got[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
        }
        got[4] = 0;
        mge_error_set(r->err, MGE_ERR_FORMAT, "malformed file: expected section '%s' at offset %zu, found '%s'", tag,
                      start, got);
        return 0;
    }
    uint64_t len = le(r->p + start + 4, 8);
    r->pos = start + 12;
    if (len > r->n - r->pos || r->n - r->pos - (size_t)len < 4)
        return ferr(r, "malformed file: %s of %llu bytes at offset %zu runs past the end of the file (%zu bytes)",
                    what, (unsigned long long)len, r->pos, r->n);
    size_t pend = r->pos + (size_t)len;
    uint32_t want = (uint32_t)le(r->p + pend, 4);
    if (CRC_BAD(mge_file_crc32(r->p + start, pend - start), want)) {
        mge_error_set(r->err, MGE_ERR_FORMAT, "checksum mismatch in %s", what);
        return 0;
    }
    r->end = pend;
    return 1;
}

static int close_section(rd *r)
{
    if (r->pos != r->end)
        return bad(r, "%zu unparsed bytes at offset %zu", r->end - r->pos, r->pos);
    r->pos = r->end + 4;
    r->end = r->n;
    return 1;
}

static int read_meta(rd *r, mge_graph *g)
{
    uint32_t cnt;
    if (!open_section(r, MGEF_TAG_META, "metadata section") || !get_count(r, 9, "entries", &cnt))
        return 0;
    for (uint32_t i = 0; i < cnt; i++) {
        char *key = NULL, *val = NULL, num[32];
        unsigned ty;
        int ok = get_str(r, &key) && get_u8(r, &ty);
        if (ok && ty == MGEF_META_TEXT) {
            ok = get_str(r, &val);
        } else if (ok && ty == MGEF_META_INT) {
            int64_t v;
            if ((ok = get_i64(r, &v)))
                snprintf(num, sizeof num, "%lld", (long long)v);
        } else if (ok) {
            ok = bad(r, "metadata '%s' has unknown type %u", key, ty);
        }
        if (ok && mge_graph_get_meta(g, key))
            ok = bad(r, "metadata key '%s' appears twice", key);
        mge_error e;
        if (ok && mge_graph_set_meta(g, key, val ? val : num, &e))
            ok = api_bad(r, &e, "'%s'", key);
        free(key);
        free(val);
        if (!ok)
            return 0;
    }
    return close_section(r);
}

/* The value table and node list as stored, before the graph is rebuilt. */
typedef struct vrec {
    char *name, *init;
    unsigned kind, dtype, flags;
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
} vrec;

typedef struct nrec {
    char *name;
    int op, nin, nout, nattr;
    uint32_t *in, out[MGEF_MAX_NODE_OUTS];
    mge_attr attrs[MGEF_MAX_NODE_ATTRS];
} nrec;

/* data: each value's tensor, read before the graph is rebuilt so that a node
 * whose shape depends on a const's value (range, reshape) infers on replay */
typedef struct gtab {
    uint32_t nv, nn;
    vrec *v;
    nrec *nd;
    mge_tensor **data;
    uint32_t nin, nout, loss;
    int *in, *out;
} gtab;

static void gtab_free(gtab *t)
{
    for (uint32_t i = 0; t->v && i < t->nv; i++) {
        free(t->v[i].name);
        free(t->v[i].init);
    }
    for (uint32_t i = 0; t->nd && i < t->nn; i++) {
        free(t->nd[i].name);
        free(t->nd[i].in);
    }
    for (uint32_t i = 0; t->data && i < t->nv; i++)
        if (t->data[i]) {
            mge_tensor_free(t->data[i]);
            free(t->data[i]);
        }
    free(t->v);
    free(t->nd);
    free(t->data);
    free(t->in);
    free(t->out);
}

static int read_value(rd *r, vrec *v)
{
    unsigned nd;
    if (!get_str(r, &v->name) || !get_u8(r, &v->kind) || !get_u8(r, &v->dtype) || !get_u8(r, &nd))
        return 0;
    if (v->kind > MGE_VAL_NODE)
        return bad(r, "value '%s' has unknown kind %u", v->name, v->kind);
    if (v->dtype >= MGE_NDTYPES)
        return bad(r, "value '%s' has unknown dtype %u", v->name, v->dtype);
    if (nd > MGE_MAX_DIMS)
        return bad(r, "value '%s' has rank %u (at most %d)", v->name, nd, MGE_MAX_DIMS);
    v->ndim = (int)nd;
    for (int k = 0; k < v->ndim; k++) {
        if (!get_i64(r, &v->dims[k]))
            return 0;
        int64_t d = v->dims[k];
        if (d >= 0)
            continue;
        if (d == MGEF_DIM_EXPR && v->kind == MGE_VAL_NODE)
            continue; /* an expression: replay checks the inferred dim is symbolic */
        if (d < -(int64_t)r->nsyms || d == MGEF_DIM_EXPR)
            return bad(r, "value '%s': dimension %d is %lld, not a number or one of the file's %d symbols", v->name,
                       k, (long long)d, r->nsyms);
        v->dims[k] = r->syms[-1 - d];
    }
    if (!get_str(r, &v->init) || !get_u8(r, &v->flags))
        return 0;
    if (v->flags & ~MGEF_VAL_HAS_DATA)
        return bad(r, "value '%s' has unknown flags 0x%x", v->name, v->flags);
    if (v->kind == MGE_VAL_NODE && (v->init[0] || v->flags))
        return bad(r, "node output '%s' has an init spec or data", v->name);
    /* refuse absurd shapes here, before anything sizes memory from them */
    int64_t d1[MGE_MAX_DIMS];
    for (int k = 0; k < v->ndim; k++)
        d1[k] = v->dims[k] < 0 ? 1 : v->dims[k];
    mge_error e;
    if (mge_shape_numel(v->ndim, d1, (mge_dtype)v->dtype, NULL, NULL, &e))
        return api_bad(r, &e, "value '%s'", v->name);
    return 1;
}

static int read_attr(rd *r, const nrec *n, mge_attr *a)
{
    char *key;
    unsigned ty, u;
    if (!get_str(r, &key))
        return 0;
    int k = mge_key_lookup(key, strlen(key));
    if (k < 0) {
        bad(r, "node '%s': unknown attribute '%s'", n->name, key);
        free(key);
        return 0;
    }
    free(key);
    memset(a, 0, sizeof *a);
    a->key = k;
    a->n = 1;
    if (!get_u8(r, &ty))
        return 0;
    if (ty != (unsigned)mge_key_type(k))
        return bad(r, "node '%s': attribute '%s' has type tag %u, expected %u", n->name, mge_key_name(k), ty,
                   (unsigned)mge_key_type(k));
    switch ((mge_attr_type)ty) {
    case MGE_ATTR_INT:
        return get_i64(r, &a->i[0]);
    case MGE_ATTR_INTS:
        if (!get_u8(r, &u))
            return 0;
        if (u < 1 || u > MGE_MAX_DIMS)
            return bad(r, "node '%s': attribute '%s' has %u values (1..%d)", n->name, mge_key_name(k), u,
                       MGE_MAX_DIMS);
        a->n = (int)u;
        for (int i = 0; i < a->n; i++)
            if (!get_i64(r, &a->i[i]))
                return 0;
        return 1;
    case MGE_ATTR_FLOAT: {
        uint64_t bits;
        if (!get_u64(r, &bits))
            return 0;
        memcpy(&a->f, &bits, 8);
        return 1;
    }
    case MGE_ATTR_BOOL:
        if (!get_u8(r, &u))
            return 0;
        if (u > 1)
            return bad(r, "node '%s': attribute '%s' is a bool stored as %u", n->name, mge_key_name(k), u);
        a->i[0] = u;
        return 1;
    case MGE_ATTR_OPS:
        if (!get_u8(r, &u))
            return 0;
        if (u < 1 || u > MGE_MAX_DIMS)
            return bad(r, "node '%s': attribute '%s' has %u values (1..%d)", n->name, mge_key_name(k), u,
                       MGE_MAX_DIMS);
        a->n = (int)u;
        for (int i = 0; i < a->n; i++) {
            char *name;
            if (!get_str(r, &name))
                return 0;
            int id = a->n == 1 && strcmp(name, "none") == 0 ? -1 : mge_op_lookup(name, strlen(name));
            if (id < -1 || (id == -1 && (a->n != 1 || strcmp(name, "none") != 0))) {
                bad(r, "node '%s': attribute '%s' names unknown op '%s'", n->name, mge_key_name(k), name);
                free(name);
                return 0;
            }
            free(name);
            a->i[i] = id;
        }
        return 1;
    case MGE_ATTR_ENUM: {
        char *w;
        if (!get_str(r, &w))
            return 0;
        a->i[0] = mge_key_enum_lookup(k, w, strlen(w));
        if (a->i[0] < 0) {
            bad(r, "node '%s': attribute '%s' is '%s', none of %s", n->name, mge_key_name(k), w,
                mge_key_enum_words(k));
            free(w);
            return 0;
        }
        free(w);
        return 1;
    }
    case MGE_ATTR_FLOATS:
        if (!get_u8(r, &u))
            return 0;
        if (u < 1 || u > MGE_MAX_DIMS)
            return bad(r, "node '%s': attribute '%s' has %u values (1..%d)", n->name, mge_key_name(k), u,
                       MGE_MAX_DIMS);
        a->n = (int)u;
        for (int i = 0; i < a->n; i++) {
            uint64_t bits;
            if (!get_u64(r, &bits))
                return 0;
            memcpy(&a->i[i], &bits, 8);
        }
        return 1;
    case MGE_ATTR_DTYPE:
        if (!get_u8(r, &u))
            return 0;
        if (u >= MGE_NDTYPES)
            return bad(r, "node '%s': attribute '%s' has unknown dtype %u", n->name, mge_key_name(k), u);
        a->i[0] = u;
        return 1;
    }
    return 0;
}

static int read_node(rd *r, const gtab *t, nrec *n)
{
    char *op;
    uint32_t cnt;
    if (!get_str(r, &n->name) || !get_str(r, &op))
        return 0;
    n->op = mge_op_lookup(op, strlen(op));
    if (n->op < 0) {
        bad(r, "node '%s': unknown op '%s'", n->name, op);
        free(op);
        return 0;
    }
    free(op);
    const mge_opinfo *oi = mge_op_info(n->op);
    if (!get_count(r, 4, "inputs", &cnt))
        return 0;
    if ((int)cnt < oi->min_in || (int)cnt > oi->max_in)
        return bad(r, "node '%s': %s takes %d to %d inputs, has %u", n->name, oi->name, oi->min_in, oi->max_in,
                   (unsigned)cnt);
    n->nin = (int)cnt;
    n->in = malloc(sizeof(uint32_t) * (cnt ? cnt : 1));
    if (!n->in)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    for (int k = 0; k < n->nin; k++) {
        if (!get_u32(r, &n->in[k]))
            return 0;
        if (n->in[k] >= t->nv)
            return bad(r, "node '%s': input %d refers to value %u of %u", n->name, k, (unsigned)n->in[k],
                       (unsigned)t->nv);
    }
    if (!get_u32(r, &cnt))
        return 0;
    if (!mge_op_nout_ok(n->op, (int)cnt) || cnt > MGEF_MAX_NODE_OUTS)
        return bad(r, "node '%s': %s cannot have %u outputs (%d)", n->name, oi->name, (unsigned)cnt, oi->nout);
    n->nout = (int)cnt;
    for (int k = 0; k < n->nout; k++) {
        if (!get_u32(r, &n->out[k]))
            return 0;
        if (n->out[k] >= t->nv)
            return bad(r, "node '%s': output %d refers to value %u of %u", n->name, k, (unsigned)n->out[k],
                       (unsigned)t->nv);
    }
    if (!get_u32(r, &cnt))
        return 0;
    if (cnt > MGEF_MAX_NODE_ATTRS)
        return bad(r, "node '%s' has %u attributes", n->name, (unsigned)cnt);
    n->nattr = (int)cnt;
    for (int k = 0; k < n->nattr; k++)
        if (!read_attr(r, n, &n->attrs[k]))
            return 0;
    return 1;
}

/* Re-creates values and nodes in stored order; node outputs come from
 * mge_graph_add_node and must match what the file says they are. */
static int replay(rd *r, const gtab *t, mge_graph *g)
{
    uint32_t next = 0;
    mge_error e;
    for (uint32_t v = 0; v < t->nv;) {
        const vrec *vr = &t->v[v];
        if (vr->kind != MGE_VAL_NODE) {
            int idx = mge_graph_add_value(g, vr->name, (mge_valkind)vr->kind, (mge_dtype)vr->dtype, vr->ndim,
                                          vr->dims, &e);
            if (idx < 0)
                return api_bad(r, &e, "value '%s'", vr->name);
            if ((uint32_t)idx != v)
                return bad(r, "value '%s' lands at index %d, not %u", vr->name, idx, (unsigned)v);
            if (vr->init[0] && !(g->values[idx].init = mge_strdup(vr->init)))
                return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
            g->values[idx].data = t->data[v]; /* from here on the graph frees it */
            t->data[v] = NULL;
            v++;
            continue;
        }
        if (next >= t->nn)
            return bad(r, "node output '%s' belongs to no node", vr->name);
        const nrec *n = &t->nd[next];
        const char *outnames[MGEF_MAX_NODE_OUTS];
        int in[64];
        if (n->nin > 64)
            return bad(r, "node '%s' has too many inputs", n->name);
        for (int k = 0; k < n->nout; k++) {
            if (n->out[k] != v + (uint32_t)k || t->v[n->out[k]].kind != MGE_VAL_NODE)
                return bad(r, "node '%s': output %d is value %u, expected %u", n->name, k, (unsigned)n->out[k],
                           (unsigned)(v + (uint32_t)k));
            outnames[k] = t->v[n->out[k]].name;
        }
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k] >= v)
                return bad(r, "node '%s': input %d ('%s') is defined after the node", n->name, k,
                           t->v[n->in[k]].name);
            in[k] = (int)n->in[k];
        }
        int ni = mge_graph_add_node(g, n->name, n->op, n->nin, in, n->nattr, n->attrs, n->nout, outnames, &e);
        if (ni < 0)
            return api_bad(r, &e, "node '%s'", n->name);
        if ((uint32_t)ni != next)
            return bad(r, "node '%s' lands at index %d, not %u", n->name, ni, (unsigned)next);
        for (int k = 0; k < n->nout; k++) {
            const vrec *o = &t->v[v + (uint32_t)k];
            const mge_value *gv = &g->values[n->out[k]];
            int same = gv->dtype == (mge_dtype)o->dtype && gv->ndim == o->ndim;
            for (int d = 0; same && d < o->ndim; d++)
                same = o->dims[d] == MGEF_DIM_EXPR ? gv->dims[d] < 0 : gv->dims[d] == o->dims[d];
            if (!same) {
                char a[128], b[128];
                return bad(r, "node '%s': '%s' is stored as %s but infers to %s", n->name, o->name,
                           mge_shape_str((mge_dtype)o->dtype, o->ndim, o->dims, a, sizeof a),
                           mge_shape_str(gv->dtype, gv->ndim, gv->dims, b, sizeof b));
            }
        }
        v += (uint32_t)n->nout;
        next++;
    }
    if (next != t->nn)
        return bad(r, "node '%s' has no outputs in the value table", t->nd[next].name);
    for (uint32_t i = 0; i < t->nin; i++)
        g->inputs[i] = t->in[i];
    for (uint32_t i = 0; i < t->nout; i++)
        if (mge_graph_add_output(g, t->out[i], &e))
            return api_bad(r, &e, "output %s", t->v[t->out[i]].name);
    g->loss = t->loss == UINT32_MAX ? -1 : (int)t->loss;
    return 1;
}

/* Reads the graph section into t; replay() rebuilds the graph once the
 * tensors are read too. */
static int read_graph(rd *r, gtab *t)
{
    if (!open_section(r, MGEF_TAG_GRAPH, "graph section"))
        return 0;
    r->nsyms = 1;
    r->syms[0] = MGE_DIM_N;
    if (r->version >= 2) {
        uint32_t ns;
        if (!get_u32(r, &ns))
            return 0;
        if (ns < 1 || ns > MGE_MAX_SYMS)
            return bad(r, "%u symbols (1 to %d)", (unsigned)ns, MGE_MAX_SYMS);
        for (uint32_t i = 0; i < ns; i++) {
            char *name;
            mge_error e;
            if (!get_str(r, &name))
                return 0;
            int ok = 1;
            if (mge_dim_symbol(name, strlen(name), &r->syms[i], &e))
                ok = api_bad(r, &e, "symbol %s", name);
            for (uint32_t j = 0; ok && j < i; j++)
                if (r->syms[j] == r->syms[i])
                    ok = bad(r, "symbol '%s' listed twice", name);
            free(name);
            if (!ok)
                return 0;
        }
        r->nsyms = (int)ns;
    }
    /* smallest records: a value 4+3+4+1 = 12 bytes, a node 4+5+8+8+4 = 29 */
    if (!get_count(r, 12, "values", &t->nv))
        return 0;
    t->v = calloc(t->nv ? t->nv : 1, sizeof *t->v);
    if (!t->v)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    for (uint32_t i = 0; i < t->nv; i++)
        if (!read_value(r, &t->v[i]))
            return 0;
    if (!get_count(r, 29, "nodes", &t->nn))
        return 0;
    t->nd = calloc(t->nn ? t->nn : 1, sizeof *t->nd);
    if (!t->nd)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    for (uint32_t i = 0; i < t->nn; i++)
        if (!read_node(r, t, &t->nd[i]))
            return 0;

    /* graph inputs: a permutation of the input values, in declaration order */
    uint32_t cnt, idx, ninputs = 0;
    for (uint32_t v = 0; v < t->nv; v++)
        ninputs += t->v[v].kind == MGE_VAL_INPUT;
    if (!get_count(r, 4, "inputs", &cnt))
        return 0;
    if (cnt != ninputs)
        return bad(r, "%u graph inputs listed, %u input values declared", (unsigned)cnt, (unsigned)ninputs);
    t->in = calloc(cnt ? cnt : 1, sizeof *t->in);
    t->data = calloc(t->nv ? t->nv : 1, sizeof *t->data);
    if (!t->in || !t->data)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    t->nin = cnt;
    char *seen = calloc(t->nv ? t->nv : 1, 1);
    if (!seen)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    int ok = 1;
    for (uint32_t i = 0; ok && i < cnt; i++) {
        if (!(ok = get_u32(r, &idx)))
            break;
        if (idx >= t->nv || t->v[idx].kind != MGE_VAL_INPUT || seen[idx])
            ok = bad(r, "graph input %u refers to value %u, which is no input or is listed twice", (unsigned)i,
                     (unsigned)idx);
        else
            seen[idx] = 1, t->in[i] = (int)idx;
    }
    free(seen);
    if (!ok)
        return 0;
    if (!get_count(r, 4, "outputs", &cnt))
        return 0;
    if (!(t->out = calloc(cnt ? cnt : 1, sizeof *t->out)))
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    for (uint32_t i = 0; i < cnt; i++) {
        if (!get_u32(r, &idx))
            return 0;
        if (idx >= t->nv)
            return bad(r, "graph output %u refers to value %u of %u", (unsigned)i, (unsigned)idx, (unsigned)t->nv);
        t->out[t->nout++] = (int)idx;
    }
    if (!get_u32(r, &idx))
        return 0;
    if (idx != UINT32_MAX && idx >= t->nv)
        return bad(r, "loss refers to value %u of %u", (unsigned)idx, (unsigned)t->nv);
    t->loss = idx;
    return close_section(r);
}

/* ---------------------------------------------------------------- tensors */

typedef struct trec {
    uint32_t value;
    unsigned dtype, layout, ndim, comp;
    int64_t dims[MGE_MAX_DIMS];
    int32_t axis, zero;
    uint32_t nscale;
    size_t scale_at;          /* file offset of the scales */
    uint64_t offset, stored, raw;
    uint32_t crc;
} trec;

static int read_tdir_entry(rd *r, const gtab *t, uint32_t prev, trec *e)
{
    if (!get_u32(r, &e->value) || !get_u8(r, &e->dtype) || !get_u8(r, &e->layout) || !get_u8(r, &e->ndim) ||
        !get_u8(r, &e->comp))
        return 0;
    if (e->value >= t->nv || (prev != UINT32_MAX && e->value <= prev))
        return bad(r, "entry for value %u is out of range or out of order", (unsigned)e->value);
    const vrec *v = &t->v[e->value];
    if (!(v->flags & MGEF_VAL_HAS_DATA))
        return bad(r, "'%s' has a tensor but is not marked as having data", v->name);
    if (e->ndim > MGE_MAX_DIMS)
        return bad(r, "tensor '%s' has rank %u", v->name, e->ndim);
    for (unsigned k = 0; k < e->ndim; k++)
        if (!get_i64(r, &e->dims[k]))
            return 0;
    if (e->dtype != v->dtype || (int)e->ndim != v->ndim ||
        memcmp(e->dims, v->dims, sizeof(int64_t) * e->ndim) != 0)
        return bad(r, "tensor '%s' does not match the value's dtype and shape", v->name);
    if (e->layout > MGE_LAYOUT_NCHW16C)
        return bad(r, "tensor '%s' has unknown layout %u", v->name, e->layout);
    if (!get_i32(r, &e->axis) || !get_i32(r, &e->zero) || !get_count(r, 4, "scales", &e->nscale))
        return 0;
    if (e->nscale > 0) {
        if (e->axis == -1 ? e->nscale != 1
                          : (e->axis < 0 || e->axis >= (int32_t)e->ndim || (int64_t)e->nscale != e->dims[e->axis]))
            return bad(r, "tensor '%s': %u quantization scales do not fit axis %d", v->name, (unsigned)e->nscale,
                       (int)e->axis);
    }
    e->scale_at = r->pos;
    r->pos += (size_t)e->nscale * 4; /* get_count bounded it by the section */
    if (!get_u64(r, &e->offset) || !get_u64(r, &e->stored) || !get_u64(r, &e->raw) || !get_u32(r, &e->crc))
        return 0;
    mge_error err;
    size_t nbytes;
    if (mge_shape_numel((int)e->ndim, e->dims, (mge_dtype)e->dtype, NULL, &nbytes, &err))
        return api_bad(r, &err, "tensor '%s'", v->name);
    if (e->raw != nbytes)
        return bad(r, "tensor '%s': raw size %llu, but %s takes %zu bytes", v->name, (unsigned long long)e->raw,
                   mge_dtype_name((mge_dtype)e->dtype), nbytes);
    if (e->comp == MGEF_COMP_NONE) {
        if (e->stored != e->raw)
            return bad(r, "tensor '%s': stored size %llu differs from raw size %llu", v->name,
                       (unsigned long long)e->stored, (unsigned long long)e->raw);
    } else if (e->comp == MGEF_COMP_ZLIB) {
        if (e->stored == 0 || e->raw / MGEF_MAX_ZLIB_RATIO > e->stored || e->raw > ULONG_MAX ||
            e->stored > ULONG_MAX)
            return bad(r, "tensor '%s': %llu compressed bytes cannot hold %llu bytes", v->name,
                       (unsigned long long)e->stored, (unsigned long long)e->raw);
    } else {
        return bad(r, "tensor '%s' has unknown compression %u", v->name, e->comp);
    }
    return 1;
}

static int read_tensor(rd *r, const trec *e, int borrow, const char *name, mge_tensor **slot)
{
    const unsigned char *src = r->p + e->offset;
    if (CRC_BAD(mge_file_crc32(src, (size_t)e->stored), e->crc)) {
        mge_error_set(r->err, MGE_ERR_FORMAT, "checksum mismatch in tensor '%s'", name);
        return 0;
    }
    mge_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    if (mge_tensor_init(t, (mge_dtype)e->dtype, (int)e->ndim, e->dims, r->err)) {
        free(t);
        return 0;
    }
    *slot = t; /* from here on gtab_free or the graph frees it */
    t->layout = (mge_layout)e->layout;
    t->q.axis = e->axis;
    t->q.zero = e->zero;
    if (e->nscale) {
        t->q.scale = malloc(sizeof(float) * e->nscale);
        if (!t->q.scale)
            return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
        for (uint32_t k = 0; k < e->nscale; k++) {
            uint32_t bits = (uint32_t)le(r->p + e->scale_at + 4 * (size_t)k, 4);
            memcpy(&t->q.scale[k], &bits, 4);
        }
        t->q.nscale = (int)e->nscale;
    }
    /* borrowing needs the data 64-byte aligned in memory, not just in the file */
    if (e->comp == MGEF_COMP_NONE && borrow && e->raw > 0 && ((uintptr_t)src % MGEF_ALIGN) == 0) {
        t->data = (void *)(uintptr_t)src;
        return 1;
    }
    t->data = mge_aligned_alloc((size_t)e->raw);
    if (!t->data)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "cannot allocate %llu bytes for '%s'",
                             (unsigned long long)e->raw, name), 0;
    t->flags |= MGE_TENSOR_OWNED;
    if (e->comp == MGEF_COMP_NONE) {
        if (e->raw)
            memcpy(t->data, src, (size_t)e->raw);
        return 1;
    }
    uLongf dlen = (uLongf)e->raw;
    uLong slen = (uLong)e->stored;
    int zr = uncompress2(t->data, &dlen, src, &slen);
    if (zr != Z_OK || dlen != e->raw || slen != e->stored) {
        if (zr == Z_MEM_ERROR)
            return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory decompressing '%s'", name), 0;
        mge_error_set(r->err, MGE_ERR_FORMAT, "malformed tensor '%s': bad compressed data (%s)", name,
                      zr != Z_OK ? (zr == Z_BUF_ERROR ? "more data than its size says" : "zlib stream is corrupt")
                                 : "sizes disagree");
        return 0;
    }
    return 1;
}

static int read_tensors(rd *r, gtab *t, int borrow, size_t data_off)
{
    uint32_t cnt;
    if (!open_section(r, MGEF_TAG_TDIR, "tensor directory"))
        return 0;
    /* an entry is at least 4+4+4+4+4+8+8+8+4 = 48 bytes */
    if (!get_count(r, 48, "entries", &cnt))
        return 0;
    uint32_t want = 0;
    for (uint32_t v = 0; v < t->nv; v++)
        want += (t->v[v].flags & MGEF_VAL_HAS_DATA) != 0;
    if (cnt != want)
        return bad(r, "%u entries for %u values marked as having data", (unsigned)cnt, (unsigned)want);
    trec *es = calloc(cnt ? cnt : 1, sizeof *es);
    if (!es)
        return mge_error_set(r->err, MGE_ERR_NOMEM, "out of memory"), 0;
    int ok = 1;
    for (uint32_t i = 0; ok && i < cnt; i++)
        ok = read_tdir_entry(r, t, i ? es[i - 1].value : UINT32_MAX, &es[i]);
    ok = ok && close_section(r);
    /* all compressed tensors together, before any is allocated: each one's
     * 1032:1 alone would let a small file take the machine's memory */
    uint64_t zraw = 0, zstored = 0;
    for (uint32_t i = 0; ok && i < cnt; i++)
        if (es[i].comp == MGEF_COMP_ZLIB) {
            zraw = zraw > UINT64_MAX - es[i].raw ? UINT64_MAX : zraw + es[i].raw;
            zstored = zstored > UINT64_MAX - es[i].stored ? UINT64_MAX : zstored + es[i].stored;
        }
    if (ok && zraw > mge_unpack_limit(zstored))
        ok = ferr(r, "the compressed tensors declare %llu bytes, more than the %llu bytes that their %llu compressed "
                  "bytes may inflate to (%s)",
                  (unsigned long long)zraw, (unsigned long long)mge_unpack_limit(zstored),
                  (unsigned long long)zstored, MGE_UNPACK_RULE);
    if (ok && align_up(r->pos) != data_off)
        ok = ferr(r, "malformed file: tensor data starts at %zu, the header says %zu", align_up(r->pos), data_off);
    ok = ok && zero_pad(r, r->pos, data_off);
    /* data: each tensor at the next 64-byte boundary, in directory order */
    size_t end = data_off;
    for (uint32_t i = 0; ok && i < cnt; i++) {
        const trec *e = &es[i];
        const char *nm = t->v[e->value].name;
        size_t at = align_up(end);
        if (e->offset != at) {
            ok = ferr(r, "malformed tensor '%s': offset %llu, expected %zu", nm, (unsigned long long)e->offset, at);
            break;
        }
        if (at > r->n || e->stored > r->n - at) {
            ok = ferr(r, "malformed tensor '%s': %llu bytes at offset %zu run past the end of the file (%zu bytes)",
                      nm, (unsigned long long)e->stored, at, r->n);
            break;
        }
        ok = zero_pad(r, end, at) && read_tensor(r, e, borrow, nm, &t->data[e->value]);
        end = at + (size_t)e->stored;
    }
    if (ok && end != r->n)
        ok = ferr(r, "malformed file: %zu bytes after the last tensor", r->n - end);
    free(es);
    return ok;
}

/* ---------------------------------------------------------------- entry points */

int mge_file_is_mge(const void *buf, size_t n)
{
    return buf && n >= MGEF_SIG_LEN && memcmp(buf, MGEF_SIG, MGEF_SIG_LEN) == 0;
}

static int read_header(rd *r, size_t *data_off)
{
    r->what = "header";
    if (r->n < MGEF_SIG_LEN) {
        if (r->n == 0 || memcmp(r->p, MGEF_SIG, r->n) != 0)
            return mge_error_set(r->err, MGE_ERR_FORMAT, "not an .mge file (bad signature)"), 0;
        return need(r, MGEF_SIG_LEN);
    }
    if (memcmp(r->p, MGEF_SIG, MGEF_SIG_LEN) != 0)
        return mge_error_set(r->err, MGE_ERR_FORMAT, "not an .mge file (bad signature)"), 0;
    r->pos = MGEF_SIG_LEN;
    uint32_t ver, flags, crc;
    uint64_t doff, fsize;
    if (!get_u32(r, &ver))
        return 0;
    r->version = ver;
    if (ver > MGE_FORMAT_VERSION)
        return mge_error_set(r->err, MGE_ERR_UNSUPPORTED,
                             "file format version %u is newer than this mge supports (%d)", (unsigned)ver,
                             MGE_FORMAT_VERSION), 0;
    if (ver == 0)
        return mge_error_set(r->err, MGE_ERR_FORMAT, "malformed header: format version 0"), 0;
    if (!get_u32(r, &flags) || !get_u64(r, &doff) || !get_u64(r, &fsize) || !get_u32(r, &crc))
        return 0;
    if (CRC_BAD(mge_file_crc32(r->p, 32), crc))
        return mge_error_set(r->err, MGE_ERR_FORMAT, "checksum mismatch in header"), 0;
    if (flags)
        return mge_error_set(r->err, MGE_ERR_FORMAT, "malformed header: unknown flags 0x%x", (unsigned)flags), 0;
    if (fsize > r->n)
        return mge_error_set(r->err, MGE_ERR_FORMAT, "truncated file (needs %llu bytes at offset 0, has %zu)",
                             (unsigned long long)fsize, r->n), 0;
    if (fsize < r->n)
        return mge_error_set(r->err, MGE_ERR_FORMAT,
                             "malformed file: %zu bytes of trailing data after the model's %llu bytes",
                             r->n - (size_t)fsize, (unsigned long long)fsize), 0;
    if (doff % MGEF_ALIGN || doff < MGEF_HEADER_LEN || doff > fsize)
        return mge_error_set(r->err, MGE_ERR_FORMAT, "malformed header: bad tensor data offset %llu",
                             (unsigned long long)doff), 0;
    *data_off = (size_t)doff;
    return 1;
}

mge_status mge_file_read(const void *buf, size_t n, int borrow, mge_graph **out, mge_error *err)
{
    mge_error local;
    if (!err)
        err = &local;
    *out = NULL;
    if (!buf && n)
        return mge_error_set(err, MGE_ERR_INVALID, "no buffer");
    rd r = {buf, n, 0, n, "header", err, 0, 0, {0}};
    size_t data_off = 0;
    if (!read_header(&r, &data_off))
        return err->code;
    mge_graph *g = mge_graph_new();
    if (!g)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    gtab t = {0};
    int ok = read_meta(&r, g) && read_graph(&r, &t) && read_tensors(&r, &t, borrow, data_off);
    if (ok) {
        r.what = "graph section";
        ok = replay(&r, &t, g);
    }
    gtab_free(&t);
    if (ok) {
        mge_error e;
        if (mge_graph_validate(g, &e)) {
            mge_error_set(err, MGE_ERR_FORMAT, "malformed graph: %s", e.msg);
            ok = 0;
        }
    }
    if (!ok) {
        mge_graph_free(g);
        return err->code ? err->code : MGE_ERR_FORMAT;
    }
    *out = g;
    return MGE_OK;
}
