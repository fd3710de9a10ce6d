/* op_comm.c — shape inference of the distributed ops: allreduce and
 * allreduce_wait give the f32 input's shape (the bucket slot is checked
 * against the tensor at run time by lib/dist.c); sync_batchnorm and its
 * gradient have batchnorm's shapes. */
#include "internal.h"

mge_status mge_comm_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_SYNC_BATCHNORM || n->op == MGE_OP_SYNC_BATCHNORM_GRAD) {
        /* batchnorm's shapes and checks */
        mge_node bn = *n;
        bn.op = n->op == MGE_OP_SYNC_BATCHNORM ? MGE_OP_BATCHNORM : MGE_OP_BATCHNORM_GRAD;
        return mge_norm_infer(&bn, in, out, err);
    }
    const char *op = mge_op_info(n->op)->name;
    if (in[0].dtype != MGE_F32)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: the gradient is %s; only f32 is summed over ranks", op,
                             mge_dtype_name(in[0].dtype));
    int64_t b = mge_node_int(n, MGE_KEY_bucket, 0), off = mge_node_int(n, MGE_KEY_offset, 0);
    if (b < 0 || off < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bucket=%lld, offset=%lld: expected whole numbers >= 0", op,
                             (long long)b, (long long)off);
    out[0] = in[0];
    out[0].known = 0;
    return MGE_OK;
}

double mge_comm_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_SYNC_BATCHNORM || n->op == MGE_OP_SYNC_BATCHNORM_GRAD) {
        mge_node bn = *n;
        bn.op = n->op == MGE_OP_SYNC_BATCHNORM ? MGE_OP_BATCHNORM : MGE_OP_BATCHNORM_GRAD;
        return mge_norm_flops(&bn, in, out);
    }
    /* the weighting multiply of allreduce; the sum itself is communication */
    return n->op == MGE_OP_ALLREDUCE ? mge_tdesc_count(&in[0]) : 0;
}
