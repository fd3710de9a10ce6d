/* apool_bins.h — the bins of adaptive pooling (PyTorch's): output i of n
 * over an input of length L covers [floor(i*L/n), ceil((i+1)*L/n)).
 * Bins overlap when L is not a multiple of n and repeat elements when n > L.
 * op_apool.c bounds L*n below 2^62, so the products cannot overflow. */
#ifndef MGE_APOOL_BINS_H
#define MGE_APOOL_BINS_H
#include <stdint.h>

static inline int64_t mge_apool_start(int64_t i, int64_t L, int64_t n)
{
    return i * L / n;
}

static inline int64_t mge_apool_end(int64_t i, int64_t L, int64_t n)
{
    return ((i + 1) * L + n - 1) / n;
}

/* The planes, and the pooled dims as H x W (1-D ops: H = 1), of x under
 * an adaptive pool of rank nsp (1 or 2) to oh x ow. */
static inline void mge_apool_dims(int nsp, int ndim, const int64_t *dims, int64_t *planes, int64_t *H, int64_t *W)
{
    int64_t p = 1;
    for (int i = 0; i < ndim - nsp; i++)
        p *= dims[i];
    *planes = p;
    *H = nsp == 2 ? dims[ndim - 2] : 1;
    *W = dims[ndim - 1];
}
#endif
