/* pass_layout.c — STUB, being written by a helper (layout). */
#include "internal.h"

mge_status mge_pass_layout(mge_graph **g, int *changed, mge_error *err)
{
    (void)g; (void)err;
    *changed = 0;
    return MGE_OK;
}
