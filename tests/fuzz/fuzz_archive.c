/* fuzz_archive.c — libFuzzer target for datasets in tar/zip archives of NPY
 * members (formats/dataset_archive.c over libarchive): whatever the bytes,
 * loading either fails with a message or gives arrays that agree with each
 * other (names, one sample count, data sizes that fit their shapes). */
#include "mge.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mge_dataset ds;
    mge_error err;
    memset(&ds, 0, sizeof ds);
    if (mge_dataset_load_archive_mem(data, size, "fuzz", &ds, &err) == MGE_OK) {
        for (int i = 0; i < ds.n; i++) {
            const mge_tensor *t = &ds.t[i];
            if (!ds.names || !ds.names[i] || t->ndim < 1 || t->ndim > MGE_MAX_DIMS)
                abort();
            if ((size_t)mge_tensor_numel(t) * mge_dtype_size(t->dtype) != t->nbytes)
                abort();
            if (t->dims[0] != ds.t[0].dims[0])
                abort();
        }
    } else if (!err.msg[0]) {
        abort(); /* every failure says why */
    }
    mge_dataset_free(&ds);
    return 0;
}
