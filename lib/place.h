/* place.h — placement of an executor's nodes on the host and one device
 * (lib/place.c), used by the executor. */
#ifndef MGE_PLACE_H
#define MGE_PLACE_H

#include "internal.h"

/* The placed graph and where everything in it is (0 host, 1 device). */
typedef struct mge_placed {
    mge_graph g;             /* shares names, attributes and data with the source */
    int nsrc;                /* the source's value count: values [0, nsrc) keep their indices */
    signed char *ndev;       /* per node */
    signed char *vdev;       /* per value: where it lives (persistent values: their home) */
    int *src_node;           /* per node: the source node, or -1 for a copy */
    int *shadow_of;          /* per value: the host value a device shadow mirrors, or -1 */
    int *outs;               /* per requested output: the value holding it on the host */
} mge_placed;

/* Nonzero when the device has a kernel for node n at these shapes. */
typedef int (*mge_place_query)(void *ud, const mge_node *n, int nin, const mge_tdesc *in, int nout,
                               const mge_tdesc *out);

/* Whether op updates its input k in place (optimizers; batchnorm's running
 * statistics in training). */
int mge_place_updates_input(int op, int k, int training);

/* Places the needed nodes of src; dev_home (per value, may be NULL) marks
 * persistent values another executor keeps on the device. */
mge_status mge_place(const mge_graph *src, const char *need, int nout, const int *outs, int training,
                     mge_place_query query, void *qud, const char *dev_home, mge_placed *p, mge_error *err);
void mge_placed_free(mge_placed *p);

#endif
