/* fuzz_npy.c — libFuzzer target for the NPY and NPZ readers.
 *
 * The input is read as a stream of NPY records (memory and FILE readers,
 * which must agree), each record that parses is written back and must read
 * back identical, and the whole input is also tried as an .npz. */
#include "mge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void roundtrip(const mge_tensor *t)
{
    mge_buf b = {0};
    mge_tensor u;
    mge_error err;
    size_t used;
    if (mge_npy_write_buf(&b, t, &err) != MGE_OK)
        abort();
    if (mge_npy_read_mem(b.p, b.n, &used, &u, &err) != MGE_OK || used != b.n)
        abort();
    if (u.dtype != t->dtype || !mge_tensor_same_shape(&u, t) || u.nbytes != t->nbytes ||
        (t->nbytes && memcmp(u.data, t->data, t->nbytes) != 0))
        abort();
    mge_tensor_free(&u);
    mge_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mge_error err, ferr;
    size_t off = 0;
    FILE *f = size ? fmemopen((void *)data, size, "rb") : NULL;
    for (int i = 0; i < 64; i++) {
        mge_tensor t, ft;
        size_t used = 0;
        mge_status s = mge_npy_read_mem(data + off, size - off, &used, &t, &err);
        if (f) {
            mge_status fs = mge_npy_read(f, &ft, &ferr);
            /* the FILE reader sees the same bytes: same verdict, same tensor */
            if (fs != s)
                abort();
            if (!fs) {
                if (ft.dtype != t.dtype || !mge_tensor_same_shape(&ft, &t) || ft.nbytes != t.nbytes ||
                    (t.nbytes && memcmp(ft.data, t.data, t.nbytes) != 0))
                    abort();
                mge_tensor_free(&ft);
            }
        }
        if (s)
            break;
        if (used == 0 || used > size - off)
            abort();
        roundtrip(&t);
        mge_tensor_free(&t);
        off += used;
    }
    if (f)
        fclose(f);
    mge_tlist l = {0};
    if (mge_npz_read_mem(data, size, &l, &err) == MGE_OK) {
        for (int i = 0; i < l.n; i++)
            roundtrip(&l.t[i]);
        mge_buf z = {0};
        mge_tlist back = {0};
        if (mge_npz_write(&l, &z, &err) != MGE_OK || mge_npz_read_mem(z.p, z.n, &back, &err) != MGE_OK ||
            back.n != l.n)
            abort();
        mge_tlist_free(&back);
        mge_buf_free(&z);
    } else if (l.n != 0) {
        abort(); /* a failed read leaves the list alone */
    }
    mge_tlist_free(&l);
    return 0;
}
