/* mgefile_write.c — the .mge writer (layout: man/man5/mge-format.5).
 *
 * Deterministic: every byte comes from the graph (no timestamps, padding is
 * zero), integers are written byte by byte in little-endian order, and values
 * are stored in "replay order" — the order in which a reader re-creates them
 * through the public graph API — so reading a file and writing it again gives
 * the same bytes. */
#include "mgefile.h"
#include "unpack.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---------------------------------------------------------------- byte output */

static void put_u8(mge_buf *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    mge_buf_put(b, &c, 1);
}

static void put_u32(mge_buf *b, uint32_t v)
{
    unsigned char c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (unsigned char)(v >> (8 * i));
    mge_buf_put(b, c, 4);
}

static void put_u64(mge_buf *b, uint64_t v)
{
    unsigned char c[8];
    for (int i = 0; i < 8; i++)
        c[i] = (unsigned char)(v >> (8 * i));
    mge_buf_put(b, c, 8);
}

static void put_i64(mge_buf *b, int64_t v)
{
    put_u64(b, (uint64_t)v);
}

static void put_f64(mge_buf *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    put_u64(b, u);
}

static void put_f32(mge_buf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}

static void put_zeros(mge_buf *b, size_t n)
{
    static const unsigned char z[MGEF_ALIGN];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        mge_buf_put(b, z, k);
        n -= k;
    }
}

/* A string: u32 byte length, then the bytes (no terminator). NULL is "". */
static int put_str(mge_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > UINT32_MAX)
        return 0;
    put_u32(b, (uint32_t)n);
    mge_buf_put(b, s ? s : "", n);
    return 1;
}

static void patch_u32(mge_buf *b, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->p[at + (size_t)i] = (char)(unsigned char)(v >> (8 * i));
}

static void patch_u64(mge_buf *b, size_t at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b->p[at + (size_t)i] = (char)(unsigned char)(v >> (8 * i));
}

uint32_t mge_file_crc32(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint32_t crc = 0;
    while (n) {
        uInt k = n > (size_t)1 << 30 ? (uInt)1 << 30 : (uInt)n;
        crc = (uint32_t)crc32(crc, c, k);
        c += k;
        n -= k;
    }
    return crc;
}

/* ---------------------------------------------------------------- replay order */

/* An integer-valued metadata value written as MGEF_META_INT: only the
 * canonical decimal text of an int64 qualifies, so it reads back verbatim. */
static int meta_int(const char *s, int64_t *out)
{
    if (!*s || strlen(s) > 20)
        return 0;
    const char *p = s;
    if (*p == '-')
        p++;
    if (!*p || (*p == '0' && (p[1] || p != s)))
        return 0; /* "", "-", leading zeros, "-0" */
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return 0;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return 0;
    *out = v;
    return 1;
}

static int is_dropped_state(const mge_value *v, const mge_write_opts *o)
{
    return o && o->no_state && mge_value_is_opt_state(v);
}

typedef struct wctx {
    const mge_graph *g;
    const mge_write_opts *o;
    int *fidx;        /* graph value index -> file value index, -1 when not stored */
    int *order;       /* file value index -> graph value index */
    int nstored;
    char *keep;       /* value is stored */
    char *ref;        /* value is read by a node, an output or the loss */
    int nsyms;        /* the file's symbol table: N first, then the inputs' other symbols */
    int64_t syms[MGE_MAX_SYMS];
} wctx;

static void emit_value(wctx *w, int v)
{
    if (w->fidx[v] >= 0 || !w->keep[v])
        return;
    w->fidx[v] = w->nstored;
    w->order[w->nstored++] = v;
}

/* Replay order: before each node (in node order), the not-yet-stored
 * non-node values whose index is below the node's first output, then those
 * it reads; then the node's outputs; finally the remaining values. A graph
 * rebuilt from the file has exactly this value order, so the order is a
 * fixed point and a second write gives the same bytes. */
static mge_status build_order(wctx *w, mge_error *err)
{
    const mge_graph *g = w->g;
    for (int v = 0; v < g->nvalues; v++)
        w->fidx[v] = -1;
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            w->ref[g->nodes[i].in[k]] = 1;
    for (int i = 0; i < g->noutputs; i++)
        w->ref[g->outputs[i]] = 1;
    if (g->loss >= 0)
        w->ref[g->loss] = 1;
    for (int v = 0; v < g->nvalues; v++)
        w->keep[v] = !is_dropped_state(&g->values[v], w->o) || w->ref[v];
    int scan = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        int first = g->nvalues;
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] < first)
                first = n->out[k];
        for (; scan < first; scan++)
            if (g->values[scan].kind != MGE_VAL_NODE)
                emit_value(w, scan);
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k];
            if (g->values[v].kind != MGE_VAL_NODE)
                emit_value(w, v);
            else if (w->fidx[v] < 0)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: uses '%s' before it is defined", n->name,
                                     g->values[v].name);
        }
        for (int k = 0; k < n->nout; k++) {
            int v = n->out[k];
            if (g->values[v].kind != MGE_VAL_NODE || w->fidx[v] >= 0)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: output link broken", n->name);
            w->fidx[v] = w->nstored;
            w->order[w->nstored++] = v;
        }
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind == MGE_VAL_NODE) {
            if (w->fidx[v] < 0)
                return mge_error_set(err, MGE_ERR_INVALID, "'%s' has no producer", g->values[v].name);
            continue;
        }
        emit_value(w, v);
    }
    return MGE_OK;
}

static int has_data(const wctx *w, const mge_value *v)
{
    return v->data && v->kind != MGE_VAL_NODE && !is_dropped_state(v, w->o);
}

/* ---------------------------------------------------------------- sections */

static void begin_section(mge_buf *b, const char *tag, size_t *start)
{
    *start = b->n;
    mge_buf_put(b, tag, 4);
    put_u64(b, 0); /* payload length, patched by end_section */
}

static void end_section(mge_buf *b, size_t start)
{
    if (b->failed)
        return;
    patch_u64(b, start + 4, (uint64_t)(b->n - start - 12));
    put_u32(b, mge_file_crc32(b->p + start, b->n - start));
}

static mge_status write_meta(const mge_graph *g, mge_buf *b, mge_error *err)
{
    size_t start;
    begin_section(b, MGEF_TAG_META, &start);
    put_u32(b, (uint32_t)g->nmeta);
    for (int i = 0; i < g->nmeta; i++) {
        int64_t iv;
        if (!put_str(b, g->meta[i].key))
            return mge_error_set(err, MGE_ERR_INVALID, "metadata key too long");
        if (meta_int(g->meta[i].value ? g->meta[i].value : "", &iv)) {
            put_u8(b, MGEF_META_INT);
            put_i64(b, iv);
        } else {
            put_u8(b, MGEF_META_TEXT);
            if (!put_str(b, g->meta[i].value))
                return mge_error_set(err, MGE_ERR_INVALID, "metadata '%s': value too long", g->meta[i].key);
        }
    }
    end_section(b, start);
    return MGE_OK;
}

static mge_status write_attr(const mge_node *n, const mge_attr *a, mge_buf *b, mge_error *err)
{
    mge_attr_type ty = mge_key_type(a->key);
    if (a->key < 0 || a->key >= MGE_NKEYS)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: attribute key %d out of range", n->name, a->key);
    put_str(b, mge_key_name(a->key));
    put_u8(b, (unsigned)ty);
    switch (ty) {
    case MGE_ATTR_INT:
        put_i64(b, a->i[0]);
        break;
    case MGE_ATTR_INTS:
        if (a->n < 1 || a->n > MGE_MAX_DIMS)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: attribute '%s' has %d values", n->name,
                                 mge_key_name(a->key), a->n);
        put_u8(b, (unsigned)a->n);
        for (int k = 0; k < a->n; k++)
            put_i64(b, a->i[k]);
        break;
    case MGE_ATTR_FLOAT:
        put_f64(b, a->f);
        break;
    case MGE_ATTR_BOOL:
        put_u8(b, a->i[0] != 0);
        break;
    case MGE_ATTR_OPS:
        /* op names, not numbers, like the node ops: stable as ops.def grows */
        if (a->n < 1 || a->n > MGE_MAX_DIMS)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: attribute '%s' has %d values", n->name,
                                 mge_key_name(a->key), a->n);
        put_u8(b, (unsigned)a->n);
        for (int k = 0; k < a->n; k++) {
            if (a->i[k] < (a->n == 1 ? -1 : 0) || a->i[k] >= MGE_NOPS)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: attribute '%s' names no op", n->name,
                                     mge_key_name(a->key));
            put_str(b, mge_attr_op_name(a->i[k]));
        }
        break;
    case MGE_ATTR_ENUM: {
        /* the word, not its index: files survive the word list growing */
        const char *w = mge_key_enum_word(a->key, a->i[0]);
        if (!w)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: attribute '%s' is none of its words", n->name,
                                 mge_key_name(a->key));
        put_str(b, w);
        break;
    }
    case MGE_ATTR_FLOATS:
        if (a->n < 1 || a->n > MGE_MAX_DIMS)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: attribute '%s' has %d values", n->name,
                                 mge_key_name(a->key), a->n);
        put_u8(b, (unsigned)a->n);
        for (int k = 0; k < a->n; k++)
            put_f64(b, mge_attr_float_at(a, k));
        break;
    case MGE_ATTR_DTYPE:
        if (a->i[0] < 0 || a->i[0] >= MGE_NDTYPES)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: attribute '%s' is no dtype", n->name,
                                 mge_key_name(a->key));
        put_u8(b, (unsigned)a->i[0]);
        break;
    }
    return MGE_OK;
}

static mge_status write_graph(const wctx *w, mge_buf *b, mge_error *err)
{
    const mge_graph *g = w->g;
    size_t start;
    begin_section(b, MGEF_TAG_GRAPH, &start);
    if (w->nsyms > 1) {
        put_u32(b, (uint32_t)w->nsyms);
        for (int i = 0; i < w->nsyms; i++)
            put_str(b, mge_dim_name(w->syms[i]));
    }
    put_u32(b, (uint32_t)w->nstored);
    for (int f = 0; f < w->nstored; f++) {
        const mge_value *v = &g->values[w->order[f]];
        put_str(b, v->name);
        put_u8(b, (unsigned)v->kind);
        put_u8(b, (unsigned)v->dtype);
        put_u8(b, (unsigned)v->ndim);
        for (int k = 0; k < v->ndim; k++) {
            int64_t d = v->dims[k];
            if (d < 0) {
                int j = 0;
                while (j < w->nsyms && w->syms[j] != d)
                    j++;
                d = j < w->nsyms ? -1 - (int64_t)j : MGEF_DIM_EXPR;
            }
            put_i64(b, d);
        }
        put_str(b, v->kind == MGE_VAL_NODE ? NULL : v->init);
        put_u8(b, has_data(w, v) ? MGEF_VAL_HAS_DATA : 0);
    }
    put_u32(b, (uint32_t)g->nnodes);
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        put_str(b, n->name);
        put_str(b, mge_op_info(n->op)->name);
        put_u32(b, (uint32_t)n->nin);
        for (int k = 0; k < n->nin; k++)
            put_u32(b, (uint32_t)w->fidx[n->in[k]]);
        put_u32(b, (uint32_t)n->nout);
        for (int k = 0; k < n->nout; k++)
            put_u32(b, (uint32_t)w->fidx[n->out[k]]);
        put_u32(b, (uint32_t)n->nattr);
        for (int k = 0; k < n->nattr; k++) {
            mge_status s = write_attr(n, &n->attrs[k], b, err);
            if (s)
                return s;
        }
    }
    put_u32(b, (uint32_t)g->ninputs);
    for (int i = 0; i < g->ninputs; i++)
        put_u32(b, (uint32_t)w->fidx[g->inputs[i]]);
    put_u32(b, (uint32_t)g->noutputs);
    for (int i = 0; i < g->noutputs; i++)
        put_u32(b, (uint32_t)w->fidx[g->outputs[i]]);
    put_u32(b, (uint32_t)(g->loss >= 0 ? w->fidx[g->loss] : -1));
    end_section(b, start);
    return MGE_OK;
}

/* One stored tensor: its bytes (compressed copy or the tensor's own data). */
typedef struct wtensor {
    int value;                /* graph value index */
    const mge_tensor *t;
    const unsigned char *bytes;
    unsigned char *owned;     /* compressed copy, freed at the end */
    size_t stored, raw;
    int comp;
    uint32_t crc;
    uint64_t offset;          /* from the file start */
} wtensor;

static mge_status prepare_tensor(const wctx *w, wtensor *wt, mge_error *err)
{
    const mge_value *v = &w->g->values[wt->value];
    const mge_tensor *t = v->data;
    size_t nbytes;
    mge_status s = mge_shape_numel(t->ndim, t->dims, t->dtype, NULL, &nbytes, err);
    if (s) {
        mge_error_prefix(err, "%s", v->name);
        return s;
    }
    if (t->dtype != v->dtype || t->ndim != v->ndim ||
        memcmp(t->dims, v->dims, sizeof(int64_t) * (size_t)v->ndim) != 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "'%s': data does not match its declared shape", v->name);
    if (nbytes && !t->data)
        return mge_error_set(err, MGE_ERR_INVALID, "'%s': tensor has no data", v->name);
    if ((unsigned)t->layout > 255u)
        return mge_error_set(err, MGE_ERR_INVALID, "'%s': bad layout", v->name);
    if (t->q.nscale < 0 || (t->q.nscale > 0 && !t->q.scale))
        return mge_error_set(err, MGE_ERR_INVALID, "'%s': bad quantization scales", v->name);
    wt->t = t;
    wt->raw = nbytes;
    wt->bytes = t->data;
    wt->stored = nbytes;
    wt->comp = MGEF_COMP_NONE;
    if (w->o && w->o->compress && nbytes > 0 && nbytes <= ULONG_MAX) {
        uLongf cap = compressBound((uLong)nbytes);
        unsigned char *c = malloc(cap ? cap : 1);
        if (!c)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory compressing '%s'", v->name);
        int zr = compress2(c, &cap, t->data, (uLong)nbytes, Z_DEFAULT_COMPRESSION);
        if (zr != Z_OK) {
            free(c);
            return mge_error_set(err, zr == Z_MEM_ERROR ? MGE_ERR_NOMEM : MGE_ERR_INVALID,
                                 "cannot compress '%s' (zlib error %d)", v->name, zr);
        }
        if (cap < nbytes) { /* else incompressible: store it as it is */
            wt->owned = c;
            wt->bytes = c;
            wt->stored = cap;
            wt->comp = MGEF_COMP_ZLIB;
        } else {
            free(c);
        }
    }
    wt->crc = mge_file_crc32(wt->bytes, wt->stored);
    return MGE_OK;
}

/* The reader refuses compressed tensors that together inflate beyond
 * mge_unpack_limit of their compressed bytes (a file it cannot tell from a
 * zip bomb): the most compressed ones are stored as they are until the rest
 * pass, so whatever is written can be read. */
static void keep_readable(wtensor *ts, int nt)
{
    for (;;) {
        uint64_t raw = 0, stored = 0;
        int worst = -1;
        for (int i = 0; i < nt; i++) {
            if (ts[i].comp != MGEF_COMP_ZLIB)
                continue;
            raw += ts[i].raw;
            stored += ts[i].stored;
            if (worst < 0 || (double)ts[i].raw / (double)ts[i].stored >
                                 (double)ts[worst].raw / (double)ts[worst].stored)
                worst = i;
        }
        if (worst < 0 || raw <= mge_unpack_limit(stored))
            return;
        wtensor *w = &ts[worst];
        free(w->owned);
        w->owned = NULL;
        w->bytes = w->t->data;
        w->stored = w->raw;
        w->comp = MGEF_COMP_NONE;
        w->crc = mge_file_crc32(w->bytes, w->stored);
    }
}

static void write_tdir(const wctx *w, const wtensor *ts, int nt, mge_buf *b)
{
    size_t start;
    begin_section(b, MGEF_TAG_TDIR, &start);
    put_u32(b, (uint32_t)nt);
    for (int i = 0; i < nt; i++) {
        const wtensor *wt = &ts[i];
        const mge_tensor *t = wt->t;
        put_u32(b, (uint32_t)w->fidx[wt->value]);
        put_u8(b, (unsigned)t->dtype);
        put_u8(b, (unsigned)t->layout);
        put_u8(b, (unsigned)t->ndim);
        put_u8(b, (unsigned)wt->comp);
        for (int k = 0; k < t->ndim; k++)
            put_i64(b, t->dims[k]);
        put_u32(b, (uint32_t)(int32_t)t->q.axis);
        put_u32(b, (uint32_t)t->q.zero);
        put_u32(b, (uint32_t)t->q.nscale);
        for (int k = 0; k < t->q.nscale; k++)
            put_f32(b, t->q.scale[k]);
        put_u64(b, wt->offset);
        put_u64(b, wt->stored);
        put_u64(b, wt->raw);
        put_u32(b, wt->crc);
    }
    end_section(b, start);
}

static size_t align_up(size_t n)
{
    return (n + (MGEF_ALIGN - 1)) & ~(size_t)(MGEF_ALIGN - 1);
}

/* ---------------------------------------------------------------- entry point */

mge_status mge_file_write(const mge_graph *g, const mge_write_opts *o, mge_buf *out, mge_error *err)
{
    mge_status s = mge_graph_validate(g, err);
    if (s)
        return s;
    if (out->failed)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1);
    wctx w = {g, o, malloc(sizeof(int) * nv), malloc(sizeof(int) * nv), 0, calloc(nv, 1), calloc(nv, 1), 0, {0}};
    wtensor *ts = calloc(nv, sizeof *ts);
    mge_buf *b = out;
    size_t base = out->n; /* offsets count from the file start */
    int nt = 0;
    if (!w.fidx || !w.order || !w.keep || !w.ref || !ts) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    s = build_order(&w, err);
    if (s)
        goto done;
    for (int f = 0; f < w.nstored; f++)
        if (has_data(&w, &g->values[w.order[f]])) {
            ts[nt].value = w.order[f];
            s = prepare_tensor(&w, &ts[nt++], err);
            if (s)
                goto done;
        }
    keep_readable(ts, nt);

    /* header; data offset and file size are patched once known */
    mge_buf_put(b, MGEF_SIG, MGEF_SIG_LEN);
    /* version 1 unless symbols beyond N need the symbol table */
    w.syms[0] = MGE_DIM_N;
    int gs = mge_graph_symbols(g, w.syms + 1, MGE_MAX_SYMS - 1);
    if (gs > MGE_MAX_SYMS - 1) {
        s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "more than %d symbols", MGE_MAX_SYMS);
        goto done;
    }
    w.nsyms = 1 + gs;
    for (int i = 1; i < w.nsyms; i++)
        if (w.syms[i] == MGE_DIM_N) {
            memmove(&w.syms[i], &w.syms[i + 1], sizeof(int64_t) * (size_t)(w.nsyms - i - 1));
            w.nsyms--;
            break;
        }
    if (w.nsyms > MGE_MAX_SYMS) {
        s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "more than %d symbols", MGE_MAX_SYMS);
        goto done;
    }
    put_u32(b, w.nsyms > 1 ? 2 : 1);
    put_u32(b, 0);
    put_u64(b, 0);
    put_u64(b, 0);
    put_u32(b, 0);
    if ((s = write_meta(g, b, err)) || (s = write_graph(&w, b, err)))
        goto done;

    /* the directory's size does not depend on the offsets: lay data out after it */
    mge_buf probe = {0};
    write_tdir(&w, ts, nt, &probe);
    size_t tdir_len = probe.n;
    int pf = probe.failed;
    mge_buf_free(&probe);
    if (pf || b->failed) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t data_off = align_up(b->n - base + tdir_len), end = data_off;
    for (int i = 0; i < nt; i++) {
        end = align_up(end);
        ts[i].offset = end;
        if (ts[i].stored > SIZE_MAX / 2 - end) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "model too large");
            goto done;
        }
        end += ts[i].stored;
    }
    write_tdir(&w, ts, nt, b);
    put_zeros(b, data_off - (b->n - base));
    for (int i = 0; i < nt; i++) {
        put_zeros(b, (size_t)ts[i].offset - (b->n - base));
        mge_buf_put(b, ts[i].bytes, ts[i].stored);
    }
    if (b->failed) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    patch_u64(b, base + 16, data_off);
    patch_u64(b, base + 24, b->n - base);
    patch_u32(b, base + 32, mge_file_crc32(b->p + base, 32));
done:
    for (int i = 0; i < nt; i++)
        free(ts[i].owned);
    free(ts);
    free(w.fidx);
    free(w.order);
    free(w.keep);
    free(w.ref);
    if (s && out->n >= base)
        out->n = base; /* leave no partial file behind */
    return s;
}
