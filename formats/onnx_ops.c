/* onnx_ops.c — which converter an ONNX op_type has: the tables of the
 * onnx_ops_<group>.c files, searched in order (core, shape, pool3d, nn, rnn, math, reduce, loss,
 * extra_math, spatial, quant). */
#include "onnx.h"

#include <string.h>

const mge_onnx_op *mge_onnx_find_op(const char *type)
{
    static const mge_onnx_op *const tables[] = {mge_onnx_ops_core,       mge_onnx_ops_shape, mge_onnx_ops_pool3d,
                                                mge_onnx_ops_nn,         mge_onnx_ops_rnn,   mge_onnx_ops_math,
                                                mge_onnx_ops_reduce,     mge_onnx_ops_loss,  mge_onnx_ops_extra_math,
                                                mge_onnx_ops_spatial,    mge_onnx_ops_quant};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const mge_onnx_op *o = tables[t]; o->type; o++)
            if (strcmp(o->type, type) == 0)
                return o;
    return NULL;
}
