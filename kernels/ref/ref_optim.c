/* ref_optim.c — reference kernels (stub until written). */
#include "ref.h"

void mge_ref_register_optim(mge_backend *b)
{
    (void)b;
}
