/* onnx_ops_math.c — ONNX converters for elementwise math: the ops that map
 * one to one onto an mge op (unary and broadcasting binary). */
#include "onnx.h"

#include <string.h>

static const struct {
    const char *type;
    int op;
} one_to_one[] = {
    {"Relu", MGE_OP_RELU}, {"Sigmoid", MGE_OP_SIGMOID}, {"Tanh", MGE_OP_TANH}, {"Exp", MGE_OP_EXP},
    {"Log", MGE_OP_LOG},   {"Sqrt", MGE_OP_SQRT},       {"Neg", MGE_OP_NEG},   {"Abs", MGE_OP_ABS},
    {"Add", MGE_OP_ADD},   {"Sub", MGE_OP_SUB},         {"Mul", MGE_OP_MUL},   {"Div", MGE_OP_DIV},
};

static mge_status conv_direct(mge_onnx_ctx *c, mge_onnx_node *n)
{
    for (size_t i = 0; i < sizeof one_to_one / sizeof one_to_one[0]; i++)
        if (strcmp(one_to_one[i].type, n->op_type) == 0) {
            const mge_opinfo *oi = mge_op_info(one_to_one[i].op);
            int nin = mge_onnx_nin(n), in[2];
            if (nin != oi->min_in)
                return mge_onnx_fail(c, n, "%d inputs: expected %d", nin, oi->min_in);
            for (int k = 0; k < nin; k++)
                if ((in[k] = mge_onnx_in(c, n, k)) < 0)
                    return mge_onnx_fail(c, n, "input %d is missing", k);
            return mge_onnx_emit(c, n, one_to_one[i].op, nin, in, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
        }
    return mge_onnx_fail(c, n, "no mapping");
}

const mge_onnx_op mge_onnx_ops_math[] = {
    {"Relu", conv_direct, 7}, {"Sigmoid", conv_direct, 7}, {"Tanh", conv_direct, 7}, {"Exp", conv_direct, 7},
    {"Log", conv_direct, 7},  {"Sqrt", conv_direct, 7},    {"Neg", conv_direct, 7},  {"Abs", conv_direct, 7},
    {"Add", conv_direct, 7},  {"Sub", conv_direct, 7},     {"Mul", conv_direct, 7},  {"Div", conv_direct, 7},
    {NULL, NULL, 0},
};
