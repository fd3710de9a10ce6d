/* cpu_optim.c — fast CPU kernels (stub until written). */
#include "cpu.h"

void mge_cpu_register_optim(mge_backend *b)
{
    (void)b;
}
