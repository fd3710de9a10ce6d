/* onnx_ops_nn.c — ONNX converters: (being written). */
#include "onnx.h"

const mge_onnx_op mge_onnx_ops_nn[] = {
    {NULL, NULL, 0},
};
