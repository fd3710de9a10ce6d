/* ref_convt.h — what the conv_transpose2d / conv1d kernels share (ref_convt.c).
 *
 * conv1d and its gradients run as the conv2d kernels of a backend on a
 * height of 1: mge_conv1d_as_2d gives kernel k (the 2-D op op2d of that
 * backend) a node whose attributes are lifted to two values (kernel
 * [1,k], stride [1,s], pad [0,p], dilation [1,d]) and rank-4 views of the
 * tensors ([N,C,1,L], weight [O,Cg,1,k]); mge_conv1d_as_2d_ws does the same
 * for its workspace size. */
#ifndef MGE_REF_CONVT_H
#define MGE_REF_CONVT_H
#include "internal.h"

mge_status mge_conv1d_as_2d(const mge_kernel *k, int op2d, const mge_kctx *ctx, const mge_node *n,
                            mge_tensor *const *in, mge_tensor *const *out, mge_error *err);
size_t mge_conv1d_as_2d_ws(const mge_kernel *k, int op2d, const mge_node *n, mge_tensor *const *in,
                           mge_tensor *const *out, int threads);

/* The geometry of conv_transpose2d and its gradients: x [N,C,H,W], weight
 * [C, Og, kh, kw], y [N, G*Og, OH, OW]; from the node's attributes and the
 * x and weight tensors. ok is 0 when the attributes are out of range. */
typedef struct ref_convt_geom {
    int64_t N, C, H, W, O, OH, OW, G, Cg, Og, kh, kw;
    int64_t s[2], p[2], d[2], op[2];
} ref_convt_geom;

mge_status mge_ref_convt_geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                              ref_convt_geom *q, mge_error *err);
/* 1 when conv2d of the output with the same attributes gives back H x W:
 * output_padding below the stride on both axes (the usual case); the fast
 * kernels serve that one as conv2d's kernels do. */
static inline int mge_convt_regular(const ref_convt_geom *q)
{
    return q->op[0] < q->s[0] && q->op[1] < q->s[1];
}

/* conv3d: x [N,C,D,H,W], weight [O, C/G, kd, kh, kw], y [N,O,OD,OH,OW]
 * (k, s, p, d per axis d, h, w), from the node and the x and weight
 * tensors; an error when they do not fit or an output dim is empty. */
typedef struct ref_conv3d_geom {
    int64_t N, C, O, G, Cg, Og, in[3], out[3], k[3], s[3], p[3], d[3];
} ref_conv3d_geom;

/* ref_conv3d.c's kernels, registered by mge_ref_register_convt */
void mge_ref_register_conv3d(mge_backend *b);
mge_status mge_ref_conv3d_geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                               ref_conv3d_geom *q, mge_error *err);
#endif
