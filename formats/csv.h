/* csv.h — numeric CSV tables (tabular data for mge-run --data, and for
 * mge-train later): read into columns of numbers, pick feature and label
 * columns, and turn them into a dataset the loader batches.
 *
 * The reader never prints; a bad cell is an mge_error naming its line and
 * column ("line 7, column 3 ('age'): 'abc' is not a number"). */
#ifndef MGE_CSV_H
#define MGE_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "mge.h"

typedef struct mge_csv {
    int ncols;
    int64_t nrows;       /* data rows (the header is not one) */
    char **names;        /* ncols header names, or NULL without a header */
    double *v;           /* nrows * ncols values, row-major */
} mge_csv;

enum { MGE_CSV_HEADER_AUTO = -1, MGE_CSV_HEADER_NO = 0, MGE_CSV_HEADER_YES = 1 };

/* Parses comma-separated text in buf[0..n) (what names it in messages):
 * RFC 4180 quoting ("a,b", "" for a quote, newlines inside quotes), \n or
 * \r\n line ends, a UTF-8 byte-order mark, blank lines skipped, spaces around
 * a number ignored. header: MGE_CSV_HEADER_AUTO takes the first row as names
 * when one of its cells is not a number. Every data cell must be a finite
 * number (strtod's syntax) and every row have the header's (or the first
 * row's) cell count. A table without data rows is an error. t is
 * overwritten; on failure zeroed. */
mge_status mge_csv_read_mem(const void *buf, size_t n, int header, const char *what, mge_csv *t, mge_error *err);
/* The same from a file ("-" = stdin); gzip is undone first (formats/unpack.h's bound). */
mge_status mge_csv_read_path(const char *path, int header, mge_csv *t, mge_error *err);
void mge_csv_free(mge_csv *t);   /* zeroes t */

/* Index of the column spec names: a header name (exact), else a number
 * counted from 1. -1 when there is none; -2 when the name is in the header
 * twice. */
int mge_csv_column(const mge_csv *t, const char *spec);

/* The error for a spec mge_csv_column does not find (unknown, or a name
 * given twice in the header), listing the columns there are. */
mge_status mge_csv_no_column(const mge_csv *t, const char *spec, mge_error *err);

/* Column indices of a comma-separated list of names, numbers (from 1) and
 * ranges of numbers ("2-5"), in the list's order, into cols (ncols entries at
 * most: t->ncols); *n gets the count. Unknown or repeated columns are errors. */
mge_status mge_csv_columns(const mge_csv *t, const char *list, int *cols, int *n, mge_error *err);

/* A positional dataset from t: array 0 the features f32[nrows, ncols] from
 * columns cols[0..ncols) in that order; with target >= 0, array 1 that
 * column as i64[nrows] when every value is an integer, else f32[nrows].
 * what becomes ds->source. ds is overwritten; on failure zeroed. */
mge_status mge_csv_dataset(const mge_csv *t, const int *cols, int ncols, int target, const char *what,
                           mge_dataset *ds, mge_error *err);

#endif
