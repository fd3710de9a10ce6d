/* ref_deform.c — the reference kernel of deform_conv2d (float dtypes):
 * torchvision's deform_conv2d / ONNX DeformConv. Tap (i, j) of output
 * (oh, ow) reads x bilinearly at (oh*s - p + i*d + dh, ow*s - p + j*d + dw),
 * the offsets (dh, dw) of its offset group, zero outside (a point within a
 * pixel of the edge reads the inside corners), times the mask. Sums in
 * double. */
#include "ref.h"

static double sample(mge_dtype dt, const void *x, int64_t base, int64_t H, int64_t W, double h, double w)
{
    if (!(h > -1 && h < (double)H && w > -1 && w < (double)W))
        return 0;
    double fh = floor(h), fw = floor(w), lh = h - fh, lw = w - fw;
    int64_t h0 = (int64_t)fh, w0 = (int64_t)fw;
    double v = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int64_t hh = h0 + a, ww = w0 + b;
            if (hh >= 0 && hh < H && ww >= 0 && ww < W)
                v += (a ? lh : 1 - lh) * (b ? lw : 1 - lw) * ref_ld(dt, x, base + hh * W + ww);
        }
    return v;
}

static mge_status deform_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               mge_error *err)
{
    const mge_tensor *x = in[0], *wt = in[1], *off = in[2], *bias = n->nin > 3 ? in[3] : NULL,
                     *mask = n->nin > 4 ? in[4] : NULL;
    mge_tensor *y = out[0];
    const char *op = ref_opname(ctx, n);
    if (x->ndim != 4 || wt->ndim != 4 || y->ndim != 4 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: expected float tensors of rank 4", op);
    mge_dtype dt = x->dtype;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], O = wt->dims[0], KH = wt->dims[2],
            KW = wt->dims[3], OH = y->dims[2], OW = y->dims[3];
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1), OG = mge_node_int(n, MGE_KEY_offset_groups, 1);
    if (G < 1 || OG < 1 || C % G || C % OG || O % G)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: groups do not divide the channels", op);
    int64_t wd[4] = {O, C / G, KH, KW}, od[4] = {N, 2 * OG * KH * KW, OH, OW}, md[4] = {N, OG * KH * KW, OH, OW},
            yd[4] = {N, O, OH, OW};
    mge_status st;
    if ((st = ref_check(ctx, n, "x", x, dt, 4, x->dims, err)) || (st = ref_check(ctx, n, "weight", wt, dt, 4, wd, err)) ||
        (st = ref_check(ctx, n, "offset", off, dt, 4, od, err)) ||
        (bias && (st = ref_check(ctx, n, "bias", bias, dt, 1, &O, err))) ||
        (mask && (st = ref_check(ctx, n, "mask", mask, dt, 4, md, err))) ||
        (st = ref_check(ctx, n, "output", y, dt, 4, yd, err)))
        return st;
    int64_t sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), sw = mge_node_ints(n, MGE_KEY_stride, 1, 1);
    int64_t ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    int64_t dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), dw = mge_node_ints(n, MGE_KEY_dilation, 1, 1);
    int64_t CG = C / G, OPG = O / G, CO = C / OG, KK = KH * KW;
    for (int64_t b = 0; b < N; b++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double acc = bias ? ref_ld(dt, bias->data, o) : 0;
                    int64_t g = o / OPG;
                    for (int64_t cc = 0; cc < CG; cc++) {
                        int64_t c = g * CG + cc, og = c / CO;
                        for (int64_t ki = 0; ki < KH; ki++)
                            for (int64_t kj = 0; kj < KW; kj++) {
                                int64_t k = og * KK + ki * KW + kj;
                                double oy = ref_ld(dt, off->data, ((b * 2 * OG * KK + 2 * k) * OH + i) * OW + j);
                                double ox = ref_ld(dt, off->data, ((b * 2 * OG * KK + 2 * k + 1) * OH + i) * OW + j);
                                double m = mask ? ref_ld(dt, mask->data, ((b * OG * KK + k) * OH + i) * OW + j) : 1;
                                double v = sample(dt, x->data, (b * C + c) * H * W, H, W,
                                                  (double)(i * sh - ph + ki * dh) + oy,
                                                  (double)(j * sw - pw + kj * dw) + ox);
                                acc += ref_ld(dt, wt->data, ((o * CG + cc) * KH + ki) * KW + kj) * v * m;
                            }
                    }
                    ref_st(dt, y->data, ((b * O + o) * OH + i) * OW + j, acc);
                }
    return MGE_OK;
}

void mge_ref_register_deform(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_DEFORM_CONV2D][dt].run = deform_float;
    }
}
