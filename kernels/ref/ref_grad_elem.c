/* ref_grad_elem.c — reference kernels (stub until written). */
#include "ref.h"

void mge_ref_register_grad_elem(mge_backend *b)
{
    (void)b;
}
