/* ref_deform.c — the reference kernel of deform_conv2d (float dtypes):
 * torchvision's deform_conv2d / ONNX DeformConv. Tap (i, j) of output
 * (oh, ow) reads x bilinearly at (oh*s - p + i*d + dh, ow*s - p + j*d + dw),
 * the offsets (dh, dw) of its offset group, zero outside (a point within a
 * pixel of the edge reads the inside corners), times the mask. Sums in
 * double. */
#include "ref.h"

#include <stdlib.h>

/* The bilinear sample of plane x at (h, w) (zero outside): its value, its
 * derivatives in h and w when dh is not NULL, and its taps (plane offsets
 * and weights, *nt of them). */
static double sample(mge_dtype dt, const void *x, int64_t base, int64_t H, int64_t W, double h, double w, double *dh,
                     double *dw, int64_t *at, double *wt, int *nt)
{
    int m = 0;
    double v = 0, gh = 0, gw = 0;
    if (h > -1 && h < (double)H && w > -1 && w < (double)W) {
        double fh = floor(h), fw = floor(w), lh = h - fh, lw = w - fw;
        int64_t h0 = (int64_t)fh, w0 = (int64_t)fw;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                int64_t hh = h0 + a, ww = w0 + b;
                if (hh < 0 || hh >= H || ww < 0 || ww >= W)
                    continue;
                double xa = a ? lh : 1 - lh, xb = b ? lw : 1 - lw, xv = ref_ld(dt, x, base + hh * W + ww);
                v += xa * xb * xv;
                gh += (a ? 1 : -1) * xb * xv;
                gw += xa * (b ? 1 : -1) * xv;
                at[m] = hh * W + ww, wt[m++] = xa * xb;
            }
    }
    if (dh)
        *dh = gh, *dw = gw;
    *nt = m;
    return v;
}

/* The shapes every deform kernel checks; NULL bias or mask when absent. */
typedef struct dgeom {
    int64_t N, C, H, W, O, KH, KW, OH, OW, G, OG, sh, sw, ph, pw, dh, dw;
} dgeom;

static mge_status dcheck(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *wt,
                         const mge_tensor *off, const mge_tensor *bias, const mge_tensor *mask, const mge_tensor *y,
                         const char *yn, dgeom *d, mge_error *err)
{
    const char *op = ref_opname(ctx, n);
    if (x->ndim != 4 || wt->ndim != 4 || y->ndim != 4 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: expected float tensors of rank 4", op);
    mge_dtype dt = x->dtype;
    *d = (dgeom){x->dims[0], x->dims[1], x->dims[2], x->dims[3], wt->dims[0], wt->dims[2], wt->dims[3], y->dims[2],
                 y->dims[3], mge_node_int(n, MGE_KEY_groups, 1), mge_node_int(n, MGE_KEY_offset_groups, 1),
                 mge_node_ints(n, MGE_KEY_stride, 0, 1), mge_node_ints(n, MGE_KEY_stride, 1, 1),
                 mge_node_ints(n, MGE_KEY_pad, 0, 0), mge_node_ints(n, MGE_KEY_pad, 1, 0),
                 mge_node_ints(n, MGE_KEY_dilation, 0, 1), mge_node_ints(n, MGE_KEY_dilation, 1, 1)};
    if (d->G < 1 || d->OG < 1 || d->C % d->G || d->C % d->OG || d->O % d->G)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: groups do not divide the channels", op);
    int64_t wd[4] = {d->O, d->C / d->G, d->KH, d->KW}, od[4] = {d->N, 2 * d->OG * d->KH * d->KW, d->OH, d->OW},
            md[4] = {d->N, d->OG * d->KH * d->KW, d->OH, d->OW}, yd[4] = {d->N, d->O, d->OH, d->OW};
    mge_status st;
    if ((st = ref_check(ctx, n, "x", x, dt, 4, x->dims, err)) || (st = ref_check(ctx, n, "weight", wt, dt, 4, wd, err)) ||
        (st = ref_check(ctx, n, "offset", off, dt, 4, od, err)) ||
        (bias && (st = ref_check(ctx, n, "bias", bias, dt, 1, &d->O, err))) ||
        (mask && (st = ref_check(ctx, n, "mask", mask, dt, 4, md, err))) ||
        (st = ref_check(ctx, n, yn, y, dt, 4, yd, err)))
        return st;
    return MGE_OK;
}

static mge_status deform_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               mge_error *err)
{
    const mge_tensor *x = in[0], *wt = in[1], *off = in[2], *bias = n->nin > 3 ? in[3] : NULL,
                     *mask = n->nin > 4 ? in[4] : NULL;
    mge_tensor *y = out[0];
    dgeom d;
    mge_status st = dcheck(ctx, n, x, wt, off, bias, mask, y, "output", &d, err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    int64_t CG = d.C / d.G, OPG = d.O / d.G, CO = d.C / d.OG, KK = d.KH * d.KW;
    for (int64_t b = 0; b < d.N; b++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t i = 0; i < d.OH; i++)
                for (int64_t j = 0; j < d.OW; j++) {
                    double acc = bias ? ref_ld(dt, bias->data, o) : 0;
                    int64_t g = o / OPG;
                    for (int64_t cc = 0; cc < CG; cc++) {
                        int64_t c = g * CG + cc, og = c / CO;
                        for (int64_t ki = 0; ki < d.KH; ki++)
                            for (int64_t kj = 0; kj < d.KW; kj++) {
                                int64_t k = og * KK + ki * d.KW + kj, at[4];
                                double oy = ref_ld(dt, off->data, ((b * 2 * d.OG * KK + 2 * k) * d.OH + i) * d.OW + j);
                                double ox =
                                    ref_ld(dt, off->data, ((b * 2 * d.OG * KK + 2 * k + 1) * d.OH + i) * d.OW + j);
                                double m = mask ? ref_ld(dt, mask->data, ((b * d.OG * KK + k) * d.OH + i) * d.OW + j) : 1;
                                double tw[4];
                                int nt;
                                double v = sample(dt, x->data, (b * d.C + c) * d.H * d.W, d.H, d.W,
                                                  (double)(i * d.sh - d.ph + ki * d.dh) + oy,
                                                  (double)(j * d.sw - d.pw + kj * d.dw) + ox, NULL, NULL, at, tw, &nt);
                                acc += ref_ld(dt, wt->data, ((o * CG + cc) * d.KH + ki) * d.KW + kj) * v * m;
                            }
                    }
                    ref_st(dt, y->data, ((b * d.O + o) * d.OH + i) * d.OW + j, acc);
                }
    return MGE_OK;
}

/* deform_conv2d_grad(dy, x, weight, offset[, bias[, mask]]) -> dx, dweight,
 * doffset, dmask (dmask as if the mask were given: the sample times the
 * weight); the rule sums dy for dbias. */
static mge_status deform_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                    mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *wt = in[2], *off = in[3], *bias = n->nin > 4 ? in[4] : NULL,
                     *mask = n->nin > 5 ? in[5] : NULL;
    dgeom d;
    mge_status st = dcheck(ctx, n, x, wt, off, bias, mask, dy, "dy", &d, err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    int64_t KK = d.KH * d.KW, md[4] = {d.N, d.OG * KK, d.OH, d.OW};
    if ((st = ref_check(ctx, n, "dx", out[0], dt, 4, x->dims, err)) ||
        (st = ref_check(ctx, n, "dweight", out[1], dt, 4, wt->dims, err)) ||
        (st = ref_check(ctx, n, "doffset", out[2], dt, 4, off->dims, err)) ||
        (st = ref_check(ctx, n, "dmask", out[3], dt, 4, md, err)))
        return st;
    int64_t CG = d.C / d.G, OPG = d.O / d.G, CO = d.C / d.OG;
    size_t sizes[4] = {(size_t)ref_numel(x), (size_t)ref_numel(wt), (size_t)ref_numel(off),
                       (size_t)(d.N * d.OG * KK * d.OH * d.OW)};
    double *acc[4] = {NULL};
    for (int t = 0; t < 4; t++)
        if (!(acc[t] = calloc(sizes[t] ? sizes[t] : 1, sizeof(double)))) {
            for (int u = 0; u < t; u++)
                free(acc[u]);
            return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
        }
    double *gx = acc[0], *gw = acc[1], *go = acc[2], *gm = acc[3];
    for (int64_t b = 0; b < d.N; b++)
        for (int64_t o = 0; o < d.O; o++)
            for (int64_t i = 0; i < d.OH; i++)
                for (int64_t j = 0; j < d.OW; j++) {
                    double g = ref_ld(dt, dy->data, ((b * d.O + o) * d.OH + i) * d.OW + j);
                    int64_t grp = o / OPG;
                    for (int64_t cc = 0; cc < CG; cc++) {
                        int64_t c = grp * CG + cc, og = c / CO, xb = (b * d.C + c) * d.H * d.W;
                        for (int64_t ki = 0; ki < d.KH; ki++)
                            for (int64_t kj = 0; kj < d.KW; kj++) {
                                int64_t k = og * KK + ki * d.KW + kj, at[4];
                                int64_t iy = ((b * 2 * d.OG * KK + 2 * k) * d.OH + i) * d.OW + j,
                                        ix = ((b * 2 * d.OG * KK + 2 * k + 1) * d.OH + i) * d.OW + j,
                                        im = ((b * d.OG * KK + k) * d.OH + i) * d.OW + j,
                                        iw = ((o * CG + cc) * d.KH + ki) * d.KW + kj;
                                double m = mask ? ref_ld(dt, mask->data, im) : 1, wv = ref_ld(dt, wt->data, iw);
                                double tw[4], sh, sw;
                                int nt;
                                double v = sample(dt, x->data, xb, d.H, d.W,
                                                  (double)(i * d.sh - d.ph + ki * d.dh) + ref_ld(dt, off->data, iy),
                                                  (double)(j * d.sw - d.pw + kj * d.dw) + ref_ld(dt, off->data, ix), &sh,
                                                  &sw, at, tw, &nt);
                                gw[iw] += g * m * v;
                                gm[im] += g * wv * v;
                                go[iy] += g * wv * m * sh;
                                go[ix] += g * wv * m * sw;
                                for (int t = 0; t < nt; t++)
                                    gx[xb + at[t]] += g * wv * m * tw[t];
                            }
                    }
                }
    for (int t = 0; t < 4; t++) {
        for (size_t e = 0; e < sizes[t]; e++)
            ref_st(dt, out[t]->data, (int64_t)e, acc[t][e]);
        free(acc[t]);
    }
    return MGE_OK;
}

void mge_ref_register_deform(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_DEFORM_CONV2D][dt].run = deform_float;
        b->k[MGE_OP_DEFORM_CONV2D_GRAD][dt].run = deform_grad_float;
    }
}
