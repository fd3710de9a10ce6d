#!/usr/bin/env bats
# onnx_bind.bats — ONNX models whose shape-like operands are graph inputs
# (ReduceSum's axes, Reshape's shape) or are computed from constants by ops
# the plan-time arithmetic does not evaluate: mge-run specializes the model
# on each record's values (re-specializing when they change), the other
# tools name the inputs that need values, and mge-opt --bind makes a
# specialized .mge.
bats_require_minimum_version 1.5.0
load helper

MGE_TRAIN="$MGE_BIN/mge-train"
MGE_QUANT="$MGE_BIN/mge-quant"
MGE_BENCH="$MGE_BIN/mge-bench"
MGE_PROF="$MGE_BIN/mge-prof"

setup() {
    "$PY" -c 'import numpy, onnx' 2>/dev/null || skip "numpy or onnx not installed ($PY)"
    # y = ReduceSum(x, axes, keepdims=0), z = Reshape(x + 1, shape)
    "$PY" - "$T" <<'PY'
import sys
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T
d = sys.argv[1]
ins = [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4]), h.make_tensor_value_info("axes", T.INT64, [1]),
       h.make_tensor_value_info("shape", T.INT64, [2])]
one = h.make_tensor("one", T.FLOAT, [], [1.0])
nodes = [h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0), h.make_node("Add", ["x", "one"], ["x1"]),
         h.make_node("Reshape", ["x1", "shape"], ["z"])]
outs = [h.make_empty_tensor_value_info("y"), h.make_empty_tensor_value_info("z")]
m = h.make_model(h.make_graph(nodes, "bind", ins, outs, [one]), opset_imports=[h.make_opsetid("", 18)])
onnx.save(m, f"{d}/m.onnx")
# axes computed from constants: Neg of a Constant, through a Cast
c = h.make_tensor("c", T.FLOAT, [1], [-2.0])
nodes = [h.make_node("Neg", ["c"], ["nc"]), h.make_node("Cast", ["nc"], ["ax"], to=T.INT64),
         h.make_node("Sub", ["ax", "k1"], ["ax1"]), h.make_node("ReduceMax", ["x", "ax1"], ["y"], keepdims=1)]
k1 = h.make_tensor("k1", T.INT64, [1], [1])
m = h.make_model(h.make_graph(nodes, "fold", ins[:1], [h.make_empty_tensor_value_info("y")], [c, k1]),
                 opset_imports=[h.make_opsetid("", 18)])
onnx.save(m, f"{d}/fold.onnx")
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
steps = [([1], [4, 6]), ([1], [4, 6]), ([2], [3, 8]), ([0], [24, 1])]
with open(f"{d}/in.npy", "wb") as f:
    for ax, sh in steps:
        np.save(f, x * (1 + len(sh)))
        np.save(f, np.array(ax, np.int64))
        np.save(f, np.array(sh, np.int64))
np.save(f"{d}/x.npy", x)
np.save(f"{d}/axes.npy", np.array([2], np.int64))
np.save(f"{d}/shape.npy", np.array([6, 4], np.int64))
PY
}

@test "mge-run specializes on each record's axes and shape; a record with other values re-specializes (-v)" {
    run --separate-stderr bash -c '"$0" -v "$1/m.onnx" < "$1/in.npy" > "$1/out.npy"' "$MGE_RUN" "$T"
    assert_success
    [[ "$stderr" == *"step 0: specialized the model on axes = i64[1] 1, shape = i64[2] 4 6"* ]]
    [[ "$stderr" == *"step 2: input 'axes' has another value"* ]]
    [[ "$stderr" == *"step 2: re-specialized the model on axes = i64[1] 2, shape = i64[2] 3 8"* ]]
    [[ "$stderr" == *"step 3: re-specialized"* ]]
    [[ "$stderr" != *"step 1:"* ]]   # the same values: the same plan
    py '
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
f = open(sys.argv[1], "rb")
for ax, sh in [([1], [4, 6]), ([1], [4, 6]), ([2], [3, 8]), ([0], [24, 1])]:
    xs = x * (1 + len(sh))
    y, z = np.load(f), np.load(f)
    assert np.array_equal(y, xs.sum(axis=tuple(ax))), (ax, y)
    assert np.array_equal(z, (xs + 1).reshape(sh)), (sh, z.shape)
assert f.read() == b""' "$T/out.npy"
}

@test "mge-run: bound inputs come by name (-i NAME=FILE) like the others; --check compares every step" {
    run "$MGE_RUN" "$T/m.onnx" -i x="$T/x.npy" -i axes="$T/axes.npy" -i shape="$T/shape.npy" -o "$T/o.npy"
    assert_success
    py '
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
f = open(sys.argv[1], "rb")
assert np.array_equal(np.load(f), x.sum(axis=2))
assert np.array_equal(np.load(f), (x + 1).reshape(6, 4))
np.save(sys.argv[2], x.sum(axis=2)); f2 = open(sys.argv[2], "ab"); np.save(f2, (x + 1).reshape(6, 4) + 1)' \
        "$T/o.npy" "$T/ref.npy"
    run "$MGE_RUN" "$T/m.onnx" -i x="$T/x.npy" -i axes="$T/axes.npy" -i shape="$T/shape.npy" --check "$T/ref.npy"
    assert_failure 1
    assert_output --partial "24 of 30 values differ"
    run "$MGE_RUN" "$T/m.onnx" -i nope="$T/x.npy"
    assert_failure
    assert_output --partial "no input named 'nope'"
}

@test "mge-run: a value the model cannot take is an error naming the input and step" {
    py 'f = open(sys.argv[1], "wb")
np.save(f, np.zeros((2, 3, 4), np.float32)); np.save(f, np.array([1], np.int64)); np.save(f, np.array([4, 6], np.int64))
np.save(f, np.zeros((2, 3, 4), np.float32)); np.save(f, np.array([7], np.int64)); np.save(f, np.array([4, 6], np.int64))' \
        "$T/bad.npy"
    run --separate-stderr bash -c '"$0" "$1/m.onnx" < "$1/bad.npy" > /dev/null' "$MGE_RUN" "$T"
    assert_failure 1
    [[ "$stderr" == *"node ReduceSum -> 'y': axis 7 is out of range for rank 3"* ]]
    [[ "$stderr" == *"step 1: the model does not import specialized on axes = i64[1] 7, shape = i64[2] 4 6"* ]]
    # a record whose shape does not fit the declared input
    py 'f = open(sys.argv[1], "wb")
np.save(f, np.zeros((2, 3, 4), np.float32)); np.save(f, np.array([1, 2], np.int64)); np.save(f, np.array([4, 6], np.int64))' \
        "$T/bad2.npy"
    run --separate-stderr bash -c '"$0" "$1/m.onnx" < "$1/bad2.npy" > /dev/null' "$MGE_RUN" "$T"
    assert_failure 1
    [[ "$stderr" == *"input 'axes' is i64[1]: its bound value is i64[2]"* ]]
    # no records: nothing to take the values from
    run -1 "$MGE_RUN" "$T/m.onnx" < /dev/null
    assert_output --partial "the import needs the values of inputs 'axes', 'shape'"
}

@test "the other tools name the inputs whose values the import needs" {
    for tool in "$MGE_OPT" "$MGE_DUMP" "$MGE_PROF" "$MGE_QUANT"; do
        args=()
        [ "$tool" = "$MGE_QUANT" ] && args=(--calib "$T/x.npy" -o "$T/q.mge")
        [ "$tool" = "$MGE_OPT" ] && args=(-o "$T/o.mge")
        run "$tool" "$T/m.onnx" "${args[@]}"
        assert_failure 1
        assert_output --partial "ReduceSum -> 'y', opset 18: its axes ('axes') is not a constant"
        assert_output --partial "the import needs the values of inputs 'axes', 'shape'"
        assert_output --partial "mge-opt --bind NAME=FILE.npy"
    done
    run "$MGE_BENCH" "$T/m.onnx" -n 1 --warmup 0
    assert_failure 1
    assert_output --partial "the import needs the values of inputs 'axes', 'shape'"
    run "$MGE_TRAIN" "$T/m.onnx" --data "$T/x.npy" --epochs 1 -o "$T/t.mge"
    assert_failure
    assert_output --partial "the import needs the values of inputs 'axes', 'shape'"
    [ ! -e "$T/o.mge" ] && [ ! -e "$T/q.mge" ] && [ ! -e "$T/t.mge" ]
}

@test "mge-opt --bind NAME=FILE.npy specializes the model into a .mge that mge-run runs" {
    run "$MGE_OPT" "$T/m.onnx" --bind axes="$T/axes.npy" --bind shape="$T/shape.npy" -o "$T/s.mge"
    assert_success
    run "$MGE_DUMP" "$T/s.mge"
    assert_output --partial 'meta onnx.bound.axes = "i64[1] 2"'
    assert_output --partial 'meta onnx.bound.shape = "i64[2] 6 4"'
    assert_output --partial "y = sum(x, axis=2)"
    # the bound inputs stay declared; mge-run reads only what is needed
    "$MGE_RUN" "$T/s.mge" < "$T/x.npy" > "$T/s.npy"
    py '
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
f = open(sys.argv[1], "rb")
assert np.array_equal(np.load(f), x.sum(axis=2))
assert np.array_equal(np.load(f), (x + 1).reshape(6, 4))' "$T/s.npy"
    # a binding the import cannot use is an error
    run "$MGE_OPT" "$T/m.onnx" --bind axes="$T/axes.npy" -o "$T/p.mge"
    assert_failure 1
    assert_output --partial "the import needs the value of input 'shape'"
    run "$MGE_OPT" "$T/m.onnx" --bind nope="$T/axes.npy" --bind axes="$T/axes.npy" --bind shape="$T/shape.npy" -o "$T/p.mge"
    assert_failure 1
    assert_output --partial "a value is bound to 'nope', which is not an input of the model"
    run "$MGE_OPT" "$T/m.onnx" --bind axes="$T/x.npy" --bind shape="$T/shape.npy" -o "$T/p.mge"
    assert_failure 1
    assert_output --partial "input 'axes' is i64[1]: its bound value is f32[2,3,4]"
    run "$MGE_OPT" "$T/m.onnx" --bind axes -o "$T/p.mge"
    assert_failure 2
    assert_output --partial "--bind axes: expected NAME=FILE.npy"
    "$MGE_OPT" "$T/m.onnx" --bind axes="$T/axes.npy" --bind shape="$T/shape.npy" -S -o "$T/s.mgt"
    run "$MGE_OPT" "$T/s.mgt" --bind axes="$T/axes.npy" -o "$T/p.mge"
    assert_failure 1
    assert_output --partial "input values are bound at the import of an ONNX model"
    [ ! -e "$T/p.mge" ]
}

@test "a shape-like operand computed from constants (Neg, Cast, Sub) folds at import" {
    run "$MGE_DUMP" "$T/fold.onnx"
    assert_success
    assert_output --partial "y = max(x, axis=1, keepdim=true)"
    "$MGE_RUN" "$T/fold.onnx" < "$T/x.npy" > "$T/f.npy"
    py '
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
assert np.array_equal(np.load(sys.argv[1]), x.max(axis=1, keepdims=True))' "$T/f.npy"
}

@test "shape arithmetic on a symbol stays symbolic: nothing is folded or bound for it" {
    "$PY" - "$T" <<'PY'
import sys
import onnx
from onnx import helper as h, TensorProto as T
x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4])
s = h.make_tensor("s0", T.INT64, [1], [0])
e = h.make_tensor("e1", T.INT64, [1], [1])
t = h.make_tensor("tail", T.INT64, [2], [2, 2])
nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Slice", ["sh", "s0", "e1"], ["n"]),
         h.make_node("Concat", ["n", "tail"], ["shape"], axis=0), h.make_node("Reshape", ["x", "shape"], ["y"])]
m = h.make_model(h.make_graph(nodes, "sym", [x], [h.make_empty_tensor_value_info("y")], [s, e, t]),
                 opset_imports=[h.make_opsetid("", 18)])
onnx.save(m, f"{sys.argv[1]}/sym.onnx")
PY
    run "$MGE_DUMP" "$T/sym.onnx"
    assert_success
    assert_output --partial "input x : f32[N,4]"
    assert_output --partial "# outputs: y f32[N,2,2]"
    refute_output --partial "onnx.bound"
    py 'f = open(sys.argv[1], "wb"); np.save(f, np.ones((3, 4), np.float32)); np.save(f, np.ones((5, 4), np.float32))' \
        "$T/xs.npy"
    run --separate-stderr bash -c '"$0" -v "$1/sym.onnx" < "$1/xs.npy" > "$1/ys.npy"' "$MGE_RUN" "$T"
    assert_success
    [[ "$stderr" != *"specialized"* ]]
    py 'f = open(sys.argv[1], "rb"); assert np.load(f).shape == (3, 2, 2); assert np.load(f).shape == (5, 2, 2)' "$T/ys.npy"
}
