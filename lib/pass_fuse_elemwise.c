/* pass_fuse_elemwise.c — STUB, being written by a helper (fuse_elemwise). */
#include "internal.h"

mge_status mge_pass_fuse_elemwise(mge_graph **g, int *changed, mge_error *err)
{
    (void)g; (void)err;
    *changed = 0;
    return MGE_OK;
}
