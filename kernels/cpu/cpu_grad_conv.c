/* cpu_grad_conv.c — fast CPU kernels (stub until written). */
#include "cpu.h"

void mge_cpu_register_grad_conv(mge_backend *b)
{
    (void)b;
}
