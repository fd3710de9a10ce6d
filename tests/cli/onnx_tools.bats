#!/usr/bin/env bats
# Every tool reads .onnx (by content, from stdin too where the tool takes a
# model there), lists its unsupported nodes alike, and mge-train fine-tunes
# an ONNX export with a loss given on the command line (--loss). The models
# are made here with onnx.helper (an MLP whose names mge cannot spell:
# "input:0", "onnx::Gemm_5", "output/0", dim_param "batch_size") and
# torch.onnx.export (a small CNN); without those the tests skip and say why.

bats_require_minimum_version 1.5.0

setup_file() {
    export OX="$BATS_FILE_TMPDIR/onnx"
    mkdir -p "$OX"
    local py=${PYTHON:-/usr/bin/python3}
    # m.onnx, x.npy (5 rows) and ref.npy (onnxruntime's outputs for x)
    "$py" - "$OX" > "$OX/mlp.log" 2>&1 <<'PY' || true
import sys, numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
d = sys.argv[1]
r = np.random.default_rng(0)
init = [nh.from_array(r.standard_normal((8, 4)).astype(np.float32), "fc1.weight"),
        nh.from_array(r.standard_normal(8).astype(np.float32), "fc1.bias"),
        # torch names its folded weights so: a name the text form cannot spell
        nh.from_array(r.standard_normal((3, 8)).astype(np.float32), "onnx::Gemm_5"),
        nh.from_array(r.standard_normal(3).astype(np.float32), "fc2.bias")]
nodes = [h.make_node("Gemm", ["input:0", "fc1.weight", "fc1.bias"], ["/fc1/Gemm_output_0"], transB=1),
         h.make_node("Relu", ["/fc1/Gemm_output_0"], ["/act/Relu_output_0"]),
         h.make_node("Gemm", ["/act/Relu_output_0", "onnx::Gemm_5", "fc2.bias"], ["output/0"], transB=1)]
g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("input:0", TP.FLOAT, ["batch_size", 4])],
                 [h.make_tensor_value_info("output/0", TP.FLOAT, ["batch_size", 3])], init)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="onnx_tools.bats")
onnx.checker.check_model(m)
onnx.save(m, d + "/m.onnx")
x = r.standard_normal((5, 4)).astype(np.float32)
np.save(d + "/x.npy", x)
s = ort.InferenceSession(d + "/m.onnx", providers=["CPUExecutionProvider"])
np.save(d + "/ref.npy", s.run(None, {"input:0": x})[0])
PY
}

setup() {
    load helper
    MGE_TRAIN="$MGE_BIN/mge-train"
    MGE_QUANT="$MGE_BIN/mge-quant"
    MGE_BENCH="$MGE_BIN/mge-bench"
    MGE_PROF="$MGE_BIN/mge-prof"
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
    export XDG_CACHE_HOME="$T/cache"   # mge-prof's peak, not the user's
}

need_mlp() {
    "$PY" -c 'import onnx, onnxruntime' 2> /dev/null || skip "needs onnx and onnxruntime ($PY)"
    [ -s "$OX/m.onnx" ] || { cat "$OX/mlp.log"; return 1; }
}

# close A.npy B.npy TOL: the first records agree within TOL (absolute, scaled by max |B|).
close() {
    py 'a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); t = float(sys.argv[3])
assert a.shape == b.shape, (a.shape, b.shape)
e = float(np.abs(a - b).max()); s = max(1.0, float(np.abs(b).max()))
assert e <= t * s, "max |a-b| = %g > %g" % (e, t * s)' "$@"
}

# cnn.onnx: torch.onnx.export of a conv net over f32[batch,1,28,28] -> logits [batch,10].
make_cnn() {
    "$PY" -c 'import torch' 2> /dev/null || skip "needs PyTorch to export the CNN ($PY)"
    "$PY" - "$T" <<'PY'
import sys, torch, torch.nn as nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv = nn.Conv2d(1, 4, 3, padding=1)
        s.pool = nn.MaxPool2d(2)
        s.fc = nn.Linear(4 * 14 * 14, 10)
    def forward(s, x):
        return s.fc(torch.flatten(s.pool(torch.relu(s.conv(x))), 1))
torch.onnx.export(Net().eval(), torch.randn(2, 1, 28, 28), sys.argv[1] + "/cnn.onnx", input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
PY
}

@test "mge-run m.onnx: the outputs of onnxruntime; the model from stdin with --input" {
    need_mlp
    run --separate-stderr bash -c '"$0" "$1/m.onnx" < "$1/x.npy" > "$2/y.npy"' "$MGE_RUN" "$OX" "$T"
    assert_success
    [ -z "$stderr" ]
    close "$T/y.npy" "$OX/ref.npy" 1e-5
    run --separate-stderr bash -c '"$0" - --input "$1/x.npy" < "$1/m.onnx" > "$2/s.npy"' "$MGE_RUN" "$OX" "$T"
    assert_success
    cmp "$T/y.npy" "$T/s.npy"
}

@test "mge-opt m.onnx -O2 -o m.mge: mge-run m.mge gives the same; the .onnx from stdin too" {
    need_mlp
    run "$MGE_OPT" "$OX/m.onnx" -O2 -o "$T/m.mge"
    assert_success
    "$MGE_RUN" "$T/m.mge" < "$OX/x.npy" > "$T/y2.npy"
    close "$T/y2.npy" "$OX/ref.npy" 1e-5
    "$MGE_OPT" - -o "$T/s.mge" < "$OX/m.onnx"
    "$MGE_RUN" "$T/s.mge" < "$OX/x.npy" > "$T/y3.npy"
    close "$T/y3.npy" "$OX/ref.npy" 1e-5
    # the ONNX names ride along in the .mge
    run "$MGE_DUMP" "$T/m.mge"
    assert_output --partial 'meta onnx.name.input_0 = "input:0"'
}

@test "mge-dump m.onnx: the ONNX names mge changed and the dim_param that became N" {
    need_mlp
    run --separate-stderr "$MGE_DUMP" "$OX/m.onnx"
    assert_success
    assert_output --partial 'meta onnx.dim.N = "batch_size"'
    assert_output --partial 'meta onnx.name.input_0 = "input:0"'
    assert_output --partial 'meta onnx.name.output_0 = "output/0"'
    assert_output --partial 'meta onnx.name.onnx__Gemm_5 = "onnx::Gemm_5"'
    assert_output --partial 'input input_0 : f32[N,4]'
    assert_output --partial 'param onnx__Gemm_5 : f32[3,8]'
    assert_output --partial 'meta onnx.opset = 13'
    # the printed text form parses back (the weights stay in the .onnx)
    echo "$output" > "$T/m.mgt"
    run "$MGE_OPT" "$T/m.mgt" -o "$T/m2.mge"
    assert_success
    run --separate-stderr bash -c '"$0" - < "$1/m.onnx"' "$MGE_DUMP" "$OX"
    assert_success
    assert_output --partial 'meta onnx.dim.N = "batch_size"'
}

@test "mge-bench m.onnx and mge-prof m.onnx" {
    need_mlp
    run --separate-stderr "$MGE_BENCH" "$OX/m.onnx" -b 2 -n 5 --warmup 1 --json
    assert_success
    pyq 'import json; j = json.loads(sys.argv[1]); r = j["results"][0]
assert r["model"].endswith("m.onnx") and r["batch"] == 2 and r["min_ms"] > 0, r' "$output"
    run --separate-stderr "$MGE_PROF" "$OX/m.onnx" --input "$OX/x.npy"
    assert_success
    assert_output --partial "fc1_Gemm_output_0"
    assert_output --partial "linear"
}

@test "mge-quant m.onnx --calib x.npy -o q.mge: an int8 model mge-run runs, near the float one" {
    need_mlp
    run "$MGE_QUANT" "$OX/m.onnx" --calib "$OX/x.npy" -o "$T/q.mge"
    assert_success
    run "$MGE_DUMP" "$T/q.mge"
    assert_output --partial "qs8"
    "$MGE_RUN" "$T/q.mge" < "$OX/x.npy" > "$T/q.npy"
    close "$T/q.npy" "$OX/ref.npy" 0.05
}

@test "mge-train cnn.onnx --loss cross_entropy: fine-tunes a PyTorch export on Fashion-MNIST, the loss falls" {
    make_cnn
    run --separate-stderr "$MGE_TRAIN" "$T/cnn.onnx" --data "$FM" --normalize 0.286,0.353 --loss cross_entropy \
        --label-input label --steps 20 --batch 64 --lr 0.05 --log "$T/log.csv" -o "$T/tuned.mge"
    assert_success
    pyq 'import csv
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["kind"] == "step"]
assert len(rows) == 20, len(rows)
l = [float(r["loss"]) for r in rows]
first, last = sum(l[:5]) / 5, sum(l[-5:]) / 5
assert last < 0.8 * first, (first, last)' "$T/log.csv"
    # a normal .mge: the loss and its label ride along, inference needs x alone
    run "$MGE_DUMP" "$T/tuned.mge"
    assert_output --partial "input label : i32[N]"
    assert_output --partial "loss = cross_entropy(logits, label)"
    assert_output --partial "minimize loss"
    npys "$T/x.npy" f32:3x1x28x28:rand
    "$MGE_RUN" "$T/tuned.mge" < "$T/x.npy" > "$T/y.npy"
    [ "$(npy_show "$T/y.npy" | cut -d' ' -f2)" = 3x10 ]
    # the weights moved: the export and the tuned model differ on the same input
    "$MGE_RUN" "$T/cnn.onnx" < "$T/x.npy" > "$T/y0.npy"
    ! cmp -s "$T/y.npy" "$T/y0.npy"
    # and training continues from the checkpoint without --loss
    run "$MGE_TRAIN" "$T/tuned.mge" --data "$FM" --normalize 0.286,0.353 --steps 2 -o "$T/more.mge"
    assert_success
}

@test "mge-train m.onnx --loss mse --loss-output: the ONNX output name; the model from stdin" {
    need_mlp
    py 'r = np.random.default_rng(1); x = r.standard_normal((64, 4)).astype(np.float32)
np.savez(sys.argv[1], input_0=x, target=np.stack([x.sum(1), x[:, 0], -x[:, 1]], 1).astype(np.float32))' "$T/d.npz"
    run --separate-stderr "$MGE_TRAIN" "$OX/m.onnx" --data "$T/d.npz" --loss mse --loss-output output/0 \
        --label-input target --steps 30 --batch 16 --lr 0.01 --log "$T/log.csv" -o "$T/t.mge"
    assert_success
    pyq 'import csv
l = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1])) if r["kind"] == "step"]
assert sum(l[-5:]) < sum(l[:5]), l' "$T/log.csv"
    run "$MGE_DUMP" "$T/t.mge"
    assert_output --partial "input target : f32[N,3]"
    assert_output --partial "loss = mse(output_0, target)"
    run bash -c '"$0" - --data "$1/d.npz" --loss mse --label-input target --steps 2 --batch 16 -o "$1/s.mge" < "$2/m.onnx"' \
        "$MGE_TRAIN" "$T" "$OX"
    assert_success
    [ -s "$T/s.mge" ]
}

@test "mge-train --loss on a text model without a loss" {
    need_numpy
    write_mlp "$T/mlp.mgt"
    py 'r = np.random.default_rng(0); x = r.standard_normal((64, 4)).astype(np.float32)
np.savez(sys.argv[1], x=x, label=np.argmax(x[:, :3], 1).astype(np.int32))' "$T/d.npz"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" --loss cross_entropy --steps 5 --batch 16 -o "$T/t.mge"
    assert_success
    run "$MGE_DUMP" "$T/t.mge"
    assert_output --partial "loss = cross_entropy(fc2, label)"
}

@test "mge-train --loss errors: a model with a loss, an unknown output, a label name in use, usage" {
    need_numpy
    write_small
    write_mlp "$T/mlp.mgt"
    py 'np.savez(sys.argv[1], x=np.zeros((8, 4), np.float32), label=np.zeros(8, np.int32))' "$T/d.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/d.npz" --loss mse -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "small.mgt: error: the model already minimizes 'loss': drop --loss to train with it, or give a model without one"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" --loss cross_entropy --loss-output fc1 -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "mlp.mgt: error: --loss-output fc1: not an output of the model; the model's outputs are 'fc2'"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" --loss cross_entropy --loss-output nope -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "--loss-output nope: no such value"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" --loss cross_entropy --label-input x -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "--label-input x: the model already has an input 'x' f32[N,4] that the model reads"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" --loss cross_entropy --label-input fc1 -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "--label-input fc1: the model already has a value 'fc1'"
    # the data's label must fit the input --loss made (i32 class indices [N])
    py 'np.savez(sys.argv[1], x=np.zeros((8, 4), np.float32), label=np.zeros((8, 3), np.float32))' "$T/f.npz"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/f.npz" --loss cross_entropy -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "label"
    [ ! -e "$T/o.mge" ]
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" --loss huber -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--loss huber: expected cross_entropy or mse"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" --label-input y -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--label-input only applies to --loss"
    run "$MGE_TRAIN" "$T/mlp.mgt" --data "$T/d.npz" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "or give --loss cross_entropy|mse"
}

@test "unsupported nodes: every tool lists them all at once, exits 1 and writes nothing" {
    "$PY" -c 'import onnx' 2> /dev/null || skip "needs onnx ($PY)"
    "$PY" - "$T/uns.onnx" <<'PY'
import sys, onnx
from onnx import helper as h, TensorProto as TP
nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("FooBar", ["a"], ["b"], domain="com.example"),
         h.make_node("NonZero", ["a"], ["c"]), h.make_node("Add", ["b", "c"], ["y"])]
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", 4])],
                 [h.make_tensor_value_info("y", TP.FLOAT, ["N", 4])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.example", 1)]), sys.argv[1])
PY
    npys "$T/x.npy" f32:2x4:rand
    for tool in mge-run mge-opt mge-dump mge-bench mge-prof mge-quant mge-train; do
        case $tool in
        mge-opt) args=(-o "$T/out.mge") ;;
        mge-quant) args=(--calib "$T/x.npy" -o "$T/out.mge") ;;
        mge-train) args=(--data "$T/x.npy" --loss mse -o "$T/out.mge") ;;
        *) args=() ;;
        esac
        run "$MGE_BIN/$tool" "$T/uns.onnx" "${args[@]}" < "$T/x.npy"
        [ "$status" -eq 1 ] || { echo "$tool: exit $status: $output"; return 1; }
        assert_line --index 0 --partial "uns.onnx: error: 2 unsupported nodes (nothing was converted):"
        assert_line --partial "FooBar -> 'b', domain com.example: the domain is not supported"
        assert_line --partial "NonZero -> 'c', opset 17: the output's shape depends on the data"
        [ ! -e "$T/out.mge" ]
    done
}
