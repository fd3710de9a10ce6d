/* cpu_grad_pool.c — fast CPU kernels (stub until written). */
#include "cpu.h"

void mge_cpu_register_grad_pool(mge_backend *b)
{
    (void)b;
}
