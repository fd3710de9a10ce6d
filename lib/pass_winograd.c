/* pass_winograd.c — conv2d and fused_conv2d with a 3x3 kernel, stride 1,
 * dilation 1 and groups 1 on f32 become conv2d_winograd, whose weight is
 * moved to the Winograd domain by a winograd_weight node that reads the
 * original 3x3 weight.
 *
 * The file keeps the 3x3 weight (the transformed one is 1.78x (F(2,3)) to
 * 4x (F(4,3)) its size) and the executor's preprocessing runs
 * winograd_weight once, at load time, instead of at every inference. Its
 * output is "<node>.weight_winograd", f32 [(m+2)^2, out, in], read by the
 * rewritten node alone (one per conv, even where convs share a weight and
 * a tile: cse can merge those). The node keeps its name and output, its
 * bias, and fused_conv2d's residual and activation (pad, act and alpha are
 * copied). Candidates need a weight with data and concrete channels and
 * spatial sizes (only the batch may be symbolic).
 *
 * Which layers and which tile: a fixed rule on shapes (choose_tile), from
 * measurements of the cpu kernels at 1 and 2 threads (see the comment
 * there), so the same model always gives the same file. Graphs with a loss
 * are left alone: conv2d_winograd has no gradient. Nothing to rewrite:
 * *changed = 0 and *g is untouched. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Output tile m for a 3x3 stride-1 conv of C to O channels on an OH x OW
 * output (per image: the batch is symbolic here), or 0 to keep conv2d
 * (im2col + sgemm).
 * Measured on the project's 2-core build machine (Xeon with AVX-512,
 * OpenBLAS 0.3.21 SkylakeX kernels as the tools select them), batch 1,
 * 2 threads. In resnet18 (mge-prof, ms per conv, conv2d -> winograd):
 *   64ch  56x56  F(4,3)  1.65 -> 0.80
 *   128ch 28x28  F(4,3)  1.60 -> 0.76
 *   256ch 14x14  F(2,3)  1.65 -> 1.10   (F(4,3) or none there: slower model)
 *   512ch 7x7    none    2.15           (F(2,3) there: slower model)
 * and on single convs (min of interleaved runs; a noisy shared machine):
 * F(4,3) loses on 10x10 and smaller, F(2,3) on 7x7 (as the model says), and
 * both lose below ~20M multiply-adds per image (16ch 28x28, 3->32ch
 * 112x112, 64ch 10x10: 0.3-0.8x) to the fixed costs of the three
 * transform/gemm phases. F(4,3) does 4x fewer multiplies than the direct
 * 3x3 but needs many tiles to feed its 36 sgemms, and its weight is 4x the
 * 3x3 one's bytes (F(2,3): 2.25x fewer multiplies, 1.78x the bytes), read
 * once per image: on small planes the sgemms are thin and the weight
 * traffic wins. Hence: */
#define WG_MIN_MACS 2e7     /* per image */
#define WG_F4_PIXELS 400    /* 20x20 output and up: F(4,3) */
#define WG_F2_PIXELS 100    /* 10x10 and up: F(2,3) */
static int choose_tile(int64_t C, int64_t O, int64_t OH, int64_t OW)
{
    double px = (double)OH * (double)OW;
    if (px * (double)C * (double)O * 9.0 < WG_MIN_MACS)
        return 0;
    if (px >= WG_F4_PIXELS)
        return 4;
    if (px >= WG_F2_PIXELS)
        return 2;
    return 0;
}

/* The tile for node i, or 0 when it is not a candidate. */
static int candidate(const mge_graph *g, int i)
{
    const mge_node *n = &g->nodes[i];
    if ((n->op != MGE_OP_CONV2D && n->op != MGE_OP_FUSED_CONV2D) || n->nin < 2 || n->nin > 4 || n->nout != 1)
        return 0;
    for (int d = 0; d < 2; d++)
        if (mge_node_ints(n, MGE_KEY_kernel, d, 1) != 3 || mge_node_ints(n, MGE_KEY_stride, d, 1) != 1 ||
            mge_node_ints(n, MGE_KEY_dilation, d, 1) != 1 || mge_node_ints(n, MGE_KEY_pad, d, 0) < 0)
            return 0;
    /* bf16 convs stay direct: Winograd's transforms would need f32 products */
    if (mge_node_int(n, MGE_KEY_groups, 1) != 1 || mge_node_bf16(n))
        return 0;
    const mge_value *x = &g->values[n->in[0]], *w = &g->values[n->in[1]], *y = &g->values[n->out[0]];
    if (x->dtype != MGE_F32 || y->dtype != MGE_F32 || x->ndim != 4 || y->ndim != 4)
        return 0;
    if (w->dtype != MGE_F32 || w->ndim != 4 || !w->data || w->data->dtype != MGE_F32 || !w->data->data ||
        (w->kind != MGE_VAL_PARAM && w->kind != MGE_VAL_CONST))
        return 0;
    /* channels are fixed; symbolic planes choose at the size opt.shape gives */
    if (x->dims[1] < 1 || y->dims[1] < 1)
        return 0;
    for (int d = 2; d < 4; d++)
        if (mge_pass_value_dim(g, n->in[0], d) < 1 || mge_pass_value_dim(g, n->out[0], d) < 1)
            return 0;
    if (w->dims[0] != y->dims[1] || w->dims[1] != x->dims[1] || w->dims[2] != 3 || w->dims[3] != 3)
        return 0;
    return choose_tile(x->dims[1], y->dims[1], mge_pass_value_dim(g, n->out[0], 2),
                       mge_pass_value_dim(g, n->out[0], 3));
}

/* The conv2d_winograd attributes for node n. */
static mge_status wino_attrs(const mge_node *n, int tile, mge_attr *out, int *nout, mge_error *err)
{
    static const int copy[] = {MGE_KEY_out, MGE_KEY_pad, MGE_KEY_bias, MGE_KEY_residual, MGE_KEY_act, MGE_KEY_alpha};
    mge_attr a[8];
    int na = 0;
    for (size_t k = 0; k < sizeof copy / sizeof copy[0]; k++) {
        const mge_attr *s = mge_node_attr(n, copy[k]);
        if (s)
            a[na++] = *s;
    }
    memset(&a[na], 0, sizeof a[na]);
    a[na].key = MGE_KEY_tile;
    a[na].n = 1;
    a[na].i[0] = tile;
    na++;
    return mge_attrs_complete(MGE_OP_CONV2D_WINOGRAD, na, a, out, nout, err);
}

mge_status mge_pass_winograd(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    if (g->loss >= 0)
        return MGE_OK;
    int *tile = calloc((size_t)g->nnodes + 1, sizeof *tile);
    if (!tile)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    int nconv = 0;
    for (int i = 0; i < g->nnodes; i++)
        nconv += (tile[i] = candidate(g, i)) != 0;
    if (!nconv) {
        free(tile);
        return MGE_OK;
    }
    char *keep = NULL;
    int *remap = NULL;
    mge_graph *c = NULL;
    mge_status s = mge_pass_rb_alloc(g, &keep, &remap, &c, err);
    if (s || (s = mge_pass_rb_values(g, keep, NULL, c, remap, err)))
        goto fail;
    for (int i = 0; i < g->nnodes && !s; i++) {
        const mge_node *n = &g->nodes[i];
        if (!tile[i]) {
            s = mge_pass_rb_copy(c, n, remap, err);
            continue;
        }
        int in[4], out[1];   /* candidate() took 2 to 4 inputs, 1 output */
        for (int k = 0; k < n->nin; k++)
            in[k] = remap[n->in[k]];
        out[0] = remap[n->out[0]];
        const mge_value *w = &g->values[n->in[1]];
        int m = tile[i], a = m + 2;
        int64_t O = w->dims[0], C = w->dims[1], dims[3] = {(int64_t)a * a, O, C};
        int wv = -1;
        mge_attr at[16], tile_at;
        int nat = 0;
        memset(&tile_at, 0, sizeof tile_at);
        tile_at.key = MGE_KEY_tile;
        tile_at.n = 1;
        tile_at.i[0] = m;
        if ((s = mge_pass_rb_new_value(g, c, n->name, ".weight_winograd", MGE_VAL_NODE, MGE_F32, 3, dims, &wv,
                                       err)) ||
            (s = mge_attrs_complete(MGE_OP_WINOGRAD_WEIGHT, 1, &tile_at, at, &nat, err)) ||
            (s = mge_pass_rb_node(c, c->values[wv].name, MGE_OP_WINOGRAD_WEIGHT, 1, &in[1], 1, &wv, nat, at, err)))
            break;
        in[1] = wv;
        if ((s = wino_attrs(n, m, at, &nat, err)))
            break;
        s = mge_pass_rb_node(c, n->name, MGE_OP_CONV2D_WINOGRAD, n->nin, in, n->nout, out, nat, at, err);
    }
    if (s || (s = mge_pass_rb_end(gp, &c, remap, NULL, changed, err)))
        goto fail;
    /* g is gone (its data moved to c); tidy up as dce would (the 3x3
     * weights stay: winograd_weight reads them) */
    free(tile);
    free(keep);
    free(remap);
    int pruned = 0;
    mge_prune_opts po = {0};
    return mge_pass_prune(gp, &po, &pruned, err);
fail:
    mge_graph_free(c);
    free(tile);
    free(keep);
    free(remap);
    return s;
}
