/* grad_sample.c — the gradient rules of grid_sample (grid_sample_grad(dy,
 * x, grid) -> dx, dgrid), roi_align (roi_align_grad -> dx) and
 * deform_conv2d (deform_conv2d_grad -> every operand's), with the
 * forward's attributes; the gradient ops have none. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

mge_status mge_sample_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    if (n->op == MGE_OP_ROI_ALIGN) {
        /* x's gradient only; rois and batch_indices get none (torchvision's) */
        if (dy[0] < 0 || !want[0])
            return MGE_OK;
        int in[4] = {dy[0], n->in[0], n->in[1], n->in[2]};
        mge_attr ga[8];
        int ng = mge_grad_attrs(n, MGE_OP_ROI_ALIGN_GRAD, ga);
        dx[0] = mge_grad_emit(g, base, MGE_OP_ROI_ALIGN_GRAD, 4, in, ng, ga, 1, NULL, err);
        return dx[0] < 0 ? (err && err->code ? err->code : MGE_ERR_INVALID) : MGE_OK;
    }
    if (n->op == MGE_OP_DEFORM_CONV2D) {
        /* n points into g->nodes, which emitting may move: read it first */
        int nin = n->nin, any = 0;
        for (int i = 0; i < nin; i++)
            any |= want[i];
        if (dy[0] < 0 || !any)
            return MGE_OK;
        int in[6] = {dy[0]}, outs[4];
        for (int i = 0; i < nin; i++)
            in[1 + i] = n->in[i];
        mge_attr ga[8];
        int ng = mge_grad_attrs(n, MGE_OP_DEFORM_CONV2D_GRAD, ga);
        if ((want[0] || want[1] || want[2] || (nin > 4 && want[4])) &&
            mge_grad_emit(g, base, MGE_OP_DEFORM_CONV2D_GRAD, 1 + nin, in, ng, ga, 4, outs, err) < 0)
            return err && err->code ? err->code : MGE_ERR_INVALID;
        /* inputs x, weight, offset, bias, mask: outputs dx, dweight, doffset, dmask */
        for (int i = 0; i < 3; i++)
            if (want[i])
                dx[i] = outs[i];
        if (nin > 4 && want[4])
            dx[4] = outs[3];
        if (nin > 3 && want[3]) {
            int64_t ax[3] = {0, 2, 3};
            mge_attr sa[2];
            memset(sa, 0, sizeof sa);
            sa[0].key = MGE_KEY_axis, sa[0].n = 3;
            for (int k = 0; k < 3; k++)
                sa[0].i[k] = ax[k];
            sa[1].key = MGE_KEY_keepdim, sa[1].n = 1;
            if ((dx[3] = mge_grad_emit(g, base, MGE_OP_SUM, 1, dy, 2, sa, 1, NULL, err)) < 0)
                return err && err->code ? err->code : MGE_ERR_INVALID;
        }
        return MGE_OK;
    }
    if (n->op != MGE_OP_GRID_SAMPLE)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(n->op)->name);
    if (dy[0] < 0 || (!want[0] && !want[1]))
        return MGE_OK;
    int in[3] = {dy[0], n->in[0], n->in[1]}, outs[2];
    mge_attr ga[8];
    int ng = mge_grad_attrs(n, MGE_OP_GRID_SAMPLE_GRAD, ga);
    if (mge_grad_emit(g, base, MGE_OP_GRID_SAMPLE_GRAD, 3, in, ng, ga, 2, outs, err) < 0)
        return err && err->code ? err->code : MGE_ERR_INVALID;
    if (want[0])
        dx[0] = outs[0];
    if (want[1])
        dx[1] = outs[1];
    return MGE_OK;
}
