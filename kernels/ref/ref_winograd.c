/* ref_winograd.c — STUB, being written by a helper (winograd). */
#include "ref.h"

void mge_ref_register_winograd(mge_backend *b)
{
    (void)b;
}
