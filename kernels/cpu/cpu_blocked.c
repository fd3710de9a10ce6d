/* cpu_blocked.c — STUB, being written by a helper (layout). */
#include "cpu.h"

void mge_cpu_register_blocked(mge_backend *b)
{
    (void)b;
}
