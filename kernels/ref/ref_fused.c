/* ref_fused.c — STUB, being written by a helper (fuse_activation). */
#include "ref.h"

void mge_ref_register_fused(mge_backend *b)
{
    (void)b;
}
