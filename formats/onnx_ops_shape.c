/* onnx_ops_shape.c — ONNX converters: (being written). */
#include "onnx.h"

const mge_onnx_op mge_onnx_ops_shape[] = {
    {NULL, NULL, 0},
};
