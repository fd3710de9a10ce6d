/* csv.c — numeric CSV: a small RFC 4180 tokenizer (quotes matter mostly for
 * header names), numbers with strtod, and the table as a dataset. */
#include "csv.h"

#include "internal.h"
#include "unpack.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void mge_csv_free(mge_csv *t)
{
    if (!t)
        return;
    for (int i = 0; t->names && i < t->ncols; i++)
        free(t->names[i]);
    free(t->names);
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* One record's cells, unquoted, NUL-separated in buf; off[i] starts cell i. */
typedef struct cells {
    mge_buf buf;
    size_t *off;
    int n, cap;
} cells;

static int cells_push(cells *c, size_t at)
{
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 16;
        size_t *no = realloc(c->off, sizeof *no * (size_t)nc);
        if (!no)
            return -1;
        c->off = no;
        c->cap = nc;
    }
    c->off[c->n++] = at;
    return 0;
}

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* A line holding nothing but spaces: skipped like an empty one. */
static int blank_line(const char *p, size_t n, size_t i)
{
    while (i < n && is_space(p[i]))
        i++;
    return i == n || p[i] == '\n' || (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n');
}

/* Reads the record at *pos (line *line) into c. */
static mge_status read_record(const char *p, size_t n, size_t *pos, int64_t *line, cells *c, const char *what,
                              mge_error *err)
{
    size_t i = *pos;
    int64_t first = *line;
    c->n = 0;
    c->buf.n = 0;
    for (;;) {
        if (cells_push(c, c->buf.n))
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        size_t j = i;
        while (j < n && is_space(p[j]))
            j++;
        if (j < n && p[j] == '"') {
            i = j + 1;
            for (;;) {
                if (i >= n)
                    return mge_error_set(err, MGE_ERR_FORMAT, "%s: line %lld, column %d: a quote opened here is "
                                         "never closed", what, (long long)first, c->n);
                if (p[i] == '"') {
                    if (i + 1 < n && p[i + 1] == '"') {
                        mge_buf_put(&c->buf, "\"", 1);
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                if (p[i] == '\n')
                    (*line)++;
                mge_buf_put(&c->buf, p + i, 1);
                i++;
            }
            while (i < n && is_space(p[i]))
                i++;
            if (i < n && p[i] != ',' && p[i] != '\n' && !(p[i] == '\r' && i + 1 < n && p[i + 1] == '\n'))
                return mge_error_set(err, MGE_ERR_FORMAT, "%s: line %lld, column %d: text after a closing quote",
                                     what, (long long)*line, c->n);
        } else {
            size_t s = i;
            while (i < n && p[i] != ',' && p[i] != '\n' && !(p[i] == '\r' && i + 1 < n && p[i + 1] == '\n'))
                i++;
            mge_buf_put(&c->buf, p + s, i - s);
        }
        mge_buf_put(&c->buf, "", 1);
        if (c->buf.failed)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        if (i < n && p[i] == ',') {
            i++;
            continue;
        }
        if (i < n && p[i] == '\r')
            i++;
        if (i < n && p[i] == '\n') {
            i++;
            (*line)++;
        }
        break;
    }
    *pos = i;
    return MGE_OK;
}

/* s as a finite number (spaces around it allowed); 0 on success. */
static int parse_num(const char *s, double *v)
{
    while (is_space(*s))
        s++;
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (end == s)
        return -1;
    while (is_space(*end))
        end++;
    if (*end || !isfinite(d))
        return -1;
    *v = d;
    return 0;
}

static mge_status bad_cell(mge_error *err, const char *what, int64_t line, int col, const mge_csv *t, const char *cell)
{
    char name[160] = "";
    if (t->names)
        snprintf(name, sizeof name, " ('%.120s')", t->names[col]);
    while (is_space(*cell))
        cell++;
    if (!*cell)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: line %lld, column %d%s: empty cell (every cell must be a "
                             "number)", what, (long long)line, col + 1, name);
    return mge_error_set(err, MGE_ERR_FORMAT, "%s: line %lld, column %d%s: '%.40s' is not a number", what,
                         (long long)line, col + 1, name, cell);
}

static char *trimmed_dup(const char *s)
{
    while (is_space(*s))
        s++;
    size_t n = strlen(s);
    while (n && is_space(s[n - 1]))
        n--;
    return mge_strndup(s, n);
}

mge_status mge_csv_read_mem(const void *buf, size_t n, int header, const char *what, mge_csv *t, mge_error *err)
{
    const char *p = buf;
    size_t i = 0, cap = 0;
    int64_t line = 1, row_line;
    cells c = {0};
    mge_status s = MGE_OK;
    memset(t, 0, sizeof *t);
    if (!what)
        what = "CSV";
    if (n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
        i = 3;
    int first = 1;
    while (i < n) {
        if (blank_line(p, n, i)) {
            while (i < n && p[i] != '\n')
                i++;
            if (i < n)
                i++;
            line++;
            continue;
        }
        row_line = line;
        if ((s = read_record(p, n, &i, &line, &c, what, err)))
            goto fail;
        if (first) {
            first = 0;
            t->ncols = c.n;
            int names = header == MGE_CSV_HEADER_YES;
            double v;
            for (int k = 0; header == MGE_CSV_HEADER_AUTO && k < c.n; k++)
                names |= parse_num(c.buf.p + c.off[k], &v) != 0;
            if (names) {
                if (!(t->names = calloc((size_t)c.n, sizeof *t->names))) {
                    s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
                    goto fail;
                }
                for (int k = 0; k < c.n; k++)
                    if (!(t->names[k] = trimmed_dup(c.buf.p + c.off[k]))) {
                        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
                        goto fail;
                    }
                continue;
            }
        }
        if (c.n != t->ncols) {
            s = mge_error_set(err, MGE_ERR_FORMAT, "%s: line %lld: %d cells, but the %s has %d", what,
                              (long long)row_line, c.n, t->names ? "header" : "first row", t->ncols);
            goto fail;
        }
        if ((size_t)(t->nrows + 1) * (size_t)t->ncols > cap) {
            size_t nc = cap ? 2 * cap : (size_t)t->ncols * 64;
            if (nc > SIZE_MAX / sizeof(double)) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "%s: too many cells", what);
                goto fail;
            }
            double *nv = realloc(t->v, nc * sizeof *nv);
            if (!nv) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory after %lld rows", what, (long long)t->nrows);
                goto fail;
            }
            t->v = nv;
            cap = nc;
        }
        for (int k = 0; k < c.n; k++)
            if (parse_num(c.buf.p + c.off[k], &t->v[(size_t)t->nrows * (size_t)t->ncols + (size_t)k])) {
                s = bad_cell(err, what, row_line, k, t, c.buf.p + c.off[k]);
                goto fail;
            }
        t->nrows++;
    }
    if (t->nrows == 0) {
        s = mge_error_set(err, MGE_ERR_FORMAT, "%s: no data rows%s", what, t->names ? " after the header" : "");
        goto fail;
    }
    mge_buf_free(&c.buf);
    free(c.off);
    return MGE_OK;
fail:
    mge_buf_free(&c.buf);
    free(c.off);
    mge_csv_free(t);
    return s;
}

mge_status mge_csv_read_path(const char *path, int header, mge_csv *t, mge_error *err)
{
    void *buf, *raw = NULL;
    size_t n, rn;
    int mapped;
    const char *what = strcmp(path, "-") ? path : "<stdin>";
    memset(t, 0, sizeof *t);
    mge_status s = mge_file_slurp(path, &buf, &n, &mapped, err);
    if (s)
        return s;
    const void *p = buf;
    size_t pn = n;
    if (mge_is_gzip(buf, n)) {
        if ((s = mge_gunzip_data(buf, n, &raw, &rn, err)))
            mge_error_prefix(err, "%s", what);
        p = raw;
        pn = rn;
    }
    if (!s)
        s = mge_csv_read_mem(p, pn, header, what, t, err);
    free(raw);
    mge_file_unslurp(buf, n, mapped);
    return s;
}

int mge_csv_column(const mge_csv *t, const char *spec)
{
    int found = -1;
    for (int k = 0; t->names && k < t->ncols; k++)
        if (strcmp(t->names[k], spec) == 0) {
            if (found >= 0)
                return -2;
            found = k;
        }
    if (found >= 0)
        return found;
    char *end;
    errno = 0;
    long v = strtol(spec, &end, 10);
    if (end == spec || *end || errno || !isdigit((unsigned char)spec[0]) || v < 1 || v > t->ncols)
        return -1;
    return (int)v - 1;
}

/* "no column 'x' (the header has 'a', 'b', ...)": what the user can pick from. */
static mge_status no_column(const mge_csv *t, const char *spec, int r, mge_error *err)
{
    if (r == -2)
        return mge_error_set(err, MGE_ERR_INVALID, "column '%s' is in the header more than once: give its number",
                             spec);
    if (!t->names)
        return mge_error_set(err, MGE_ERR_INVALID, "no column '%s' (no header: columns are numbered 1 to %d)", spec,
                             t->ncols);
    mge_buf b = {0};
    for (int k = 0; k < t->ncols && k < 20; k++)
        mge_buf_printf(&b, "%s'%s'", k ? ", " : "", t->names[k]);
    if (t->ncols > 20)
        mge_buf_printf(&b, ", ...");
    mge_buf_put(&b, "", 1);
    mge_status s = mge_error_set(err, MGE_ERR_INVALID, "no column '%s' (the header has %s)", spec,
                                 b.failed ? "..." : b.p);
    mge_buf_free(&b);
    return s;
}

mge_status mge_csv_no_column(const mge_csv *t, const char *spec, mge_error *err)
{
    return no_column(t, spec, mge_csv_column(t, spec), err);
}

mge_status mge_csv_columns(const mge_csv *t, const char *list, int *cols, int *n, mge_error *err)
{
    *n = 0;
    char *copy = mge_strdup(list);
    if (!copy)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = MGE_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && !s; tok = strtok_r(NULL, ",", &save)) {
        int lo = mge_csv_column(t, tok), hi = lo;
        char *dash = strchr(tok, '-');
        if (lo == -1 && dash && dash != tok && dash[1]) {
            /* a range of column numbers: 2-5 */
            *dash = 0;
            int a = isdigit((unsigned char)tok[0]) ? mge_csv_column(t, tok) : -1;
            int b = isdigit((unsigned char)dash[1]) ? mge_csv_column(t, dash + 1) : -1;
            *dash = '-';
            char *e1, *e2;
            long na = strtol(tok, &e1, 10), nb = strtol(dash + 1, &e2, 10);
            if (e1 == dash && !*e2 && na >= 1 && nb >= 1 && na <= t->ncols && nb <= t->ncols && a >= 0 && b >= 0) {
                lo = (int)na - 1;
                hi = (int)nb - 1;
                if (lo > hi) {
                    s = mge_error_set(err, MGE_ERR_INVALID, "columns %s: the range runs backwards", tok);
                    break;
                }
            }
        }
        if (lo < 0) {
            s = no_column(t, tok, lo, err);
            break;
        }
        for (int k = lo; k <= hi && !s; k++) {
            for (int j = 0; j < *n; j++)
                if (cols[j] == k)
                    s = mge_error_set(err, MGE_ERR_INVALID, "column %d%s%s%s is listed twice", k + 1,
                                      t->names ? " ('" : "", t->names ? t->names[k] : "", t->names ? "')" : "");
            if (!s)
                cols[(*n)++] = k;
        }
    }
    if (!s && *n == 0)
        s = mge_error_set(err, MGE_ERR_INVALID, "no columns in '%s'", list);
    free(copy);
    return s;
}

mge_status mge_csv_dataset(const mge_csv *t, const int *cols, int ncols, int target, const char *what,
                           mge_dataset *ds, mge_error *err)
{
    memset(ds, 0, sizeof *ds);
    mge_status s;
    int narr = target >= 0 ? 2 : 1;
    ds->t = calloc((size_t)narr, sizeof *ds->t);
    ds->names = calloc((size_t)narr, sizeof *ds->names);
    ds->source = mge_strdup(what ? what : "CSV");
    if (!ds->t || !ds->names || !ds->source) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    ds->n = narr;
    ds->positional = 1;
    int64_t dims[2] = {t->nrows, ncols};
    if ((s = mge_tensor_alloc(&ds->t[0], MGE_F32, 2, dims, err)))
        goto fail;
    float *x = ds->t[0].data;
    for (int64_t r = 0; r < t->nrows; r++)
        for (int k = 0; k < ncols; k++)
            x[r * ncols + k] = (float)t->v[(size_t)r * (size_t)t->ncols + (size_t)cols[k]];
    if (target >= 0) {
        int integral = 1;
        for (int64_t r = 0; r < t->nrows && integral; r++) {
            double v = t->v[(size_t)r * (size_t)t->ncols + (size_t)target];
            integral = v == floor(v) && fabs(v) < 9e15;
        }
        if ((s = mge_tensor_alloc(&ds->t[1], integral ? MGE_I64 : MGE_F32, 1, dims, err)))
            goto fail;
        for (int64_t r = 0; r < t->nrows; r++) {
            double v = t->v[(size_t)r * (size_t)t->ncols + (size_t)target];
            if (integral)
                ((int64_t *)ds->t[1].data)[r] = (int64_t)v;
            else
                ((float *)ds->t[1].data)[r] = (float)v;
        }
    }
    if ((s = mge_dataset_check(ds, ds->source, err)))
        goto fail;
    return MGE_OK;
fail:
    mge_dataset_free(ds);
    return s;
}
