/* prof_flops.h — the FLOPs a node's kernel executes, for mge-prof's %peak.
 *
 * mge_graph_node_flops counts a Winograd convolution as the direct
 * convolution it replaces, so that GFLOP/s compare across algorithms; its
 * kernel does fewer multiplications, and against the machine's GEMM peak
 * that count gave 200-400%. For conv2d_winograd and conv2d_winograd_nchwc
 * this is the Winograd domain's multiply-adds, 2 (m+2)^2 * tiles * in * out
 * with tiles = N ceil(OH/m) ceil(OW/m), m = the tile (blocked tensors at
 * full lanes, as the kernel runs them); the input and output transforms,
 * additions mostly and a few percent of it, are not counted. Other nodes:
 * model_flops. */
#ifndef MGE_CMD_PROF_FLOPS_H
#define MGE_CMD_PROF_FLOPS_H

#include "mge.h"

/* ndims/dims: the concrete shapes of g's values (mge_graph_shapes). */
double prof_kernel_flops(const mge_graph *g, int node, const int *ndims, const int64_t *dims, double model_flops);

#endif
