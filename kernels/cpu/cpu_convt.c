/* cpu_convt.c — conv_transpose2d, conv1d and their gradients (f32) on the
 * cpu conv2d kernels.
 *
 * conv_transpose2d is the input gradient of a conv2d whose input has the
 * transposed conv's output shape, with the same weight (conv2d's [O, C/g,
 * kh, kw] is ConvTranspose2d's [in, out/g, kh, kw]): the forward runs
 * conv2d_grad_input's kernel (W^T x by sgemm, then col2im, parallel over
 * the pool; depthwise planes of their own), then adds the bias; its input
 * gradient is conv2d of dy, its weight gradient conv2d_grad_weight with
 * the roles of x and dy swapped. That needs conv2d of the output to give
 * back the input's size, i.e. output_padding below the stride on both
 * axes; the rare other case (output_padding >= stride < dilation) runs the
 * ref loops.
 * conv1d runs the cpu conv2d kernels on a height of 1 (ref_convt.h);
 * conv3d has kernels of its own (cpu_conv3d.c, registered from here). */
#include "cpu.h"

#include "ref/ref_convt.h"

#include <string.h>

/* The cpu conv2d kernels, copied from the table when this file registers
 * (after cpu_gemm.c and cpu_grad_conv.c). */
static mge_kernel k_conv2d, k_grad_input, k_grad_weight;

/* A conv2d-family node with n's kernel, stride, pad, dilation and groups. */
typedef struct as2d {
    mge_node n;
    mge_attr at[8];
} as2d;

static void node2d(const mge_node *n, int op2d, as2d *a)
{
    static const int keys[] = {MGE_KEY_kernel, MGE_KEY_stride, MGE_KEY_pad, MGE_KEY_dilation, MGE_KEY_groups};
    a->n = *n;
    a->n.op = op2d;
    a->n.attrs = a->at;
    a->n.nattr = 0;
    for (int k = 0; k < 5; k++) {
        const mge_attr *v = mge_node_attr(n, keys[k]);
        if (v)
            a->at[a->n.nattr++] = *v;
    }
    if (op2d == MGE_OP_CONV2D) {
        a->at[a->n.nattr++] = (mge_attr){.key = MGE_KEY_bias, .n = 1, .i = {0}};
        a->n.nin = 2;
    }
}

/* 1 when the cpu conv2d kernels serve this node (see the top). */
static int regular(const mge_node *n, const mge_tensor *x, const mge_tensor *w)
{
    ref_convt_geom q;
    mge_error e;
    return mge_ref_convt_geom(NULL, n, x, w, &q, &e) == MGE_OK && mge_convt_regular(&q);
}

typedef struct bias_job {
    float *y;
    const float *b;
    int64_t O, P;
} bias_job;

static void bias_task(void *a, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const bias_job *j = a;
    for (int64_t p = p0; p < p1; p++) {
        float *restrict y = j->y + p * j->P;
        const float b = j->b[p % j->O];
        for (int64_t k = 0; k < j->P; k++)
            y[k] += b;
    }
}

/* conv_transpose2d(x, w[, b]) = conv2d_grad_input(dy = x, w, like = y) + b */
static mge_status convt_fwd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    if (!regular(n, in[0], in[1]))
        return cpu_fallback(ctx, n, in, out, err);
    as2d a;
    node2d(n, MGE_OP_CONV2D_GRAD_INPUT, &a);
    mge_tensor *gin[3] = {in[0], in[1], out[0]};
    mge_status st = k_grad_input.run(ctx, &a.n, gin, out, err);
    if (st || n->nin < 3)
        return st;
    const mge_tensor *y = out[0];
    bias_job j = {y->data, in[2]->data, y->dims[1], y->dims[2] * y->dims[3]};
    cpu_parallel(ctx, y->dims[0] * y->dims[1], j.P >= 4096 ? 1 : 4096 / (j.P ? j.P : 1), bias_task, &j);
    return MGE_OK;
}

static size_t convt_fwd_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    if (!regular(n, in[0], in[1]))
        return cpu_ref_ws(n, in, out, threads);
    as2d a;
    node2d(n, MGE_OP_CONV2D_GRAD_INPUT, &a);
    mge_tensor *gin[3] = {in[0], in[1], out[0]};
    return k_grad_input.ws ? k_grad_input.ws(&a.n, gin, out, threads) : 0;
}

/* conv_transpose2d_grad_input(dy, w, x) = conv2d(dy, w);
 * conv_transpose2d_grad_weight(dy, x, w) = conv2d_grad_weight(x, dy, w). */
static int grad_args(const mge_node *n, mge_tensor *const *in, as2d *a, mge_tensor **gin, const mge_kernel **k)
{
    int gi = n->op == MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT;
    if (!regular(n, gi ? in[2] : in[1], gi ? in[1] : in[2]))
        return 0;
    node2d(n, gi ? MGE_OP_CONV2D : MGE_OP_CONV2D_GRAD_WEIGHT, a);
    gin[0] = gi ? in[0] : in[1];
    gin[1] = gi ? in[1] : in[0];
    gin[2] = in[2];
    *k = gi ? &k_conv2d : &k_grad_weight;
    return 1;
}

static mge_status convt_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    as2d a;
    mge_tensor *gin[3];
    const mge_kernel *k;
    if (!grad_args(n, in, &a, gin, &k))
        return cpu_fallback(ctx, n, in, out, err);
    return k->run(ctx, &a.n, gin, out, err);
}

static size_t convt_grad_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    as2d a;
    mge_tensor *gin[3];
    const mge_kernel *k;
    if (!grad_args(n, in, &a, gin, &k))
        return cpu_ref_ws(n, in, out, threads);
    return k->ws ? k->ws(&a.n, gin, out, threads) : 0;
}

/* ---------------------------------------------------------------- conv1d */

static const mge_kernel *k1d(int op, int *op2d)
{
    if (op == MGE_OP_CONV1D)
        return *op2d = MGE_OP_CONV2D, &k_conv2d;
    if (op == MGE_OP_CONV1D_GRAD_INPUT)
        return *op2d = MGE_OP_CONV2D_GRAD_INPUT, &k_grad_input;
    return *op2d = MGE_OP_CONV2D_GRAD_WEIGHT, &k_grad_weight;
}

static mge_status conv1d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                         mge_error *err)
{
    int op2d;
    const mge_kernel *k = k1d(n->op, &op2d);
    return mge_conv1d_as_2d(k, op2d, ctx, n, in, out, err);
}

static size_t conv1d_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    int op2d;
    const mge_kernel *k = k1d(n->op, &op2d);
    return mge_conv1d_as_2d_ws(k, op2d, n, in, out, threads);
}

void mge_cpu_register_conv3d(mge_backend *b);   /* cpu_conv3d.c */

void mge_cpu_register_convt(mge_backend *b)
{
    mge_cpu_register_conv3d(b);
    k_conv2d = b->k[MGE_OP_CONV2D][MGE_F32];
    k_grad_input = b->k[MGE_OP_CONV2D_GRAD_INPUT][MGE_F32];
    k_grad_weight = b->k[MGE_OP_CONV2D_GRAD_WEIGHT][MGE_F32];
    b->k[MGE_OP_CONV_TRANSPOSE2D][MGE_F32] = (mge_kernel){.run = convt_fwd, .ws = convt_fwd_ws};
    b->k[MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT][MGE_F32] = (mge_kernel){.run = convt_grad, .ws = convt_grad_ws};
    b->k[MGE_OP_CONV_TRANSPOSE2D_GRAD_WEIGHT][MGE_F32] = (mge_kernel){.run = convt_grad, .ws = convt_grad_ws};
    b->k[MGE_OP_CONV1D][MGE_F32] = (mge_kernel){.run = conv1d, .ws = conv1d_ws};
    b->k[MGE_OP_CONV1D_GRAD_INPUT][MGE_F32] = (mge_kernel){.run = conv1d, .ws = conv1d_ws};
    b->k[MGE_OP_CONV1D_GRAD_WEIGHT][MGE_F32] = (mge_kernel){.run = conv1d, .ws = conv1d_ws};
}
