/* ref_grad_norm.c — reference kernels (stub until written). */
#include "ref.h"

void mge_ref_register_grad_norm(mge_backend *b)
{
    (void)b;
}
