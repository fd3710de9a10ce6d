/* prof_flops.c — executed FLOPs of Winograd convolutions (see prof_flops.h). */
#include "prof_flops.h"

double prof_kernel_flops(const mge_graph *g, int node, const int *ndims, const int64_t *dims, double model_flops)
{
    const mge_node *n = &g->nodes[node];
    if ((n->op != MGE_OP_CONV2D_WINOGRAD && n->op != MGE_OP_CONV2D_WINOGRAD_NCHWC) || n->nin < 1 || n->nout < 1)
        return model_flops;
    int x = n->in[0], y = n->out[0];
    const int64_t *xd = &dims[(size_t)x * MGE_MAX_DIMS], *yd = &dims[(size_t)y * MGE_MAX_DIMS];
    int blocked = n->op == MGE_OP_CONV2D_WINOGRAD_NCHWC, rank = blocked ? 5 : 4;
    if (ndims[x] != rank || ndims[y] != rank)
        return model_flops;
    double m = (double)mge_node_int(n, MGE_KEY_tile, 4), a = m + 2;
    if (m < 1)
        return model_flops;
    /* in and out channels as the kernel loops over them: whole blocks */
    double cin = (double)xd[1] * (blocked ? (double)xd[4] : 1), cout = (double)yd[1] * (blocked ? (double)yd[4] : 1);
    double tiles = (double)yd[0] * (double)((yd[2] + (int64_t)m - 1) / (int64_t)m) *
                   (double)((yd[3] + (int64_t)m - 1) / (int64_t)m);
    return 2.0 * a * a * tiles * cin * cout;
}
