/* symdim.c — symbolic dimensions: the process-wide table of symbols and of
 * expressions over them, shape bindings, and fitting an op's output dims
 * to expressions from its concrete outputs at probe bindings.
 *
 * A template dim d >= 0 is a number; d < 0 is entry -1-d of the table.
 * The table is process-wide (not per graph) so that dims copy between
 * graphs (passes, clones, quantization) as plain integers. Entries are
 * interned and never change or move: readers need no lock once they hold
 * a code; only interning takes the mutex. */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { SD_SYM, SD_DYN, SD_ADD, SD_ADDC, SD_MUL, SD_DIV };

typedef struct sd_ent {
    unsigned char op;
    int64_t a, b;       /* operands: dim codes; ADDC: b is a nonzero constant of any sign;
                           MUL: b may be a constant; DIV: b is a constant >= 2 */
    char name[32];      /* SD_SYM */
} sd_ent;

#define SD_MAX 65536
#define SD_HASH (2 * SD_MAX)

static sd_ent tab[SD_MAX] = {{SD_SYM, 0, 0, "N"}, {SD_DYN, 0, 0, "?"}};
static _Atomic int tab_n = 2;
static int hash_slot[SD_HASH]; /* entry index + 1 */
static int hash_ready;
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;

static const sd_ent *ent(int64_t code)
{
    int64_t i = -1 - code;
    if (code >= 0 || i >= atomic_load_explicit(&tab_n, memory_order_acquire))
        return NULL;
    return &tab[i];
}

static uint64_t ent_hash(int op, int64_t a, int64_t b, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)op;
    h = (h ^ (uint64_t)a) * 1099511628211ull;
    h = (h ^ (uint64_t)b) * 1099511628211ull;
    if (name)
        h ^= mge_hash_str(name);
    return h * 0x9E3779B97F4A7C15ull;
}

static int same(const sd_ent *e, int op, int64_t a, int64_t b, const char *name)
{
    if (e->op != op)
        return 0;
    if (op == SD_SYM)
        return strcmp(e->name, name) == 0;
    return e->a == a && e->b == b;
}

static void hash_put(int idx)
{
    const sd_ent *e = &tab[idx];
    uint64_t h = ent_hash(e->op, e->a, e->b, e->op == SD_SYM ? e->name : NULL) & (SD_HASH - 1);
    while (hash_slot[h])
        h = (h + 1) & (SD_HASH - 1);
    hash_slot[h] = idx + 1;
}

/* The code of entry (op, a, b, name), added when new; 0 when the table is full. */
static int64_t intern(int op, int64_t a, int64_t b, const char *name)
{
    pthread_mutex_lock(&tab_mu);
    if (!hash_ready) {
        for (int i = 0; i < tab_n; i++)
            if (tab[i].op != SD_DYN)
                hash_put(i);
        hash_ready = 1;
    }
    uint64_t h = ent_hash(op, a, b, name) & (SD_HASH - 1);
    int64_t code = 0;
    while (hash_slot[h]) {
        if (same(&tab[hash_slot[h] - 1], op, a, b, name)) {
            code = -(int64_t)hash_slot[h];
            break;
        }
        h = (h + 1) & (SD_HASH - 1);
    }
    int n = tab_n;
    if (!code && n < SD_MAX) {
        sd_ent *e = &tab[n];
        e->op = (unsigned char)op;
        e->a = a;
        e->b = b;
        if (name)
            snprintf(e->name, sizeof e->name, "%s", name);
        hash_slot[h] = n + 1;
        atomic_store_explicit(&tab_n, n + 1, memory_order_release);
        code = -1 - (int64_t)n;
    }
    pthread_mutex_unlock(&tab_mu);
    return code;
}

static int sym_char(char c, int first)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (!first && c >= '0' && c <= '9');
}

mge_status mge_dim_symbol(const char *name, size_t n, int64_t *code, mge_error *err)
{
    if (n == 0 || n >= sizeof tab[0].name || !sym_char(name[0], 1))
        return mge_error_set(err, MGE_ERR_SHAPE, "'%.*s' is not a symbol name (a letter or '_', then letters, digits or '_', at most %d)",
                             (int)(n > 64 ? 64 : n), name, (int)sizeof tab[0].name - 1);
    for (size_t i = 1; i < n; i++)
        if (!sym_char(name[i], 0))
            return mge_error_set(err, MGE_ERR_SHAPE, "'%.*s' is not a symbol name", (int)(n > 64 ? 64 : n), name);
    char b[32];
    memcpy(b, name, n);
    b[n] = 0;
    int64_t c = intern(SD_SYM, 0, 0, b);
    if (!c)
        return mge_error_set(err, MGE_ERR_NOMEM, "too many symbolic dimensions in this process (%d)", SD_MAX);
    *code = c;
    return MGE_OK;
}

int mge_dim_is_symbol(int64_t code)
{
    const sd_ent *e = ent(code);
    return e && e->op == SD_SYM;
}

const char *mge_dim_name(int64_t code)
{
    const sd_ent *e = ent(code);
    return e && e->op == SD_SYM ? e->name : NULL;
}

/* ---------------------------------------------------------------- building */

/* a + c for a constant c of any sign. */
static int64_t dim_addc(int64_t a, int64_t c)
{
    if (a == MGE_DIM_DYN)
        return MGE_DIM_DYN;
    if (a >= 0)
        return a + c >= 0 ? a + c : MGE_DIM_DYN;
    if (c == 0)
        return a;
    const sd_ent *e = ent(a);
    if (e && e->op == SD_ADDC) /* (x + c) + d */
        return dim_addc(e->a, e->b + c);
    int64_t r = intern(SD_ADDC, a, c, NULL);
    return r ? r : MGE_DIM_DYN;
}

int64_t mge_dim_add(int64_t a, int64_t b)
{
    if (a == MGE_DIM_DYN || b == MGE_DIM_DYN)
        return MGE_DIM_DYN;
    if (a >= 0 && b >= 0)
        return a + b;
    if (a >= 0)
        return dim_addc(b, a);
    if (b >= 0)
        return dim_addc(a, b);
    const sd_ent *e = ent(a), *f = ent(b);
    if (e && e->op == SD_ADDC) /* constants outermost */
        return dim_addc(mge_dim_add(e->a, b), e->b);
    if (f && f->op == SD_ADDC)
        return dim_addc(mge_dim_add(a, f->a), f->b);
    if (a > b) { /* one order for a + b and b + a */
        int64_t t = a;
        a = b;
        b = t;
    }
    int64_t c = intern(SD_ADD, a, b, NULL);
    return c ? c : MGE_DIM_DYN;
}

int64_t mge_dim_mul(int64_t a, int64_t b)
{
    if (a == MGE_DIM_DYN || b == MGE_DIM_DYN)
        return MGE_DIM_DYN;
    if (a >= 0 && b >= 0)
        return a * b;
    if (a >= 0) {
        int64_t t = a;
        a = b;
        b = t;
    }
    if (b == 1)
        return a;
    if (b == 0)
        return 0;
    const sd_ent *e = ent(a);
    if (b >= 0 && e && e->op == SD_MUL && e->b >= 0 && e->b <= INT64_MAX / b) /* (x * m) * c */
        return mge_dim_mul(e->a, e->b * b);
    if (b < 0 && a > b) { /* one order for x * y and y * x */
        int64_t t = a;
        a = b;
        b = t;
    }
    int64_t c = intern(SD_MUL, a, b, NULL);
    return c ? c : MGE_DIM_DYN;
}

int64_t mge_dim_div(int64_t a, int64_t d)
{
    if (a == MGE_DIM_DYN || d < 1)
        return MGE_DIM_DYN;
    if (d == 1)
        return a;
    if (a >= 0)
        return a / d;
    const sd_ent *e = ent(a);
    if (e && e->op == SD_DIV && e->b <= INT64_MAX / d) /* floor(floor(x/p)/q) = floor(x/(p*q)) */
        return mge_dim_div(e->a, e->b * d);
    int64_t c = intern(SD_DIV, a, d, NULL);
    return c ? c : MGE_DIM_DYN;
}

/* ---------------------------------------------------------------- evaluating */

mge_status mge_dim_eval(int64_t code, const mge_binding *b, int64_t *out, mge_error *err)
{
    if (code >= 0) {
        *out = code;
        return MGE_OK;
    }
    const sd_ent *e = ent(code);
    if (!e)
        return mge_error_set(err, MGE_ERR_INVALID, "unknown symbolic dimension %lld", (long long)code);
    int64_t x, y;
    mge_status s;
    switch (e->op) {
    case SD_SYM:
        if (!mge_binding_get(b, code, out))
            return mge_error_set(err, MGE_ERR_SHAPE, "no value for the symbol %s", e->name);
        return MGE_OK;
    case SD_DYN:
        return mge_error_set(err, MGE_ERR_SHAPE, "a dimension known only at plan time has no value here");
    default:
        break;
    }
    if ((s = mge_dim_eval(e->a, b, &x, err)))
        return s;
    if (e->op == SD_DIV) {
        *out = x >= 0 ? x / e->b : -((-x + e->b - 1) / e->b); /* floor */
        return MGE_OK;
    }
    if (e->op == SD_ADDC)
        y = e->b;
    else if ((s = mge_dim_eval(e->b, b, &y, err)))
        return s;
    int64_t r;
    int ovf = e->op != SD_MUL ? __builtin_add_overflow(x, y, &r) : __builtin_mul_overflow(x, y, &r);
    if (ovf) {
        char eb[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "the dimension %s overflows int64", mge_dim_str(code, eb, sizeof eb));
    }
    *out = r;
    return MGE_OK;
}

/* ---------------------------------------------------------------- printing */

static size_t put(char *b, size_t n, size_t k, const char *s)
{
    size_t l = strlen(s);
    if (k < n) {
        size_t c = l < n - k - 1 ? l : n - k - 1;
        memcpy(b + k, s, c);
        b[k + c] = 0;
    }
    return k + l;
}

/* prec: 0 top (sum), 1 product operand, 2 atom */
static size_t print(int64_t code, int prec, char *b, size_t n, size_t k)
{
    char num[32];
    if (code >= 0) {
        snprintf(num, sizeof num, "%lld", (long long)code);
        return put(b, n, k, num);
    }
    const sd_ent *e = ent(code);
    if (!e)
        return put(b, n, k, "?");
    if (e->op == SD_SYM || e->op == SD_DYN)
        return put(b, n, k, e->name);
    int need = e->op == SD_ADD || e->op == SD_ADDC ? 0 : 1;
    if (prec > need)
        k = put(b, n, k, "(");
    if (e->op == SD_ADDC) {
        k = print(e->a, 0, b, n, k);
        snprintf(num, sizeof num, "%+lld", (long long)e->b);
        k = put(b, n, k, num);
    } else if (e->op == SD_ADD) {
        k = print(e->a, 0, b, n, k);
        k = put(b, n, k, "+");
        k = print(e->b, 0, b, n, k);
    } else if (e->op == SD_MUL) {
        /* constants first: 2*H reads better than H*2 */
        if (e->b >= 0) {
            k = print(e->b, 2, b, n, k);
            k = put(b, n, k, "*");
            k = print(e->a, 1, b, n, k);
        } else {
            k = print(e->a, 1, b, n, k);
            k = put(b, n, k, "*");
            k = print(e->b, 2, b, n, k);
        }
    } else {
        k = print(e->a, 1, b, n, k);
        snprintf(num, sizeof num, "/%lld", (long long)e->b);
        k = put(b, n, k, num);
    }
    if (prec > need)
        k = put(b, n, k, ")");
    return k;
}

char *mge_dim_str(int64_t code, char *b, size_t n)
{
    if (n)
        b[0] = 0;
    print(code, 0, b, n, 0);
    return b;
}

int mge_dim_symbols(int64_t code, int64_t *syms, int max)
{
    const sd_ent *e = ent(code);
    if (!e || e->op == SD_DYN)
        return 0;
    if (e->op == SD_SYM) {
        if (max > 0)
            syms[0] = code;
        return 1;
    }
    int k = mge_dim_symbols(e->a, syms, max);
    if (e->op == SD_ADDC || e->op == SD_DIV || e->b >= 0)
        return k;
    return k + mge_dim_symbols(e->b, syms + (k < max ? k : max), max > k ? max - k : 0);
}

/* ---------------------------------------------------------------- bindings */

int mge_binding_get(const mge_binding *b, int64_t sym, int64_t *v)
{
    for (int i = 0; b && i < b->n; i++)
        if (b->sym[i] == sym) {
            if (v)
                *v = b->val[i];
            return 1;
        }
    return 0;
}

mge_status mge_binding_set(mge_binding *b, int64_t sym, int64_t v, mge_error *err)
{
    if (!mge_dim_is_symbol(sym))
        return mge_error_set(err, MGE_ERR_INVALID, "binding: %lld is not a symbol", (long long)sym);
    if (v < 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "binding: %s = %lld is negative", mge_dim_name(sym), (long long)v);
    for (int i = 0; i < b->n; i++)
        if (b->sym[i] == sym) {
            b->val[i] = v;
            return MGE_OK;
        }
    if (b->n == MGE_MAX_SYMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "more than %d symbols in one binding", MGE_MAX_SYMS);
    b->sym[b->n] = sym;
    b->val[b->n++] = v;
    return MGE_OK;
}

int mge_binding_equal(const mge_binding *a, const mge_binding *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++) {
        int64_t v;
        if (!mge_binding_get(b, a->sym[i], &v) || v != a->val[i])
            return 0;
    }
    return 1;
}

char *mge_binding_str(const mge_binding *b, char *buf, size_t n)
{
    size_t k = 0;
    if (n)
        buf[0] = 0;
    for (int i = 0; b && i < b->n; i++) {
        char item[64];
        snprintf(item, sizeof item, "%s%s=%lld", i ? "," : "", mge_dim_name(b->sym[i]), (long long)b->val[i]);
        k = put(buf, n, k, item);
    }
    return buf;
}

int mge_graph_symbols(const mge_graph *g, int64_t *syms, int max)
{
    int n = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const mge_value *v = &g->values[g->inputs[i]];
        for (int k = 0; k < v->ndim; k++) {
            if (!mge_dim_is_symbol(v->dims[k]))
                continue;
            int seen = 0;
            for (int j = 0; j < n && j < max; j++)
                seen |= syms[j] == v->dims[k];
            if (!seen) {
                if (n < max)
                    syms[n] = v->dims[k];
                n++;
            }
        }
    }
    return n;
}

/* ---------------------------------------------------------------- fitting */

/* Whether y[p] == f(x[p]) for floor((x + a) / d) at every probe. */
static int fits_div(int np, const int64_t *y, const int64_t *x, int64_t a, int64_t d)
{
    for (int p = 0; p < np; p++) {
        int64_t t = x[p] + a;
        int64_t q = t >= 0 ? t / d : -((-t + d - 1) / d);
        if (q != y[p])
            return 0;
    }
    return 1;
}

int64_t mge_dim_fit(int np, const int64_t *y, int ncand, const int64_t *cand, const int64_t *cv)
{
    int all_same = 1;
    for (int p = 1; p < np; p++)
        all_same &= y[p] == y[0];
    if (all_same)
        return y[0];
    /* x + c */
    for (int j = 0; j < ncand; j++) {
        const int64_t *x = cv + (size_t)j * (size_t)np;
        int ok = 1;
        for (int p = 1; p < np && ok; p++)
            ok = y[p] - x[p] == y[0] - x[0];
        if (ok)
            return dim_addc(cand[j], y[0] - x[0]);
    }
    /* m * x */
    for (int j = 0; j < ncand; j++) {
        const int64_t *x = cv + (size_t)j * (size_t)np;
        if (x[0] == 0 || y[0] % x[0])
            continue;
        int64_t m = y[0] / x[0];
        int ok = m >= 2;
        for (int p = 1; p < np && ok; p++)
            ok = x[p] * m == y[p];
        if (ok)
            return mge_dim_mul(cand[j], m);
    }
    /* floor((x + a) / d) over a symbol (a chain of convolutions and pools
     * on H is one such expression): d from the slope; the probes must pin a
     * down to one value, or the dim is left to plan time */
    for (int j = 0; j < ncand; j++) {
        if (!mge_dim_is_symbol(cand[j]))
            continue;
        const int64_t *x = cv + (size_t)j * (size_t)np;
        int lo = 0, hi = 0;
        for (int p = 1; p < np; p++) {
            if (x[p] < x[lo])
                lo = p;
            if (x[p] > x[hi])
                hi = p;
        }
        if (y[hi] <= y[lo])
            continue;
        int64_t d0 = (x[hi] - x[lo]) / (y[hi] - y[lo]);
        for (int64_t d = d0 - 1; d <= d0 + 1; d++) {
            if (d < 2 || d > 4096)
                continue;
            /* each probe allows a in [y d - x, y d - x + d - 1] */
            int64_t alo = INT64_MIN, ahi = INT64_MAX;
            for (int p = 0; p < np; p++) {
                int64_t l = y[p] * d - x[p], h = l + d - 1;
                alo = l > alo ? l : alo;
                ahi = h < ahi ? h : ahi;
            }
            if (alo == ahi && fits_div(np, y, x, alo, d))
                return mge_dim_div(dim_addc(cand[j], alo), d);
        }
    }
    /* x1 + x2 + c and m * x1 * x2 */
    for (int i = 0; i < ncand; i++)
        for (int j = i; j < ncand; j++) {
            const int64_t *x1 = cv + (size_t)i * (size_t)np, *x2 = cv + (size_t)j * (size_t)np;
            int ok = 1;
            for (int p = 1; p < np && ok; p++)
                ok = y[p] - x1[p] - x2[p] == y[0] - x1[0] - x2[0];
            if (ok)
                return dim_addc(mge_dim_add(cand[i], cand[j]), y[0] - x1[0] - x2[0]);
            int64_t pr = x1[0] * x2[0];
            if (pr == 0 || y[0] % pr)
                continue;
            int64_t m = y[0] / pr;
            ok = 1;
            for (int p = 1; p < np && ok; p++)
                ok = x1[p] * x2[p] * m == y[p];
            if (ok)
                return mge_dim_mul(mge_dim_mul(cand[i], cand[j]), m);
        }
    /* m * x1 * x2 * x3 (a flatten over three symbolic dims) */
    for (int i = 0; i < ncand; i++)
        for (int j = i; j < ncand; j++)
            for (int l = j; l < ncand; l++) {
                const int64_t *x1 = cv + (size_t)i * (size_t)np, *x2 = cv + (size_t)j * (size_t)np,
                              *x3 = cv + (size_t)l * (size_t)np;
                int64_t pr = x1[0] * x2[0] * x3[0];
                if (pr == 0 || y[0] % pr)
                    continue;
                int64_t m = y[0] / pr;
                int ok = 1;
                for (int p = 1; p < np && ok; p++)
                    ok = x1[p] * x2[p] * x3[p] * m == y[p];
                if (ok)
                    return mge_dim_mul(mge_dim_mul(mge_dim_mul(cand[i], cand[j]), cand[l]), m);
            }
    return MGE_DIM_DYN;
}
