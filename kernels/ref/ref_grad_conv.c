/* ref_grad_conv.c — reference kernels (stub until written). */
#include "ref.h"

void mge_ref_register_grad_conv(mge_backend *b)
{
    (void)b;
}
