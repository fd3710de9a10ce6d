/* kpool3d.h — the window geometry of maxpool3d, avgpool3d, their gradients
 * and max_unpool, header-only so shape inference (lib/op_pool3d.c) and the
 * kernels (kernels/ref/ref_pool3d.c) read the attributes one way.
 *
 * kernel, stride, dilation: 1 or 3 values (d, h, w); pad: 1, 3 or 6
 * (begin d, h, w then end d, h, w: ONNX's asymmetric pads). Output per
 * spatial dim: (in + pb + pe - (dil*(k-1)+1)) / s + 1, floored, or ceiled
 * with ceil_mode, where as in PyTorch a last window starting past the
 * input and its begin pad is dropped. */
#ifndef MGE_KPOOL3D_H
#define MGE_KPOOL3D_H

#include "internal.h"

/* bounds every window number so the size arithmetic cannot overflow */
#define KP3_MAX (1 << 30)

typedef struct kp3_geom {
    int64_t N, C, in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int ceil_mode;
} kp3_geom;

/* v[0..cnt) from attribute key (1 or 3 values; pad also 6), each >= lo. */
static inline mge_status kp3_vals(const mge_node *n, const char *op, int key, const char *kname, int64_t def,
                                  int64_t lo, int six, int64_t *v, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, key);
    int cnt = a ? a->n : 1;
    if (cnt != 1 && cnt != 3 && !(six && cnt == 6))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: '%s' has %d values: expected 1 or 3 (d, h, w)%s", op, kname,
                             cnt, six ? " or 6 (begin d, h, w, end d, h, w)" : "");
    for (int i = 0; i < (six ? 6 : 3); i++) {
        int j = cnt == 1 ? 0 : cnt == 3 ? i % 3 : i;
        v[i] = a ? a->i[j] : def;
        if (v[i] < lo || v[i] > KP3_MAX)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=%lld: expected values in [%lld, %d]", op, kname,
                                 (long long)v[i], (long long)lo, KP3_MAX);
    }
    return MGE_OK;
}

/* The window attributes of n (no shapes). */
static inline mge_status kp3_attrs(const mge_node *n, const char *op, kp3_geom *g, mge_error *err)
{
    int64_t p[6], t[6];
    mge_status st;
    *g = (kp3_geom){0};
    if (!mge_node_attr(n, MGE_KEY_kernel))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: needs attribute 'kernel'", op);
    if ((st = kp3_vals(n, op, MGE_KEY_kernel, "kernel", 1, 1, 0, t, err)))
        return st;
    for (int i = 0; i < 3; i++)
        g->k[i] = t[i];
    if ((st = kp3_vals(n, op, MGE_KEY_stride, "stride", 1, 1, 0, t, err)))
        return st;
    for (int i = 0; i < 3; i++)
        g->s[i] = mge_node_attr(n, MGE_KEY_stride) ? t[i] : g->k[i];
    if ((st = kp3_vals(n, op, MGE_KEY_dilation, "dilation", 1, 1, 0, t, err)))
        return st;
    for (int i = 0; i < 3; i++)
        g->d[i] = t[i];
    if ((st = kp3_vals(n, op, MGE_KEY_pad, "pad", 0, 0, 1, p, err)))
        return st;
    for (int i = 0; i < 3; i++)
        g->pb[i] = p[i], g->pe[i] = p[3 + i];
    g->ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
    return MGE_OK;
}

/* The pool's geometry for x of dims xd[5]; an error naming the first dim
 * whose output would be empty. */
static inline mge_status kp3_geom_of(const mge_node *n, const char *op, const int64_t *xd, kp3_geom *g,
                                     mge_error *err)
{
    mge_status st = kp3_attrs(n, op, g, err);
    if (st)
        return st;
    g->N = xd[0], g->C = xd[1];
    for (int i = 0; i < 3; i++) {
        int64_t in = g->in[i] = xd[2 + i], win = g->d[i] * (g->k[i] - 1) + 1;
        int64_t span = in + g->pb[i] + g->pe[i] - win, o;
        if (span < 0)
            o = 0;
        else {
            o = (g->ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
            if (g->ceil_mode && (o - 1) * g->s[i] >= in + g->pb[i])
                o--;
        }
        if (o < 1 || in < 1)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "%s: spatial dim %d of size %lld is too small for a window of %lld (kernel %lld, "
                                 "dilation %lld) with pads %lld+%lld: the output would be empty",
                                 op, i, (long long)in, (long long)win, (long long)g->k[i], (long long)g->d[i],
                                 (long long)g->pb[i], (long long)g->pe[i]);
        g->out[i] = o;
    }
    return MGE_OK;
}

/* Window positions of output o along dim i inside the input: first
 * position p0, count c (stepping by the dilation); padded: inside input + pads. */
static inline void kp3_span(const kp3_geom *g, int i, int64_t o, int64_t *p0, int64_t *c, int64_t *padded)
{
    int64_t lo = o * g->s[i] - g->pb[i], d = g->d[i], k = g->k[i];
    int64_t a = lo < 0 ? (-lo + d - 1) / d : 0;   /* first tap inside the input */
    int64_t b = k;                                 /* past the last inside */
    if (lo + (b - 1) * d >= g->in[i])
        b = lo >= g->in[i] ? 0 : (g->in[i] - 1 - lo) / d + 1;
    *p0 = lo + a * d;
    *c = b > a ? b - a : 0;
    int64_t pa = lo < -g->pb[i] ? (-g->pb[i] - lo + d - 1) / d : 0, pbnd = g->in[i] + g->pe[i], pz = k;
    if (lo + (pz - 1) * d >= pbnd)
        pz = lo >= pbnd ? 0 : (pbnd - 1 - lo) / d + 1;
    *padded = pz > pa ? pz - pa : 0;
}

#endif
