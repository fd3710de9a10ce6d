/* fuzz_csv.c — libFuzzer target for the CSV table reader: any bytes give a
 * table or an error, never a crash; a table has consistent sizes and
 * becomes a dataset. */
#include "csv.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mge_csv t;
    mge_error err;
    int header = size ? (int)(data[0] % 3) - 1 : MGE_CSV_HEADER_AUTO;
    if (mge_csv_read_mem(data, size, header, "fuzz", &t, &err) != MGE_OK) {
        if (t.v || t.names || t.ncols)
            abort(); /* a failed read leaves nothing behind */
        return 0;
    }
    if (t.ncols < 1 || t.nrows < 1)
        abort();
    for (int64_t i = 0; i < t.nrows * t.ncols; i++)
        if (!isfinite(t.v[i]))
            abort();
    int *cols = malloc(sizeof *cols * (size_t)t.ncols), n = 0;
    if (cols && mge_csv_columns(&t, "1", cols, &n, &err) == MGE_OK) {
        mge_dataset ds;
        if (n != 1 || mge_csv_dataset(&t, cols, n, t.ncols - 1, "fuzz", &ds, &err) != MGE_OK)
            abort();
        mge_dataset_free(&ds);
    }
    free(cols);
    mge_csv_free(&t);
    return 0;
}
