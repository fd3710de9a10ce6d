#!/usr/bin/env bats
# onnx_extra_math.bats — the converters of formats/onnx_ops_extra_math.c
# (Acos ... Sinh, Shrink, Bitwise*, BitShift, Det, LRN, DFT, the
# windows): every case of tests/cli/onnx_extra_math.py against ONNX Runtime
# and numpy; what mge cannot express listed at once with its reason; and
# malformed nodes as hard errors naming the node.
bats_require_minimum_version 1.5.0
load helper

need_onnx() {
    "$PY" -c 'import numpy, onnx' 2>/dev/null || skip "numpy or onnx not installed ($PY)"
}

# mk FILE OPSET 'NODES' ['INPUTS']: a model over x f32[2,8,3,1] (and INPUTS)
# whose graph outputs are the NODES' outputs named y*.
mk() {
    "$PY" - "$@" <<'PY'
import sys
import onnx
from onnx import helper as h, TensorProto as T
path, opset, nodes = sys.argv[1], int(sys.argv[2]), eval(sys.argv[3])
ins = [h.make_tensor_value_info("x", T.FLOAT, [2, 8, 3, 1])] + (eval(sys.argv[4]) if len(sys.argv) > 4 else [])
outs = [h.make_empty_tensor_value_info(o) for nd in nodes for o in nd.output if o.startswith("y")]
m = h.make_model(h.make_graph(nodes, "t", ins, outs), opset_imports=[h.make_opsetid("", opset)])
m.ir_version = 8
onnx.save(m, path)
PY
}

@test "ONNX extra math converters agree with ONNX Runtime and numpy" {
    need_onnx
    run "$PY" "$BATS_TEST_DIRNAME/onnx_extra_math.py" "$MGE_RUN"
    [ "$status" -ne 77 ] || skip "$output"
    echo "$output"
    [ "$status" -eq 0 ]
    assert_output --partial ", 0 disagree"
}

@test "ONNX extra math nodes mge cannot express are listed at once with the reason" {
    need_onnx
    mk "$T/u.onnx" 18 '[h.make_node("HannWindow", ["n"], ["y1"]),
        h.make_node("DFT", ["x", "n"], ["y2"]),
        h.make_node("BitShift", ["i", "i"], ["y3"], direction="LEFT"),
        h.make_node("Shrink", ["i"], ["y4"])]' \
        '[h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("i", T.INT32, [3]),
          h.make_tensor_value_info("x2", T.FLOAT, [3, 3])]'
    run -1 "$MGE_RUN" "$T/u.onnx" </dev/null
    assert_output --partial "4 unsupported nodes (nothing was converted)"
    assert_output --partial "HannWindow -> 'y1', opset 18: its size ('n') is not a constant: mge needs it known at import"
    assert_output --partial "DFT -> 'y2', opset 18: its dft_length ('n') is not a constant: mge needs it known at import"
    assert_output --partial "BitShift -> 'y3', opset 18: BitShift over i32 (mge takes u8, u16, u32 and u64 (ONNX's BitShift is for unsigned types))"
    assert_output --partial "Shrink -> 'y4', opset 18: Shrink over i32 (mge's shrink takes f32, f16 and bf16)"
}

@test "malformed ONNX extra math nodes are hard errors naming the node" {
    need_onnx
    mk "$T/a.onnx" 18 '[h.make_node("BitShift", ["u", "u"], ["y"], direction="UP")]' \
        '[h.make_tensor_value_info("u", T.UINT8, [3])]'
    run -1 "$MGE_RUN" "$T/a.onnx" </dev/null
    assert_output --partial "error: node BitShift -> 'y': direction 'UP': expected LEFT or RIGHT"
    mk "$T/b.onnx" 13 '[h.make_node("LRN", ["x"], ["y"])]'
    run -1 "$MGE_RUN" "$T/b.onnx" </dev/null
    assert_output --partial "error: node LRN -> 'y': no size attribute (required)"
    mk "$T/c.onnx" 17 '[h.make_node("DFT", ["x"], ["y"], axis=3)]'
    run -1 "$MGE_RUN" "$T/c.onnx" </dev/null
    assert_output --partial "error: node DFT -> 'y': axis 3 on rank 4: expected a signal axis (not the last)"
    mk "$T/e.onnx" 11 '[h.make_node("Det", ["v"], ["y"])]' '[h.make_tensor_value_info("v", T.FLOAT, [3])]'
    run -1 "$MGE_RUN" "$T/e.onnx" </dev/null
    assert_output --partial "error: node Det -> 'y': input of rank 1: expected [..., M, M]"
    mk "$T/f.onnx" 17 '[h.make_node("HannWindow", ["n"], ["y"])]' \
        '[h.make_tensor_value_info("n", T.INT64, [])]'
    "$PY" - "$T/f.onnx" <<'PY'
import sys, onnx, numpy as np
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
m.graph.initializer.append(numpy_helper.from_array(np.array(-3, np.int64), "n"))
onnx.save(m, sys.argv[1])
PY
    run -1 "$MGE_RUN" "$T/f.onnx" </dev/null
    assert_output --partial "error: node HannWindow -> 'y': size -3: expected 0 to 2^26"
}

@test "mge's det, dft, eye_like and bitwise ops from the text form" {
    need_onnx
    cat > "$T/m.mgt" <<'MGT'
input a : f32[2,2]
input s : f32[4,1]
input u : u8[3]
d = det(a)
f = dft(s, axis=0)
x = bitwise_xor(u, u)
n = bitwise_not(u)
l = shift_left(u, u)
e = eye_like(a, k=1, dtype=i32)
output d
output f
output x
output n
output l
output e
MGT
    "$PY" -c '
import sys, numpy as np
for v in (np.array([[1, 2], [3, 4]], np.float32), np.array([[1], [0], [0], [0]], np.float32),
          np.array([1, 2, 9], np.uint8)):
    np.save(sys.stdout.buffer, v)' > "$T/in.npy"
    run -0 "$MGE_RUN" "$T/m.mgt" --input "$T/in.npy" -o "$T/out.npy"
    run -0 "$PY" -c '
import sys, numpy as np
f = open(sys.argv[1], "rb")
d, dft, x, n, l, e = (np.load(f) for _ in range(6))
assert abs(float(d) + 2) < 1e-6, d
assert np.allclose(dft, [[1, 0]] * 4), dft
assert (x == 0).all() and list(n) == [254, 253, 246] and list(l) == [2, 8, 0], (x, n, l)
assert e.dtype == np.int32 and e.tolist() == [[0, 1], [0, 0]], e
print("ok")' "$T/out.npy"
    assert_output "ok"
}

@test "mge-opt --emit onnx writes the extra math ops; onnxruntime agrees with mge-run" {
    need_onnx
    "$PY" -c 'import onnxruntime' 2>/dev/null || skip "onnxruntime not installed ($PY)"
    cat > "$T/m.mgt" <<'MGT'
input x : f32[2,6,3,1]
input m : f32[2,3,3]
input u : u8[5]
a = acos(x)
s = shrink(x, lambd=0.3, shift=0.1)
h = sinh(s)
d = det(m)
mm = reshape(m, shape=[6,3])
l = lrn(x, size=3, alpha=0.2, beta=0.5, shift=1.5)
f = dft(x, axis=1, onesided=true, length=8)
sl = shift_left(u, u)
e = eye_like(mm, k=1)
output a
output h
output d
output l
output f
output sl
output e
MGT
    run -0 "$MGE_OPT" "$T/m.mgt" --emit onnx -o "$T/m.onnx"
    run -0 "$PY" - "$MGE_RUN" "$T/m.mgt" "$T/m.onnx" <<'PY'
import io, subprocess, sys
import numpy as np, onnxruntime as ort
ort.set_default_logger_severity(3)
r = np.random.default_rng(1)
ins = [r.uniform(-1, 1, (2, 6, 3, 1)).astype(np.float32), r.uniform(-2, 2, (2, 3, 3)).astype(np.float32),
       np.array([1, 2, 3, 200, 7], np.uint8)]
s = ort.InferenceSession(sys.argv[3], providers=["CPUExecutionProvider"])
want = s.run(None, {i.name: v for i, v in zip(s.get_inputs(), ins)})
b = io.BytesIO()
for v in ins:
    np.save(b, v)
p = subprocess.run([sys.argv[1], sys.argv[2]], input=b.getvalue(), capture_output=True, check=True)
o = io.BytesIO(p.stdout)
for k, w in enumerate(want):
    g = np.load(o)
    assert g.shape == w.shape and g.dtype == w.dtype and np.allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True), k
print("ok", len(want))
PY
    assert_output "ok 7"
    # the bitwise ops are opset 18: reported, with the reason
    printf 'input u : u8[5]\ny = bitwise_and(u, u)\noutput y\n' > "$T/b.mgt"
    run -1 "$MGE_OPT" "$T/b.mgt" --emit onnx -o "$T/b.onnx"
    assert_output --partial "the bitwise ops are ONNX opset 18 (the writer emits opset 17)"
}
