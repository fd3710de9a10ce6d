/* ref_comm.c — kernels of allreduce and allreduce_wait: they hand the
 * gradient to the communicator the executor was given (lib/dist.c keeps
 * the buckets) and take the sum back. The cpu table inherits them. */
#include "internal.h"

#include <string.h>

static mge_status no_comm(const mge_kctx *ctx, const mge_node *n, mge_error *err)
{
    return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                         "%s: no communicator (the op runs inside distributed training, mpirun -np N mge-train)",
                         mge_kctx_opname(ctx, n));
}

static mge_status allreduce_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    if (!ctx->comm)
        return no_comm(ctx, n, err);
    int64_t cnt = mge_tensor_numel(in[0]);
    mge_status s = ctx->comm->put(ctx->comm->ud, mge_node_int(n, MGE_KEY_bucket, 0), mge_node_int(n, MGE_KEY_offset, 0),
                                  in[0]->data, cnt, err);
    if (!s && out[0]->data != in[0]->data)
        memcpy(out[0]->data, in[0]->data, in[0]->nbytes);
    return s;
}

static mge_status allreduce_wait_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    (void)in;
    if (!ctx->comm)
        return no_comm(ctx, n, err);
    return ctx->comm->wait(ctx->comm->ud, mge_node_int(n, MGE_KEY_bucket, 0), mge_node_int(n, MGE_KEY_offset, 0),
                           out[0]->data, mge_tensor_numel(out[0]), err);
}

void mge_ref_register_comm(mge_backend *b)
{
    b->k[MGE_OP_ALLREDUCE][MGE_F32].run = allreduce_f32;
    b->k[MGE_OP_ALLREDUCE_WAIT][MGE_F32].run = allreduce_wait_f32;
}
