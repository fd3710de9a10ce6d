/* ref_grad_reduce.c — reference kernels (stub until written). */
#include "ref.h"

void mge_ref_register_grad_reduce(mge_backend *b)
{
    (void)b;
}
