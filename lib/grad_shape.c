/* grad_shape.c — gradient rules of the shape family.
 *
 * reshape, flatten: dy viewed under x's shape (reshape_as, no copy).
 * transpose: dy transposed with the inverse permutation.
 * concat: each input's gradient is its slice of dy along the axis.
 * slice: slice_grad scatters dy back into zeros of x's shape.
 * copy: dy, copied back to where x lives.
 * squeeze, unsqueeze: reshape_as, like reshape. expand: sum_to x's shape.
 * tile: tile_grad sums the repeats. split: the outputs' gradients
 * concatenated (a missing one is zeros: constant_of_shape(shape(y))).
 * shape, size, range, constant_of_shape: integer or plan-time inputs, no
 * gradient to pass on (dx stays -1).
 * The gradient ops themselves (reshape_as, slice_grad, tile_grad) have no rule. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static mge_status emit_fail(const mge_error *err)
{
    return err && err->code ? err->code : MGE_ERR_INVALID;
}

/* split: dx = concat(dy_0, ..., dy_k-1) along the axis; a missing dy_i
 * is zeros of output i's shape, made at run time (any symbolic dims). */
static mge_status split_grad(mge_graph *g, const char *base, int x, int nout, const int *outs, int nattr,
                             const mge_attr *attrs, const int *dy, const char *want, int *dx, mge_error *err)
{
    int parts[4], any = 0, yo[4];
    if (!want[0])
        return MGE_OK;
    memcpy(yo, outs, sizeof(int) * (size_t)nout);
    for (int i = 0; i < nout; i++)
        any |= dy[i] >= 0;
    if (!any)
        return MGE_OK;
    mge_dtype dt = g->values[x].dtype;
    for (int i = 0; i < nout; i++) {
        parts[i] = dy[i];
        if (parts[i] >= 0)
            continue;
        int s = mge_grad_emit(g, base, MGE_OP_SHAPE, 1, &yo[i], 0, NULL, 1, NULL, err);
        if (s < 0)
            return emit_fail(err);
        mge_attr za[2];
        memset(za, 0, sizeof za);
        za[0].key = MGE_KEY_value, za[0].n = 1, za[0].f = 0;
        za[1].key = MGE_KEY_dtype, za[1].n = 1, za[1].i[0] = dt;
        if ((parts[i] = mge_grad_emit(g, base, MGE_OP_CONSTANT_OF_SHAPE, 1, &s, 2, za, 1, NULL, err)) < 0)
            return emit_fail(err);
    }
    const mge_attr *a = mge_attrs_find(nattr, attrs, MGE_KEY_axis);
    mge_attr ca;
    memset(&ca, 0, sizeof ca);
    ca.key = MGE_KEY_axis, ca.n = 1, ca.i[0] = a ? a->i[0] : 0;
    dx[0] = mge_grad_emit(g, base, MGE_OP_CONCAT, nout, parts, 1, &ca, 1, NULL, err);
    return dx[0] < 0 ? emit_fail(err) : MGE_OK;
}

mge_status mge_shape_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    /* copies first: emitting may move g->nodes */
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, nin = n->nin, in[64];
    mge_attr attrs[16];
    int nattr = n->nattr < 16 ? n->nattr : 16;
    memcpy(in, n->in, sizeof(int) * (size_t)(nin < 64 ? nin : 64));
    memcpy(attrs, n->attrs, sizeof(mge_attr) * (size_t)nattr);
    if (op == MGE_OP_SPLIT)
        return split_grad(g, base, in[0], n->nout, n->out, nattr, attrs, dy, want, dx, err);
    if (dy[0] < 0)
        return MGE_OK;
    switch (op) {
    case MGE_OP_SHAPE:
    case MGE_OP_SIZE:
    case MGE_OP_RANGE:
    case MGE_OP_CONSTANT_OF_SHAPE:
        return MGE_OK;
    case MGE_OP_EXPAND:
    case MGE_OP_TILE: {
        if (!want[0])
            return MGE_OK;
        int a[2] = {dy[0], in[0]};
        dx[0] = mge_grad_emit(g, base, op == MGE_OP_EXPAND ? MGE_OP_SUM_TO : MGE_OP_TILE_GRAD, 2, a, 0, NULL, 1, NULL,
                              err);
        return dx[0] < 0 ? emit_fail(err) : MGE_OK;
    }
    case MGE_OP_SQUEEZE:
    case MGE_OP_UNSQUEEZE:
    case MGE_OP_RESHAPE:
    case MGE_OP_FLATTEN: {
        if (!want[0])
            return MGE_OK;
        int a[2] = {dy[0], in[0]};
        dx[0] = mge_grad_emit(g, base, MGE_OP_RESHAPE_AS, 2, a, 0, NULL, 1, NULL, err);
        return dx[0] < 0 ? emit_fail(err) : MGE_OK;
    }
    case MGE_OP_TRANSPOSE: {
        if (!want[0])
            return MGE_OK;
        const mge_attr *p = mge_attrs_find(nattr, attrs, MGE_KEY_perm);
        int nd = g->values[in[0]].ndim;
        if (!p || p->n != nd)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: transpose without a valid perm", base);
        mge_attr inv;
        memset(&inv, 0, sizeof inv);
        inv.key = MGE_KEY_perm;
        inv.n = nd;
        for (int i = 0; i < nd; i++) {
            int k = mge_axis(p->i[i], nd);
            if (k < 0)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: transpose perm out of range", base);
            inv.i[k] = i;
        }
        dx[0] = mge_grad_emit(g, base, MGE_OP_TRANSPOSE, 1, &dy[0], 1, &inv, 1, NULL, err);
        return dx[0] < 0 ? emit_fail(err) : MGE_OK;
    }
    case MGE_OP_CONCAT: {
        const mge_attr *a = mge_attrs_find(nattr, attrs, MGE_KEY_axis);
        int nd = g->values[in[0]].ndim;
        int ax = mge_axis(a ? a->i[0] : 0, nd);
        if (ax < 0)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: concat axis out of range", base);
        int64_t off = 0;
        for (int k = 0; k < nin; k++) {
            int64_t len = g->values[in[k]].dims[ax];
            /* slice bounds are numbers: a batch-sized piece has none */
            if (len < 0)
                return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                                     "%s: no gradient for concat along a symbolic dimension", base);
            if (want[k]) {
                mge_attr sa[4];
                memset(sa, 0, sizeof sa);
                sa[0].key = MGE_KEY_axis, sa[0].n = 1, sa[0].i[0] = ax;
                sa[1].key = MGE_KEY_start, sa[1].n = 1, sa[1].i[0] = off;
                sa[2].key = MGE_KEY_end, sa[2].n = 1, sa[2].i[0] = off + len;
                sa[3].key = MGE_KEY_step, sa[3].n = 1, sa[3].i[0] = 1;
                dx[k] = mge_grad_emit(g, base, MGE_OP_SLICE, 1, &dy[0], 4, sa, 1, NULL, err);
                if (dx[k] < 0)
                    return emit_fail(err);
            }
            off += len;
        }
        return MGE_OK;
    }
    case MGE_OP_COPY: {
        if (!want[0])
            return MGE_OK;
        mge_attr ca = {.key = MGE_KEY_to, .n = 1, .i = {attrs[0].i[0] ? 0 : 1}};
        dx[0] = mge_grad_emit(g, base, MGE_OP_COPY, 1, &dy[0], 1, &ca, 1, NULL, err);
        return dx[0] < 0 ? emit_fail(err) : MGE_OK;
    }
    case MGE_OP_SLICE: {
        if (!want[0])
            return MGE_OK;
        /* the runtime bounds (starts, ends, axes, steps) go along */
        int a[6] = {dy[0], in[0]};
        for (int k = 1; k < nin && k < 5; k++)
            a[k + 1] = in[k];
        mge_attr ga[16];
        int ng = mge_grad_attrs(&(mge_node){.op = op, .nattr = nattr, .attrs = attrs}, MGE_OP_SLICE_GRAD, ga);
        dx[0] = mge_grad_emit(g, base, MGE_OP_SLICE_GRAD, nin + 1, a, ng, ga, 1, NULL, err);
        return dx[0] < 0 ? emit_fail(err) : MGE_OK;
    }
    }
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(op)->name);
}
