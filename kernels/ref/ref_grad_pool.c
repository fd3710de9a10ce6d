/* ref_grad_pool.c — reference kernels (stub until written). */
#include "ref.h"

void mge_ref_register_grad_pool(mge_backend *b)
{
    (void)b;
}
