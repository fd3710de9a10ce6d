/* cpu_grad_elem.c — fast CPU kernels (stub until written). */
#include "cpu.h"

void mge_cpu_register_grad_elem(mge_backend *b)
{
    (void)b;
}
