#!/usr/bin/env bats
# onnx_quant.bats — the ONNX quantization ops through the tools: a
# QuantizeLinear / DequantizeLinear chain and a QLinearMatMul give the values
# numpy works out (mge-run on the .onnx and on mge-opt's .mge); what mge
# does not take (int16 outputs, per-row input scales, 3-D integer
# convolutions) is listed all at once, each with its reason. The models
# are built here with python3's onnx.helper (skipped, saying so, without it).
# tests/oracle/test_onnx_quant.py checks ONNX Runtime-quantized models.
bats_require_minimum_version 1.5.0

setup() {
    load helper
    "$PY" -c 'import onnx' 2>/dev/null || skip "python3 lacks the onnx module ($PY; scripts/deps installs it)"
}

# mk FILE 'python: set m (helpers: model, vi, h, T, nh, np)'
mk() {
    "$PY" -c "import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
vi = h.make_tensor_value_info
def model(nodes, ins, outs, inits=(), opset=13):
    m = h.make_model(h.make_graph(nodes, 'g', ins, outs, list(inits)), opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    return m
$2
open(sys.argv[1], 'wb').write(m.SerializeToString())" "$1"
}

@test "QuantizeLinear per axis then DequantizeLinear: numpy's values, from .onnx and from mge-opt's .mge" {
    mk "$T/qdq.onnx" 'm = model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
               h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
              [vi("x", T.FLOAT, ["N", 3])], [vi("q", T.UINT8, ["N", 3]), vi("y", T.FLOAT, ["N", 3])],
              [nh.from_array(np.array([0.5, 0.25, 2], np.float32), "s"), nh.from_array(np.array([128, 0, 250], np.uint8), "z")])'
    "$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.array([[1.25, -3, 7], [0.75, 80, -1e9], [np.nan, 0.125, 1e9]], np.float32))' "$T/x.npy"
    "$MGE_BIN/mge-opt" "$T/qdq.onnx" -o "$T/qdq.mge"
    for f in "$T/qdq.onnx" "$T/qdq.mge"; do
        "$MGE_RUN" "$f" --input "$T/x.npy" > "$T/out.npy"
        "$PY" -c 'import numpy as np, sys
f = open(sys.argv[1], "rb"); q = np.load(f); y = np.load(f)
x = np.load(sys.argv[2]); s = np.array([0.5, 0.25, 2], np.float32); z = np.array([128, 0, 250])
want = np.clip(np.rint(np.nan_to_num(x / s, nan=-1e30)) + z, 0, 255).astype(np.uint8)   # NaN: the least value
assert q.dtype == np.uint8 and (q == want).all(), (q, want)
assert (y == (want.astype(np.float32) - z) * s).all(), y' "$T/out.npy" "$T/x.npy"
    done
}

@test "QLinearMatMul: integer product, requantized with ties to even and saturated" {
    mk "$T/qmm.onnx" 'm = model([h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
              [vi("a", T.UINT8, [2, 2])], [vi("y", T.INT8, [2, 2])],
              [nh.from_array(np.array(0.5, np.float32), "as"), nh.from_array(np.array(1, np.uint8), "az"),
               nh.from_array(np.array([[2, 1], [1, 200]], np.uint8), "b"), nh.from_array(np.array(1, np.float32), "bs"),
               nh.from_array(np.array(0, np.uint8), "bz"), nh.from_array(np.array(1, np.float32), "ys"),
               nh.from_array(np.array(-1, np.int8), "yz")], opset=10)'
    "$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.array([[2, 4], [6, 1]], np.uint8))' "$T/a.npy"
    "$MGE_RUN" "$T/qmm.onnx" --input "$T/a.npy" > "$T/y.npy"
    # (a - 1) = [[1, 3], [5, 0]]; times b: [[5, 601], [10, 5]]; * 0.5: [[2.5, 300.5], [5, 2.5]]
    "$PY" -c 'import numpy as np, sys; y = np.load(sys.argv[1]); assert y.dtype == np.int8 and (y == [[1, 127], [4, 1]]).all(), y' "$T/y.npy"
}

@test "quantization nodes mge does not take are listed at once, each with its reason" {
    mk "$T/uns.onnx" 'm = model([h.make_node("QuantizeLinear", ["x", "s"], ["q16"], output_dtype=T.INT16, name="q16"),
               h.make_node("QLinearMatMul", ["a", "rs", "az", "b", "bs", "bz", "bs", "bz"], ["mm"], name="perrow"),
               h.make_node("ConvInteger", ["x1", "w1"], ["c1"], name="conv3d")],
              [vi("x", T.FLOAT, [4]), vi("a", T.UINT8, [2, 3]), vi("x1", T.UINT8, [1, 1, 5, 5, 5])],
              [vi("q16", T.INT16, [4]), vi("mm", T.UINT8, [2, 2]), vi("c1", T.INT32, [1, 1, 3, 3, 3])],
              [nh.from_array(np.array(0.1, np.float32), "s"), nh.from_array(np.array([0.1, 0.2], np.float32), "rs"),
               nh.from_array(np.array(0, np.uint8), "az"), nh.from_array(np.ones((3, 2), np.uint8), "b"),
               nh.from_array(np.array(0.5, np.float32), "bs"), nh.from_array(np.array(0, np.uint8), "bz"),
               nh.from_array(np.ones((1, 1, 3, 3, 3), np.uint8), "w1")], opset=21)'
    run --separate-stderr "$MGE_RUN" "$T/uns.onnx" < /dev/null
    assert_failure 1
    [[ "$stderr" == *"3 unsupported nodes"* ]] || { echo "$stderr"; return 1; }
    [[ "$stderr" == *"'q16' (QuantizeLinear), opset 21: output_dtype int16 (mge quantizes to uint8 and int8)"* ]] || { echo "$stderr"; return 1; }
    [[ "$stderr" == *"'perrow' (QLinearMatMul), opset 21: a per-row or per-channel scale"* ]] || { echo "$stderr"; return 1; }
    [[ "$stderr" == *"'conv3d' (ConvInteger), opset 21: a 3-D integer convolution (mge has 1-D and 2-D)"* ]] || { echo "$stderr"; return 1; }
}
