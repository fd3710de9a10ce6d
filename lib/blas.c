/* blas.c — the OpenBLAS thread count, set by the executor. */
#include "internal.h"

#include <cblas.h>

void mge_blas_set_threads(int n)
{
    openblas_set_num_threads(n < 1 ? 1 : n);
}
