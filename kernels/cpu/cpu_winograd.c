/* cpu_winograd.c — STUB, being written by a helper (winograd). */
#include "cpu.h"

void mge_cpu_register_winograd(mge_backend *b)
{
    (void)b;
}
