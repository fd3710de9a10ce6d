/* ref_blocked.c — STUB, being written by a helper (layout). */
#include "ref.h"

void mge_ref_register_blocked(mge_backend *b)
{
    (void)b;
}
