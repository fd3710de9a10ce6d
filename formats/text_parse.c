/* text_parse.c — the text form (.mgt) into a graph; grammar in mge-text(5).
 *
 * One statement per line, read with one token of lookahead and no recursion,
 * so no input can exhaust the stack. Each statement is parsed completely
 * before it touches the graph; every error carries the line and column of
 * the token at fault (or of the statement, for errors the graph reports). */
#include "text.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUTS 4
#define MAX_IN 64
#define MAX_ATTRS 16

typedef struct weights_ref {
    char *path;
    int line, col;
} weights_ref;

typedef struct parser {
    mge_lexer lx;
    mge_tok cur, nxt;
    mge_graph *g;
    mge_error *err;
    const char *base_dir;
    unsigned flags;
    int *defline;         /* per value: line of the statement that defined it */
    int ndef, capdef;
    weights_ref *w;
    int nw;
    int loss_line;
} parser;

/* ---------------------------------------------------------------- helpers */

static mge_status perr(parser *P, int line, int col, mge_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static mge_status perr(parser *P, int line, int col, mge_status code, const char *fmt, ...)
{
    char msg[sizeof P->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mge_error_at(P->err, code, line, col, "%s", msg);
}

/* A token's text for messages, cut short when long. */
static const char *tname(const mge_tok *t, char *buf, size_t n)
{
    size_t k = t->n < n - 4 ? t->n : n - 4;
    memcpy(buf, t->p, k);
    strcpy(buf + k, t->n > k ? "..." : "");
    return buf;
}

static const char *tdesc(const mge_tok *t, char *buf, size_t n)
{
    char nb[72];
    switch (t->type) {
    case MGE_T_EOF: return "end of file";
    case MGE_T_NL: return "end of line";
    case MGE_T_NAME: snprintf(buf, n, "'%s'", tname(t, nb, sizeof nb)); return buf;
    case MGE_T_INT:
    case MGE_T_FLOAT: snprintf(buf, n, "number %s", tname(t, nb, sizeof nb)); return buf;
    case MGE_T_STRING: return "a string";
    default: snprintf(buf, n, "'%c'", t->p[0]); return buf;
    }
}

static int tis(const mge_tok *t, const char *word)
{
    size_t k = strlen(word);
    return t->type == MGE_T_NAME && t->n == k && memcmp(t->p, word, k) == 0;
}

static mge_status next(parser *P)
{
    mge_tok_clear(&P->cur);
    P->cur = P->nxt;
    memset(&P->nxt, 0, sizeof P->nxt);
    if (P->cur.type == MGE_T_EOF) {
        P->nxt = P->cur;
        P->nxt.s = NULL;
        return MGE_OK;
    }
    return mge_lex_next(&P->lx, &P->nxt, P->err);
}

static mge_status expect(parser *P, mge_ttype type, const char *what)
{
    if (P->cur.type == type)
        return next(P);
    char b[96];
    return perr(P, P->cur.line, P->cur.col, MGE_ERR_FORMAT, "expected %s, found %s", what, tdesc(&P->cur, b, sizeof b));
}

static mge_status end_stmt(parser *P)
{
    if (P->cur.type == MGE_T_EOF)
        return MGE_OK;
    return expect(P, MGE_T_NL, "end of line");
}

static char *tdup(parser *P, const mge_tok *t)
{
    char *s = mge_strndup(t->p, t->n);
    if (!s)
        perr(P, t->line, t->col, MGE_ERR_NOMEM, "out of memory");
    return s;
}

/* Records the defining line of values added since the last call. */
static mge_status note_lines(parser *P, int line)
{
    if (P->g->nvalues > P->capdef) {
        int cap = P->capdef ? P->capdef : 64;
        while (cap < P->g->nvalues)
            cap *= 2;
        int *d = realloc(P->defline, sizeof *d * (size_t)cap);
        if (!d)
            return perr(P, line, 1, MGE_ERR_NOMEM, "out of memory");
        P->defline = d;
        P->capdef = cap;
    }
    while (P->ndef < P->g->nvalues)
        P->defline[P->ndef++] = line;
    return MGE_OK;
}

/* Edit distance counting a swap of neighbours as one edit ("rleu" -> relu). */
static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    return na > 32 || nb > 32 ? 99 : mge_str_distance(a, na, b, nb);
}

/* Appends " (did you mean a, b?)" for candidates close to the token. */
static int close_match(const mge_tok *t, const char *cand)
{
    size_t k = strlen(cand);
    if (t->n >= 3 && t->n < k && memcmp(cand, t->p, t->n) == 0)
        return 1; /* a prefix: "conv" -> conv2d */
    size_t d = edit_distance(t->p, t->n, cand, k);
    return d <= (t->n <= 4 ? 1u : 2u) && d < k;
}

static void suggest(char *buf, size_t n, const char *const *cands, int ncand, const mge_tok *t)
{
    int found = 0;
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < ncand && found < 5; i++) {
        if (!cands[i] || !close_match(t, cands[i]))
            continue;
        int k = snprintf(buf + used, n - used, "%s%s", found ? ", " : " (did you mean ", cands[i]);
        if (k < 0 || (size_t)k >= n - used)
            break;
        used += (size_t)k;
        found++;
    }
    if (found && used + 3 < n)
        strcpy(buf + used, "?)");
    else if (!found)
        buf[0] = 0;
}

static mge_status undefined(parser *P, const mge_tok *t)
{
    char nb[72], sug[256];
    const char *c[5];
    int nc = 0;
    for (int v = 0; v < P->g->nvalues && nc < 5; v++)
        if (close_match(t, P->g->values[v].name))
            c[nc++] = P->g->values[v].name;
    suggest(sug, sizeof sug, c, nc, t);
    return perr(P, t->line, t->col, MGE_ERR_INVALID, "undefined name '%s'%s", tname(t, nb, sizeof nb), sug);
}

/* The value a name token refers to, or an error. */
static mge_status lookup(parser *P, const mge_tok *t, int *v)
{
    char *s = tdup(P, t);
    if (!s)
        return MGE_ERR_NOMEM;
    *v = mge_graph_find(P->g, s);
    free(s);
    return *v < 0 ? undefined(P, t) : MGE_OK;
}

static mge_status check_new(parser *P, const mge_tok *t)
{
    char *s = tdup(P, t);
    if (!s)
        return MGE_ERR_NOMEM;
    int v = mge_graph_find(P->g, s);
    free(s);
    if (v < 0)
        return MGE_OK;
    char nb[72];
    if (v < P->ndef)
        return perr(P, t->line, t->col, MGE_ERR_INVALID, "'%s' is already defined (line %d)", tname(t, nb, sizeof nb),
                    P->defline[v]);
    return perr(P, t->line, t->col, MGE_ERR_INVALID, "'%s' is already defined", tname(t, nb, sizeof nb));
}

/* ---------------------------------------------------------------- types */

static mge_status parse_type(parser *P, int allow_n, mge_dtype *dt, int *ndim, int64_t *dims)
{
    mge_tok at = P->cur;
    char b[96], nb[72];
    if (P->cur.type != MGE_T_NAME)
        return perr(P, P->cur.line, P->cur.col, MGE_ERR_FORMAT, "expected a dtype (f32, i32, ...), found %s",
                    tdesc(&P->cur, b, sizeof b));
    if (!mge_dtype_parse(P->cur.p, P->cur.n, dt))
        return perr(P, P->cur.line, P->cur.col, MGE_ERR_FORMAT,
                    "unknown dtype '%s' (f32, f16, bf16, f64, i8, u8, i16, u16, i32, u32, i64, u64, bool, qs8, qs32)",
                    tname(&P->cur, nb, sizeof nb));
    mge_status s = next(P);
    if (s || (s = expect(P, MGE_T_LBRACK, "'[' after the dtype (f32[] is a scalar)")))
        return s;
    *ndim = 0;
    while (P->cur.type != MGE_T_RBRACK) {
        if (*ndim == MGE_MAX_DIMS)
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_SHAPE, "more than %d dimensions", MGE_MAX_DIMS);
        if (P->cur.type == MGE_T_NAME) {
            /* a symbol: N is the batch; any other name is a dim bound per run */
            if (!allow_n)
                return perr(P, P->cur.line, P->cur.col, MGE_ERR_SHAPE,
                            "'%s': only inputs may have symbolic dimensions (params, state and consts have fixed shapes)",
                            tname(&P->cur, nb, sizeof nb));
            mge_error e;
            if (mge_dim_symbol(P->cur.p, P->cur.n, &dims[*ndim], &e))
                return perr(P, P->cur.line, P->cur.col, e.code, "%s", e.msg);
        } else if (P->cur.type == MGE_T_INT && P->cur.i >= 0) {
            dims[*ndim] = P->cur.i;
        } else if (P->cur.type == MGE_T_INT || (P->cur.type == MGE_T_FLOAT && P->cur.bigint)) {
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_SHAPE, "dimension %s out of range",
                        tname(&P->cur, nb, sizeof nb));
        } else {
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_FORMAT,
                        "expected a dimension (a non-negative integer or a symbol such as N), found %s", tdesc(&P->cur, b, sizeof b));
        }
        (*ndim)++;
        if ((s = next(P)))
            return s;
        if (P->cur.type != MGE_T_COMMA)
            break;
        if ((s = next(P)))
            return s;
    }
    if ((s = expect(P, MGE_T_RBRACK, "',' or ']'")))
        return s;
    int64_t d1[MGE_MAX_DIMS];
    for (int i = 0; i < *ndim; i++)
        d1[i] = dims[i] < 0 ? 1 : dims[i];
    mge_error e;
    if (mge_shape_numel(*ndim, d1, *dt, NULL, NULL, &e))
        return perr(P, at.line, at.col, MGE_ERR_SHAPE, "%s", e.msg);
    return MGE_OK;
}

/* ---------------------------------------------------------------- numbers */

/* A float from INT, FLOAT, or the names inf/nan. */
static int tok_float(const mge_tok *t, double *f)
{
    if (t->type == MGE_T_INT || t->type == MGE_T_FLOAT) {
        *f = t->f;
        return 1;
    }
    if (tis(t, "inf")) {
        *f = INFINITY;
        return 1;
    }
    if (tis(t, "nan")) {
        *f = NAN;
        return 1;
    }
    return 0;
}

static mge_status want_int(parser *P, const char *what, int64_t lo, int64_t hi, int64_t *v)
{
    const mge_tok *t = &P->cur;
    char b[96];
    if (t->type == MGE_T_INT && t->i >= lo && t->i <= hi) {
        *v = t->i;
        return MGE_OK;
    }
    if (t->type == MGE_T_INT || (t->type == MGE_T_FLOAT && t->bigint))
        return perr(P, t->line, t->col, MGE_ERR_INVALID, "%s: %s is out of range (%lld..%lld)", what,
                    tdesc(t, b, sizeof b), (long long)lo, (long long)hi);
    return perr(P, t->line, t->col, MGE_ERR_INVALID, "%s: expected an integer, found %s", what, tdesc(t, b, sizeof b));
}

/* ---------------------------------------------------------------- declarations */

static mge_status parse_init(parser *P, char **init)
{
    char b[96], nb[72];
    mge_status s;
    if (P->cur.type == MGE_T_STRING) {
        if (!(*init = mge_strdup(P->cur.s)))
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_NOMEM, "out of memory");
        return next(P);
    }
    mge_tok at = P->cur;
    if (tis(&at, "zeros") || tis(&at, "ones")) {
        if (!(*init = tdup(P, &at)))
            return MGE_ERR_NOMEM;
        return next(P);
    }
    if (!tis(&at, "uniform") && !tis(&at, "normal")) {
        if (at.type == MGE_T_NAME)
            return perr(P, at.line, at.col, MGE_ERR_INVALID, "unknown init '%s' (zeros, ones, uniform(B), normal(S))",
                        tname(&at, nb, sizeof nb));
        return perr(P, at.line, at.col, MGE_ERR_FORMAT,
                    "expected an init spec (zeros, ones, uniform(B), normal(S)), found %s", tdesc(&at, b, sizeof b));
    }
    if ((s = next(P)) || (s = expect(P, MGE_T_LPAREN, "'('")))
        return s;
    mge_tok num = P->cur;
    if (num.type != MGE_T_INT && num.type != MGE_T_FLOAT)
        return perr(P, num.line, num.col, MGE_ERR_FORMAT, "expected a number, found %s", tdesc(&num, b, sizeof b));
    size_t len = at.n + num.n + 3;
    char *spec = malloc(len);
    if (!spec)
        return perr(P, at.line, at.col, MGE_ERR_NOMEM, "out of memory");
    snprintf(spec, len, "%.*s(%.*s)", (int)at.n, at.p, (int)num.n, num.p);
    *init = spec;
    if ((s = next(P)) || (s = expect(P, MGE_T_RPAREN, "')'")))
        return s;
    return MGE_OK;
}

typedef union cval {
    double f;
    int64_t i;
} cval;

static void int_range(mge_dtype dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case MGE_I8: case MGE_QS8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case MGE_U8: *lo = 0; *hi = UINT8_MAX; break;
    case MGE_I32: case MGE_QS32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case MGE_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case MGE_U16: *lo = 0; *hi = UINT16_MAX; break;
    case MGE_U32: *lo = 0; *hi = UINT32_MAX; break;
    case MGE_U64: *lo = 0; *hi = INT64_MAX; break; /* beyond: const_value reads the digits */
    case MGE_BOOL: *lo = 0; *hi = 1; break;
    default: *lo = INT64_MIN; *hi = INT64_MAX; break;
    }
}

static mge_status const_value(parser *P, mge_dtype dt, cval *v)
{
    char b[96], what[32];
    if (mge_dtype_is_float(dt)) {
        if (!tok_float(&P->cur, &v->f))
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_FORMAT, "expected a number, found %s",
                        tdesc(&P->cur, b, sizeof b));
        return next(P);
    }
    if (dt == MGE_BOOL && (tis(&P->cur, "true") || tis(&P->cur, "false"))) {
        v->i = tis(&P->cur, "true");
        return next(P);
    }
    if (dt == MGE_U64 && ((P->cur.type == MGE_T_FLOAT && P->cur.bigint) || (P->cur.type == MGE_T_INT && P->cur.i < 0))) {
        /* beyond i64, the lexer's integers: the digits read as uint64 */
        uint64_t u = 0;
        int ok = P->cur.type == MGE_T_FLOAT && P->cur.n > 0;
        for (size_t k = P->cur.p[0] == '+' ? 1 : 0; ok && k < P->cur.n; k++) {
            uint64_t dg = (uint64_t)(P->cur.p[k] - '0');
            ok = P->cur.p[k] >= '0' && P->cur.p[k] <= '9' && u <= (UINT64_MAX - dg) / 10;
            u = u * 10 + dg;
        }
        if (!ok)
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID,
                        "u64 value: %s is out of range (0..18446744073709551615)", tdesc(&P->cur, b, sizeof b));
        v->i = (int64_t)u;
        return next(P);
    }
    int64_t lo, hi;
    int_range(dt, &lo, &hi);
    snprintf(what, sizeof what, "%s value", mge_dtype_name(dt));
    mge_status s = want_int(P, what, lo, hi, &v->i);
    return s ? s : next(P);
}

/* [v, v, ...] (or one bare number): at most numel values, exactly numel when exact. */
static mge_status const_list(parser *P, mge_dtype dt, int64_t numel, int exact, const mge_tok *at, cval **vals,
                             int64_t *count)
{
    mge_status s;
    int64_t cap = 0, n = 0;
    cval *v = NULL;
    int list = P->cur.type == MGE_T_LBRACK;
    if (list && (s = next(P)))
        return s;
    while (!list || P->cur.type != MGE_T_RBRACK) {
        if (n == numel) {
            free(v);
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_SHAPE, "too many values: the shape holds %lld",
                        (long long)numel);
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            cval *nv = realloc(v, sizeof *nv * (size_t)cap);
            if (!nv) {
                free(v);
                return perr(P, P->cur.line, P->cur.col, MGE_ERR_NOMEM, "out of memory");
            }
            v = nv;
        }
        if ((s = const_value(P, dt, &v[n]))) {
            free(v);
            return s;
        }
        n++;
        if (!list || P->cur.type != MGE_T_COMMA)
            break;
        if ((s = next(P))) {
            free(v);
            return s;
        }
    }
    if (list && (s = expect(P, MGE_T_RBRACK, "',' or ']'"))) {
        free(v);
        return s;
    }
    if (exact && n != numel) {
        free(v);
        return perr(P, at->line, at->col, MGE_ERR_SHAPE, "%lld value%s given, the shape holds %lld", (long long)n,
                    n == 1 ? "" : "s", (long long)numel);
    }
    *vals = v;
    *count = n;
    return MGE_OK;
}

/* Trailing scale=[...] zero=Z axis=A of a quantized const. */
static mge_status const_quant(parser *P, mge_tensor *t)
{
    mge_status s;
    char nb[72];
    int64_t axis = -1, zero = 0;
    mge_tok at = P->cur;
    int have_scale = 0;
    while (P->cur.type == MGE_T_NAME && P->nxt.type == MGE_T_EQ) {
        mge_tok k = P->cur;
        if ((s = next(P)) || (s = next(P)))
            return s;
        if (tis(&k, "zero")) {
            if ((s = want_int(P, "zero", INT32_MIN, INT32_MAX, &zero)) || (s = next(P)))
                return s;
        } else if (tis(&k, "axis")) {
            if ((s = want_int(P, "axis", -1, t->ndim - 1, &axis)) || (s = next(P)))
                return s;
        } else if (tis(&k, "scale") && !have_scale) {
            have_scale = 1;
            int64_t n;
            cval *v;
            at = P->cur;
            int64_t most = 1;
            for (int i = 0; i < t->ndim; i++)
                most = t->dims[i] > most ? t->dims[i] : most;
            if ((s = const_list(P, MGE_F32, most, 0, &at, &v, &n)))
                return s; /* count checked below against the axis */
            if (n < 1) {
                free(v);
                return perr(P, at.line, at.col, MGE_ERR_SHAPE, "%lld scales do not fit the shape", (long long)n);
            }
            t->q.scale = malloc(sizeof(float) * (size_t)n);
            if (!t->q.scale) {
                free(v);
                return perr(P, at.line, at.col, MGE_ERR_NOMEM, "out of memory");
            }
            for (int64_t i = 0; i < n; i++)
                t->q.scale[i] = (float)v[i].f;
            t->q.nscale = (int)n;
            free(v);
        } else {
            return perr(P, k.line, k.col, MGE_ERR_INVALID, "'%s' is not a quantization key (scale, zero, axis)%s",
                        tname(&k, nb, sizeof nb), tis(&k, "scale") ? " or is given twice" : "");
        }
    }
    t->q.axis = (int)axis;
    t->q.zero = (int32_t)zero;
    int64_t want = axis < 0 ? 1 : t->dims[axis];
    if (t->q.nscale && t->q.nscale != want)
        return perr(P, at.line, at.col, MGE_ERR_SHAPE, "%d scales given, axis %lld needs %lld", t->q.nscale,
                    (long long)axis, (long long)want);
    return MGE_OK;
}

static mge_status parse_const(parser *P, mge_dtype dt, int ndim, const int64_t *dims, mge_tensor **out)
{
    mge_tok at = P->cur;
    int64_t numel, n;
    cval *v = NULL;
    mge_status s = mge_shape_numel(ndim, dims, dt, &numel, NULL, P->err);
    if (s)
        return perr(P, at.line, at.col, s, "%s", P->err->msg);
    if ((s = const_list(P, dt, numel, 1, &at, &v, &n)))
        return s;
    mge_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        free(v);
        return perr(P, at.line, at.col, MGE_ERR_NOMEM, "out of memory");
    }
    if ((s = mge_tensor_alloc(t, dt, ndim, dims, P->err))) {
        free(v);
        free(t);
        return perr(P, at.line, at.col, s, "%s", P->err->msg);
    }
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case MGE_F32: ((float *)t->data)[i] = (float)v[i].f; break;
        case MGE_F16: ((uint16_t *)t->data)[i] = mge_f32_to_f16((float)v[i].f); break;
        case MGE_BF16: ((uint16_t *)t->data)[i] = mge_f32_to_bf16((float)v[i].f); break;
        case MGE_I8: case MGE_QS8: ((int8_t *)t->data)[i] = (int8_t)v[i].i; break;
        case MGE_U8: case MGE_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)v[i].i; break;
        case MGE_I32: case MGE_QS32: ((int32_t *)t->data)[i] = (int32_t)v[i].i; break;
        case MGE_I64: ((int64_t *)t->data)[i] = v[i].i; break;
        case MGE_F64: ((double *)t->data)[i] = v[i].f; break;
        case MGE_I16: ((int16_t *)t->data)[i] = (int16_t)v[i].i; break;
        case MGE_U16: ((uint16_t *)t->data)[i] = (uint16_t)v[i].i; break;
        case MGE_U32: ((uint32_t *)t->data)[i] = (uint32_t)v[i].i; break;
        case MGE_U64: ((uint64_t *)t->data)[i] = (uint64_t)v[i].i; break;
        default: break;
        }
    }
    free(v);
    if ((dt == MGE_QS8 || dt == MGE_QS32) && (s = const_quant(P, t))) {
        mge_tensor_free(t);
        free(t);
        return s;
    }
    *out = t;
    return MGE_OK;
}

/* input / param / state / const NAME : TYPE ... */
static mge_status decl_stmt(parser *P, mge_valkind kind)
{
    mge_status s;
    char b[96];
    int line = P->cur.line;
    if ((s = next(P)))
        return s;
    mge_tok nt = P->cur;
    if (nt.type != MGE_T_NAME)
        return perr(P, nt.line, nt.col, MGE_ERR_FORMAT, "expected a name, found %s", tdesc(&nt, b, sizeof b));
    if ((s = check_new(P, &nt)) || (s = next(P)) || (s = expect(P, MGE_T_COLON, "':' after the name")))
        return s;
    mge_dtype dt = MGE_F32;
    int ndim = 0;
    int64_t dims[MGE_MAX_DIMS];
    if ((s = parse_type(P, kind == MGE_VAL_INPUT, &dt, &ndim, dims)))
        return s;
    char *init = NULL;
    mge_tensor *data = NULL;
    if ((kind == MGE_VAL_PARAM || kind == MGE_VAL_STATE) && tis(&P->cur, "init")) {
        if ((s = next(P)) || (s = expect(P, MGE_T_EQ, "'=' after init")) || (s = parse_init(P, &init)))
            goto fail;
    } else if (kind == MGE_VAL_CONST) {
        if ((s = expect(P, MGE_T_EQ, "'=' and the values of the const")) || (s = parse_const(P, dt, ndim, dims, &data)))
            goto fail;
    }
    if ((s = end_stmt(P)))
        goto fail;
    char *name = tdup(P, &nt);
    if (!name) {
        s = MGE_ERR_NOMEM;
        goto fail;
    }
    int v = mge_graph_add_value(P->g, name, kind, dt, ndim, dims, P->err);
    free(name);
    if (v < 0) {
        s = perr(P, nt.line, nt.col, P->err->code, "%s", P->err->msg);
        goto fail;
    }
    P->g->values[v].init = init;
    P->g->values[v].data = data;
    return note_lines(P, line);
fail:
    free(init);
    if (data) {
        mge_tensor_free(data);
        free(data);
    }
    return s;
}

static mge_status weights_stmt(parser *P)
{
    mge_tok kw = P->cur;
    char b[96];
    mge_status s = next(P);
    if (s)
        return s;
    if (P->flags & MGE_TEXT_NO_FILES)
        return perr(P, kw.line, kw.col, MGE_ERR_UNSUPPORTED, "weights statements are not allowed here");
    if (P->cur.type != MGE_T_STRING)
        return perr(P, P->cur.line, P->cur.col, MGE_ERR_FORMAT, "expected a quoted file name, found %s",
                    tdesc(&P->cur, b, sizeof b));
    weights_ref *nw = realloc(P->w, sizeof *nw * (size_t)(P->nw + 1));
    if (!nw)
        return perr(P, kw.line, kw.col, MGE_ERR_NOMEM, "out of memory");
    P->w = nw;
    nw[P->nw].line = kw.line;
    nw[P->nw].col = kw.col;
    if (!(nw[P->nw].path = mge_strdup(P->cur.s)))
        return perr(P, kw.line, kw.col, MGE_ERR_NOMEM, "out of memory");
    P->nw++;
    if ((s = next(P)))
        return s;
    return end_stmt(P);
}

static mge_status output_stmt(parser *P)
{
    mge_status s = next(P);
    char b[96];
    while (!s) {
        mge_tok t = P->cur;
        int v;
        if (t.type != MGE_T_NAME)
            return perr(P, t.line, t.col, MGE_ERR_FORMAT, "expected a name, found %s", tdesc(&t, b, sizeof b));
        if ((s = lookup(P, &t, &v)))
            return s;
        if ((s = mge_graph_add_output(P->g, v, P->err)))
            return perr(P, t.line, t.col, s, "%s", P->err->msg);
        if ((s = next(P)))
            return s;
        if (P->cur.type != MGE_T_COMMA)
            break;
        s = next(P);
    }
    return s ? s : end_stmt(P);
}

static mge_status minimize_stmt(parser *P)
{
    mge_tok kw = P->cur;
    char b[96];
    mge_status s = next(P);
    if (s)
        return s;
    mge_tok t = P->cur;
    int v;
    if (t.type != MGE_T_NAME)
        return perr(P, t.line, t.col, MGE_ERR_FORMAT, "expected a name, found %s", tdesc(&t, b, sizeof b));
    if (P->g->loss >= 0)
        return perr(P, kw.line, kw.col, MGE_ERR_INVALID, "minimize given twice (first on line %d)", P->loss_line);
    if ((s = lookup(P, &t, &v)))
        return s;
    P->g->loss = v;
    P->loss_line = kw.line;
    if ((s = next(P)))
        return s;
    return end_stmt(P);
}

static mge_status meta_stmt(parser *P)
{
    char b[96];
    mge_status s = next(P);
    if (s)
        return s;
    mge_tok k = P->cur;
    if (k.type != MGE_T_NAME && k.type != MGE_T_STRING)
        return perr(P, k.line, k.col, MGE_ERR_FORMAT, "expected a meta key, found %s", tdesc(&k, b, sizeof b));
    char *key = k.type == MGE_T_STRING ? mge_strdup(k.s) : tdup(P, &k), *val = NULL;
    if (!key)
        return perr(P, k.line, k.col, MGE_ERR_NOMEM, "out of memory");
    if ((s = next(P)) || (s = expect(P, MGE_T_EQ, "'=' after the meta key")))
        goto done;
    mge_tok vt = P->cur;
    if (vt.type == MGE_T_STRING)
        val = mge_strdup(vt.s);
    else if (vt.type == MGE_T_INT || vt.type == MGE_T_FLOAT)
        val = tdup(P, &vt);
    else {
        s = perr(P, vt.line, vt.col, MGE_ERR_FORMAT, "expected a string or a number, found %s", tdesc(&vt, b, sizeof b));
        goto done;
    }
    if (!val) {
        s = perr(P, vt.line, vt.col, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((s = next(P)) || (s = end_stmt(P)))
        goto done;
    if ((s = mge_graph_set_meta(P->g, key, val, P->err)))
        s = perr(P, k.line, k.col, s, "%s", P->err->msg);
done:
    free(key);
    free(val);
    return s;
}

/* ---------------------------------------------------------------- nodes */

static mge_status attr_list_names(const mge_opinfo *oi, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int j = 0; j < oi->nschema; j++) {
        int k = snprintf(buf + used, n - used, "%s%s", j ? ", " : "", mge_key_name(oi->sch[j].key));
        if (k < 0 || (size_t)k >= n - used)
            break;
        used += (size_t)k;
    }
    return MGE_OK;
}

/* One op name of an OPS attribute ("none" alone means no op). */
static mge_status ops_name(parser *P, const char *what, int allow_none, int64_t *id)
{
    const mge_tok *t = &P->cur;
    char b[96], nb[72];
    if (t->type == MGE_T_NAME && allow_none && tis(t, "none")) {
        *id = -1;
        return MGE_OK;
    }
    int op = t->type == MGE_T_NAME ? mge_op_lookup(t->p, t->n) : -1;
    if (op < 0)
        return perr(P, t->line, t->col, MGE_ERR_INVALID, "%s: expected an op name%s, found %s", what,
                    allow_none ? " or none" : "",
                    t->type == MGE_T_NAME ? (snprintf(b, sizeof b, "'%s'", tname(t, nb, sizeof nb)), b)
                                          : tdesc(t, b, sizeof b));
    *id = op;
    return MGE_OK;
}

/* NAME, none, or [NAME, NAME, ...]; leaves the last token current. */
static mge_status ops_value(parser *P, const char *what, mge_attr *a)
{
    mge_status s;
    if (P->cur.type != MGE_T_LBRACK)
        return ops_name(P, what, 1, &a->i[0]);
    if ((s = next(P)))
        return s;
    a->n = 0;
    while (P->cur.type != MGE_T_RBRACK) {
        if (a->n == MGE_MAX_DIMS)
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "%s: more than %d ops", what, MGE_MAX_DIMS);
        if ((s = ops_name(P, what, 0, &a->i[a->n])) || (s = next(P)))
            return s;
        a->n++;
        if (P->cur.type != MGE_T_COMMA)
            break;
        if ((s = next(P)))
            return s;
    }
    if (a->n == 0)
        return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "%s: needs at least one op", what);
    if (P->cur.type != MGE_T_RBRACK)
        return expect(P, MGE_T_RBRACK, "',' or ']'");
    return MGE_OK;
}

/* The value after KEY= converted by the key's type. */
static mge_status attr_value(parser *P, const mge_opinfo *oi, int key, mge_attr *a)
{
    const mge_tok *t = &P->cur;
    char b[96], what[96], nb[72];
    mge_status s;
    memset(a, 0, sizeof *a);
    a->key = key;
    a->n = 1;
    snprintf(what, sizeof what, "%s attribute '%s'", oi->name, mge_key_name(key));
    switch (mge_key_type(key)) {
    case MGE_ATTR_INT:
        if ((s = want_int(P, what, INT64_MIN, INT64_MAX, &a->i[0])))
            return s;
        break;
    case MGE_ATTR_INTS:
        if (t->type == MGE_T_LBRACK) {
            if ((s = next(P)))
                return s;
            a->n = 0;
            while (P->cur.type != MGE_T_RBRACK) {
                if (a->n == MGE_MAX_DIMS)
                    return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "%s: more than %d values", what,
                                MGE_MAX_DIMS);
                if ((s = want_int(P, what, INT64_MIN, INT64_MAX, &a->i[a->n])) || (s = next(P)))
                    return s;
                a->n++;
                if (P->cur.type != MGE_T_COMMA)
                    break;
                if ((s = next(P)))
                    return s;
            }
            if (a->n == 0)
                return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "%s: needs at least one value", what);
            if (P->cur.type != MGE_T_RBRACK)
                return expect(P, MGE_T_RBRACK, "',' or ']'");
        } else if ((s = want_int(P, what, INT64_MIN, INT64_MAX, &a->i[0]))) {
            return s;
        }
        break;
    case MGE_ATTR_FLOAT:
        if (!tok_float(t, &a->f))
            return perr(P, t->line, t->col, MGE_ERR_INVALID, "%s: expected a number, found %s", what,
                        tdesc(t, b, sizeof b));
        break;
    case MGE_ATTR_BOOL:
        if (!tis(t, "true") && !tis(t, "false"))
            return perr(P, t->line, t->col, MGE_ERR_INVALID, "%s: expected true or false, found %s", what,
                        tdesc(t, b, sizeof b));
        a->i[0] = tis(t, "true");
        break;
    case MGE_ATTR_OPS:
        if ((s = ops_value(P, what, a)))
            return s;
        break;
    case MGE_ATTR_ENUM:
        a->i[0] = t->type == MGE_T_NAME ? mge_key_enum_lookup(key, t->p, t->n) : -1;
        if (a->i[0] < 0)
            return perr(P, t->line, t->col, MGE_ERR_INVALID, "%s: expected one of %s, found %s", what,
                        mge_key_enum_words(key),
                        t->type == MGE_T_NAME ? (snprintf(b, sizeof b, "'%s'", tname(t, nb, sizeof nb)), b)
                                              : tdesc(t, b, sizeof b));
        break;
    case MGE_ATTR_FLOATS: {
        int list = t->type == MGE_T_LBRACK;
        if (list && (s = next(P)))
            return s;
        a->n = 0;
        while (!list || P->cur.type != MGE_T_RBRACK) {
            double v;
            if (a->n == MGE_MAX_DIMS)
                return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "%s: more than %d values", what,
                            MGE_MAX_DIMS);
            if (!tok_float(&P->cur, &v))
                return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "%s: expected a number, found %s", what,
                            tdesc(&P->cur, b, sizeof b));
            mge_attr_float_set(a, a->n++, v);
            if (!list)
                break;
            if ((s = next(P)))
                return s;
            if (P->cur.type != MGE_T_COMMA)
                break;
            if ((s = next(P)))
                return s;
        }
        if (list && a->n == 0)
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "%s: needs at least one value", what);
        if (list && P->cur.type != MGE_T_RBRACK)
            return expect(P, MGE_T_RBRACK, "',' or ']'");
        break;
    }
    case MGE_ATTR_DTYPE: {
        mge_dtype dt;
        if (t->type != MGE_T_NAME || !mge_dtype_parse(t->p, t->n, &dt))
            return perr(P, t->line, t->col, MGE_ERR_INVALID,
                        "%s: expected a dtype (f32, f16, bf16, f64, i8, u8, i16, u16, i32, u32, i64, u64, bool, qs8, qs32), found %s", what,
                        t->type == MGE_T_NAME ? (snprintf(b, sizeof b, "'%s'", tname(t, nb, sizeof nb)), b)
                                              : tdesc(t, b, sizeof b));
        a->i[0] = dt;
        break;
    }
    }
    return next(P);
}

static mge_status unknown_op(parser *P, const mge_tok *t)
{
    const char *names[MGE_NOPS];
    char sug[256], nb[72];
    for (int i = 0; i < MGE_NOPS; i++)
        names[i] = mge_op_info(i)->name;
    suggest(sug, sizeof sug, names, MGE_NOPS, t);
    return perr(P, t->line, t->col, MGE_ERR_INVALID, "unknown op '%s'%s", tname(t, nb, sizeof nb), sug);
}

/* NAME[, NAME...] = op(inputs..., key=value...) */
static mge_status node_stmt(parser *P)
{
    mge_status s;
    char b[96], nb[72];
    mge_tok st = P->cur;
    mge_tok outs[MAX_OUTS];
    int nout = 0;
    for (;;) {
        if (P->cur.type != MGE_T_NAME)
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_FORMAT, "expected a name, found %s",
                        tdesc(&P->cur, b, sizeof b));
        if (nout == MAX_OUTS)
            return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "more than %d outputs", MAX_OUTS);
        if ((s = check_new(P, &P->cur)))
            return s;
        for (int i = 0; i < nout; i++)
            if (outs[i].n == P->cur.n && memcmp(outs[i].p, P->cur.p, P->cur.n) == 0)
                return perr(P, P->cur.line, P->cur.col, MGE_ERR_INVALID, "'%s' is named twice",
                            tname(&P->cur, nb, sizeof nb));
        outs[nout++] = P->cur;
        if ((s = next(P)))
            return s;
        if (P->cur.type != MGE_T_COMMA)
            break;
        if ((s = next(P)))
            return s;
    }
    if ((s = expect(P, MGE_T_EQ, "'=' or ','")))
        return s;
    mge_tok opt = P->cur;
    if (opt.type != MGE_T_NAME)
        return perr(P, opt.line, opt.col, MGE_ERR_FORMAT, "expected an op name, found %s", tdesc(&opt, b, sizeof b));
    int op = mge_op_lookup(opt.p, opt.n);
    if (op < 0 && opt.n == 8 && memcmp(opt.p, "upsample", 8) == 0)
        op = MGE_OP_RESIZE; /* F.upsample's spelling; printed back as resize */
    if (op < 0)
        return unknown_op(P, &opt);
    const mge_opinfo *oi = mge_op_info(op);
    if ((s = next(P)) || (s = expect(P, MGE_T_LPAREN, "'(' after the op name")))
        return s;
    int in[MAX_IN + 8], nin = 0, nattr = 0;
    mge_attr attrs[MAX_ATTRS];
    while (P->cur.type != MGE_T_RPAREN) {
        mge_tok t = P->cur;
        if (t.type == MGE_T_NAME && P->nxt.type == MGE_T_EQ) {
            int key = mge_key_lookup(t.p, t.n), found = 0;
            for (int j = 0; j < oi->nschema && key >= 0; j++)
                found |= oi->sch[j].key == key;
            if (!found) {
                char al[256];
                attr_list_names(oi, al, sizeof al);
                if (!oi->nschema)
                    return perr(P, t.line, t.col, MGE_ERR_INVALID, "%s takes no attributes, found '%s'", oi->name,
                                tname(&t, nb, sizeof nb));
                return perr(P, t.line, t.col, MGE_ERR_INVALID, "%s has no attribute '%s' (attributes: %s)", oi->name,
                            tname(&t, nb, sizeof nb), al);
            }
            for (int j = 0; j < nattr; j++)
                if (attrs[j].key == key)
                    return perr(P, t.line, t.col, MGE_ERR_INVALID, "attribute '%s' given twice", mge_key_name(key));
            if ((s = next(P)) || (s = next(P)) || (s = attr_value(P, oi, key, &attrs[nattr])))
                return s;
            nattr++;
        } else if (t.type == MGE_T_NAME) {
            if (nattr)
                return perr(P, t.line, t.col, MGE_ERR_FORMAT, "inputs must come before attributes");
            if (nin == oi->max_in || nin == MAX_IN)
                return perr(P, t.line, t.col, MGE_ERR_INVALID, "too many inputs: %s takes at most %d", oi->name,
                            oi->max_in);
            if ((s = lookup(P, &t, &in[nin])) || (s = next(P)))
                return s;
            nin++;
        } else {
            return perr(P, t.line, t.col, MGE_ERR_FORMAT, "expected an input name or key=value, found %s",
                        tdesc(&t, b, sizeof b));
        }
        if (P->cur.type != MGE_T_COMMA)
            break;
        if ((s = next(P)))
            return s;
    }
    if ((s = expect(P, MGE_T_RPAREN, "',' or ')'")) || (s = end_stmt(P)))
        return s;

    char *names[MAX_OUTS] = {0};
    for (int i = 0; i < nout; i++)
        if (!(names[i] = tdup(P, &outs[i]))) {
            s = MGE_ERR_NOMEM;
            goto done;
        }
    mge_error e;
    mge_error_clear(&e);
    /* lstm(x, h0, c0) and gru(x, h0) create their params too: the state
     * inputs are no declared params (a short state, lstm(x, h0), too, for
     * the op's message about it) */
    int declared = 0;
    for (int k = 1; k < nin; k++)
        declared |= P->g->values[in[k]].kind == MGE_VAL_PARAM;
    int nstate = op == MGE_OP_LSTM ? 2 : op == MGE_OP_GRU || op == MGE_OP_RNN ? 1 : 0;
    if ((oi->flags & MGE_OPF_LAYER) && (nin == 1 || (!declared && nin <= 1 + nstate))) {
        int np = 0;
        if ((s = mge_graph_layer_params(P->g, names[0], op, in[0], nattr, attrs, in + nin, &np, &e))) {
            s = perr(P, st.line, st.col, s, "%s: %s", names[0], e.msg);
            goto done;
        }
        nin += np;
    }
    if (mge_graph_add_node(P->g, names[0], op, nin, in, nattr, attrs, nout, (const char *const *)names, &e) < 0)
        s = perr(P, st.line, st.col, e.code ? e.code : MGE_ERR_INVALID, "%s: %s", names[0], e.msg);
done:
    for (int i = 0; i < nout; i++)
        free(names[i]);
    if (s == MGE_OK)
        s = note_lines(P, st.line);
    return s;
}

/* ---------------------------------------------------------------- driver */

static mge_status statement(parser *P)
{
    const mge_tok *t = &P->cur;
    char b[96];
    if (t->type != MGE_T_NAME)
        return perr(P, t->line, t->col, MGE_ERR_FORMAT, "expected a statement, found %s", tdesc(t, b, sizeof b));
    if (P->nxt.type == MGE_T_EQ || P->nxt.type == MGE_T_COMMA)
        return node_stmt(P);
    if (tis(t, "input"))
        return decl_stmt(P, MGE_VAL_INPUT);
    if (tis(t, "param"))
        return decl_stmt(P, MGE_VAL_PARAM);
    if (tis(t, "state"))
        return decl_stmt(P, MGE_VAL_STATE);
    if (tis(t, "const"))
        return decl_stmt(P, MGE_VAL_CONST);
    if (tis(t, "weights"))
        return weights_stmt(P);
    if (tis(t, "output"))
        return output_stmt(P);
    if (tis(t, "minimize"))
        return minimize_stmt(P);
    if (tis(t, "meta"))
        return meta_stmt(P);
    char nb[72];
    return perr(P, t->line, t->col, MGE_ERR_FORMAT,
                "unknown statement '%s' (input, param, state, const, weights, output, minimize, meta, "
                "or NAME = op(...))",
                tname(t, nb, sizeof nb));
}

static mge_status bind_weights(parser *P)
{
    for (int i = 0; i < P->nw; i++) {
        weights_ref *w = &P->w[i];
        char *path = w->path;
        char *joined = NULL;
        if (P->base_dir && *P->base_dir && path[0] != '/' && strcmp(path, "-") != 0) {
            size_t len = strlen(P->base_dir) + strlen(path) + 2;
            if (!(joined = malloc(len)))
                return perr(P, w->line, w->col, MGE_ERR_NOMEM, "out of memory");
            snprintf(joined, len, "%s/%s", P->base_dir, path);
            path = joined;
        }
        mge_tlist l;
        memset(&l, 0, sizeof l);
        mge_error e;
        mge_error_clear(&e);
        mge_status s = mge_npz_read_path(path, &l, &e);
        if (!s)
            s = mge_params_bind(P->g, &l, 1, &e);
        mge_tlist_free(&l);
        if (s)
            s = perr(P, w->line, w->col, s, "weights \"%s\": %s", path, e.msg);
        free(joined);
        if (s)
            return s;
    }
    return MGE_OK;
}

mge_status mge_text_parse_ex(const char *src, size_t n, const char *base_dir, unsigned flags, mge_graph **out,
                             mge_error *err)
{
    mge_error local;
    parser P;
    memset(&P, 0, sizeof P);
    P.err = err ? err : &local;
    P.base_dir = base_dir;
    P.flags = flags;
    *out = NULL;
    mge_error_clear(P.err);
    if (!src && n)
        return mge_error_set(P.err, MGE_ERR_INVALID, "no text");
    P.g = mge_graph_new();
    if (!P.g)
        return mge_error_set(P.err, MGE_ERR_NOMEM, "out of memory");
    mge_lex_init(&P.lx, src ? src : "", n);
    mge_status s = mge_lex_next(&P.lx, &P.nxt, P.err);
    if (!s)
        s = next(&P);
    while (!s && P.cur.type != MGE_T_EOF) {
        if (P.cur.type == MGE_T_NL)
            s = next(&P);
        else
            s = statement(&P);
    }
    if (!s)
        s = bind_weights(&P);
    if (!s) { /* int8 scales that disagree are the text's fault: point at the reader's line */
        int bad = -1;
        if ((s = mge_quant_check(P.g, &bad, P.err)) && bad >= 0 && P.g->nodes[bad].nout > 0) {
            int v = P.g->nodes[bad].out[0];
            P.err->line = v < P.ndef ? P.defline[v] : 1;
            P.err->col = 1;
        }
    }
    if (!s && (s = mge_graph_validate(P.g, P.err)))
        mge_error_prefix(P.err, "internal");
    mge_tok_clear(&P.cur);
    if (P.nxt.s)
        mge_tok_clear(&P.nxt);
    for (int i = 0; i < P.nw; i++)
        free(P.w[i].path);
    free(P.w);
    free(P.defline);
    if (s) {
        mge_graph_free(P.g);
        return s;
    }
    *out = P.g;
    return MGE_OK;
}

mge_status mge_text_parse(const char *src, size_t n, const char *base_dir, mge_graph **g, mge_error *err)
{
    return mge_text_parse_ex(src, n, base_dir, 0, g, err);
}
