/* cpu_grad_norm.c — fast CPU kernels (stub until written). */
#include "cpu.h"

void mge_cpu_register_grad_norm(mge_backend *b)
{
    (void)b;
}
