#!/usr/bin/env bats
# mge-quant: post-training int8 quantization (and f16/bf16 weights) from
# the command line: every option, the report, and every error with its
# exit status (1 failure, 2 usage) and the file it names.

bats_require_minimum_version 1.5.0

# One f32 LeNet (random weights from mge-opt, batch norm included) and its
# int8 form, made once: calibrating costs a little, and most tests only
# need one of them.
setup_file() {
    load helper
    local d=$BATS_FILE_TMPDIR
    "$MGE_OPT" "$SAMPLES/lenet.mgt" -o "$d/m.mge"
    "$MGE_BIN/mge-quant" "$d/m.mge" --calib "$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist/t10k" \
        --batches 2 -o "$d/q.mge"
}

setup() {
    load helper
    MGE_QUANT="$MGE_BIN/mge-quant"
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
    M="$BATS_FILE_TMPDIR/m.mge"
    Q="$BATS_FILE_TMPDIR/q.mge"
}

# size FILE: bytes.
size() {
    stat -c %s "$1"
}

# outputs_close F32.npy Q.npy MAXREL MINAGREE: the outputs of the f32 and the int8
# model agree: ||q - f|| / ||f|| <= MAXREL and the argmax of at least
# MINAGREE of the rows is the same.
outputs_close() {
    py '
import os
def records(path):
    out, n = [], os.path.getsize(path)
    with open(path, "rb") as fh:
        while fh.tell() < n:
            out.append(np.load(fh))
    return np.concatenate(out).astype(np.float64)
f = records(sys.argv[1])
q = records(sys.argv[2])
assert f.shape == q.shape, (f.shape, q.shape)
rel = np.linalg.norm(q - f) / np.linalg.norm(f)
agree = (f.argmax(1) == q.argmax(1)).mean()
print("rel %.5f agree %.4f" % (rel, agree))
sys.exit(0 if rel <= float(sys.argv[3]) and agree >= float(sys.argv[4]) else 1)' "$@"
}

# ---------------------------------------------------------------- help, version

@test "mge-quant --help prints usage on stdout and exits 0" {
    run --separate-stderr "$MGE_QUANT" --help
    assert_success
    assert_output --partial "Usage: mge-quant"
    assert_output --partial "--calib"
    assert_output --partial "--method"
    [ -z "$stderr" ]
}

@test "mge-quant --version" {
    run "$MGE_QUANT" --version
    assert_success
    assert_output "mge-quant (mge) 0.1.0"
}

# ---------------------------------------------------------------- the int8 model

@test "lenet: the int8 model is under 0.3x the f32 one and mge-dump shows it" {
    [ "$(size "$Q")" -lt "$(( $(size "$M") * 3 / 10 ))" ]
    run od -An -tx1 -N8 "$Q"
    assert_output " 89 4d 47 45 0d 0a 1a 0a"
    run "$MGE_DUMP" "$Q"
    assert_success
    assert_output --regexp "# [a-z0-9]+ +qconv2d +qs8\[1,32,28,28\]"
    assert_output --regexp "# [a-z0-9]+ +qlinear +qs8\[1,128\]"
    assert_output --partial "quantize(x, scale="
    assert_output --partial "scale/zero"
    assert_output --regexp "# by dtype: qs8 [0-9]+ bytes, qs32 [0-9]+ bytes"
    # batch norm is folded; the loss comes back on the f32 logits (so
    # mge-run --accuracy works); the output keeps its name and is f32
    refute_output --partial "batchnorm"
    assert_output --partial "= cross_entropy(fc2, label)"
    assert_output --partial "# inputs : x f32[N,1,28,28], label i32[N]"
    assert_output --partial "# outputs: fc2 f32[N,10]"
    # weights in [-127, 127] per output channel: 32 + 64 + 128 + 10 scales
    run "$MGE_DUMP" --json "$Q"
    assert_success
    pyq 'import json
d = json.loads(sys.argv[1])
bd = d["params"]["by_dtype"]
assert set(bd) == {"qs8", "qs32"}, bd
assert bd["qs8"] == 288 + 18432 + 401408 + 1280, bd
ops = [n["op"] for n in d["nodes"]]
assert ops.count("qconv2d") == 2 and ops.count("qlinear") == 2, ops
for n in d["nodes"]:
    if n["op"] in ("qconv2d", "qlinear", "quantize", "dequantize"):
        assert n["scale"] > 0 and -128 <= n["zero"] <= 127, n
    else:
        assert "scale" not in n, n' "$output"
}

@test "lenet: mge-run of the int8 model is close to the f32 model on 1000 test images" {
    "$MGE_RUN" "$M" --data "$FM/t10k" --batch 250 -o "$T/f.npy"
    run "$MGE_RUN" "$Q" --data "$FM/t10k" --batch 250 -o "$T/q.npy"
    assert_success
    # --data writes one record of all 1000 rows, whatever --batch
    run npy_show "$T/q.npy"
    assert_output --regexp '^f32 1000x10 '
    # measured: relative error 0.006 and every argmax the same (random
    # weights, 64 calibration images); 8-bit activations through 4 layers
    # allow a few percent, and near-ties may flip a few argmaxes
    run outputs_close "$T/f.npy" "$T/q.npy" 0.05 0.95
    echo "$output"
    assert_success
}

@test "lenet: an NPY input stream through the int8 model" {
    need_numpy
    py 'import gzip
raw = gzip.open(sys.argv[1], "rb").read()
x = np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 1, 28, 28)[:20].astype(np.float32) / 255
np.save(sys.argv[2], x)' "$FM/t10k-images-idx3-ubyte.gz" "$T/x.npy"
    "$MGE_RUN" "$M" < "$T/x.npy" > "$T/f.npy"
    run "$MGE_RUN" "$Q" -o "$T/q.npy" < "$T/x.npy"
    assert_success
    run npy_show "$T/q.npy"
    assert_output --regexp "^f32 20x10 "
    run outputs_close "$T/f.npy" "$T/q.npy" 0.05 0.9
    echo "$output"
    assert_success
}

@test "the int8 kernels give the same bits on every ISA level" {
    "$MGE_RUN" "$Q" --data "$FM/t10k" --batch 500 -o "$T/native.npy"
    for isa in baseline avx2 avx2-vnni avx512; do
        MGE_CPU_ISA=$isa "$MGE_RUN" "$Q" --data "$FM/t10k" --batch 500 -o "$T/$isa.npy"
        cmp "$T/native.npy" "$T/$isa.npy"
    done
}

@test "quantization is deterministic and does not depend on --threads" {
    "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --threads 1 -o "$T/a.mge"
    "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --threads 3 -o "$T/b.mge"
    cmp "$T/a.mge" "$Q"
    cmp "$T/b.mge" "$Q"
}

# ---------------------------------------------------------------- inputs and outputs

@test "mge-quant reads the model from stdin and writes stdout by default" {
    "$MGE_QUANT" --calib "$FM/t10k" --batches 2 < "$M" > "$T/a.mge"
    "$MGE_QUANT" - --calib "$FM/t10k" --batches 2 < "$M" > "$T/b.mge"
    cmp "$T/a.mge" "$Q"
    cmp "$T/b.mge" "$Q"
}

@test "calibration data from stdin, the model from a file" {
    need_numpy
    py 'np.save(sys.argv[1], np.random.default_rng(1).random((40, 1, 28, 28), dtype=np.float32))' "$T/x.npy"
    "$MGE_QUANT" "$M" --calib "$T/x.npy" -o "$T/a.mge"
    run "$MGE_QUANT" "$M" --calib - -o "$T/b.mge" < "$T/x.npy"
    assert_success
    cmp "$T/a.mge" "$T/b.mge"
}

@test "a text model with its weights quantizes as the .mge does" {
    "$MGE_DUMP" "$M" --params "$T/w.npz" > /dev/null
    "$MGE_OPT" -S "$M" 2> /dev/null > "$T/m.mgt"
    echo 'weights "w.npz"' >> "$T/m.mgt"
    run "$MGE_QUANT" "$T/m.mgt" --calib "$FM/t10k" --batches 2 -o "$T/q.mge"
    assert_success
    cmp "$T/q.mge" "$Q"
}

@test "-o into a directory that does not exist fails and leaves nothing" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 -o "$T/nodir/q.mge"
    assert_failure 1
    assert_output --partial "$T/nodir/q.mge"
    [ ! -e "$T/nodir" ]
}

@test "a failure leaves an existing output file untouched" {
    echo keep > "$T/out.mge"
    npys "$T/bad.npy" f32:4x3x32x32:rand
    run "$MGE_QUANT" "$M" --calib "$T/bad.npy" -o "$T/out.mge"
    assert_failure 1
    [ "$(cat "$T/out.mge")" = keep ]
    [ -z "$(ls "$T" | grep -v -e '^out.mge$' -e '^bad.npy$')" ]
}

@test "mge-quant refuses to write the binary model to a terminal without -f" {
    command -v script > /dev/null || skip "script(1) not installed"
    run script -qec "'$MGE_QUANT' '$M' --calib '$FM/t10k' --batches 1" /dev/null
    assert_failure 1
    assert_output --partial "terminal"
}

# ---------------------------------------------------------------- the -O2 pipeline

@test "mge-opt -O2 | mge-quant | mge-run" {
    "$MGE_OPT" --list-passes | grep -q '^unfuse' || skip "the unfuse pass is not registered yet"
    "$MGE_RUN" "$M" --data "$FM/t10k" --batch 1000 -o "$T/f.npy"
    "$MGE_OPT" -O2 "$M" | "$MGE_QUANT" --calib "$FM/t10k" --batches 2 |
        "$MGE_RUN" --data "$FM/t10k" --batch 1000 -o "$T/q.npy"
    run outputs_close "$T/f.npy" "$T/q.npy" 0.05 0.95
    echo "$output"
    assert_success
    # the result is the plain int8 graph: no fused, blocked or Winograd op left
    "$MGE_OPT" -O2 "$M" | "$MGE_QUANT" --calib "$FM/t10k" --batches 2 -o "$T/q2.mge"
    run "$MGE_DUMP" "$T/q2.mge"
    assert_success
    assert_output --partial "qconv2d"
    refute_output --regexp "fused|nchwc|winograd"
}

# ---------------------------------------------------------------- calibration options

@test "--method minmax, percentile and entropy all work and differ" {
    for m in minmax percentile entropy; do
        run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --method "$m" --report "$T/$m.json" -o "$T/$m.mge"
        assert_success
        pyq 'import json
d = json.load(open(sys.argv[1]))
assert d["method"] == sys.argv[2], d["method"]
for o in d["outputs"]:
    assert o["cosine"] > 0.99, o' "$T/$m.json" "$m"
    done
    # the default is percentile
    cmp "$T/percentile.mge" "$Q"
    run ! cmp -s "$T/minmax.mge" "$T/entropy.mge"
    run ! cmp -s "$T/minmax.mge" "$T/percentile.mge"
}

@test "--percentile changes the ranges and is reported" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --percentile 99 --report "$T/r.json" -o "$T/p99.mge"
    assert_success
    run ! cmp -s "$T/p99.mge" "$Q"
    pyq 'import json
d = json.load(open(sys.argv[1]))
assert d["method"] == "percentile" and d["percentile"] == 99, d' "$T/r.json"
    # clipping at the 99th percentile narrows the scale of the first layer
    "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --method minmax --report "$T/mm.json" -o /dev/null
    pyq 'import json
p = {n["name"]: n for n in json.load(open(sys.argv[1]))["nodes"]}
m = {n["name"]: n for n in json.load(open(sys.argv[2]))["nodes"]}
assert p["relu1"]["scale"] < m["relu1"]["scale"], (p["relu1"], m["relu1"])' "$T/r.json" "$T/mm.json"
}

@test "--per-tensor: one weight scale per tensor" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --per-tensor --report "$T/t.json" -o "$T/t.mge"
    assert_success
    "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --report "$T/c.json" -o /dev/null
    pyq 'import json
t = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
assert t["per_tensor"] is True and c["per_tensor"] is False
layers = lambda d: [n for n in d["nodes"] if n["op"] in ("qconv2d", "qlinear")]
assert len(layers(t)) == 4 and len(layers(c)) == 4
for n in layers(t):
    assert n["weight_scale_min"] == n["weight_scale_max"], n
for n in layers(c):
    assert n["weight_scale_min"] < n["weight_scale_max"], n' "$T/t.json" "$T/c.json"
    # 1 scale instead of 32 + 64 + 128 + 10 (4 bytes each, in weight and bias)
    [ "$(size "$T/t.mge")" -lt "$(size "$Q")" ]
    "$MGE_RUN" "$T/t.mge" --data "$FM/t10k" --batch 1000 -o "$T/y.npy"
}

@test "--batches and --batch-size choose what calibrates" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batch-size 10 --batches 3 --report "$T/a.json" -o "$T/a.mge"
    assert_success
    # t10k holds 1000 images: all of them in 2 batches of 500
    "$MGE_QUANT" "$M" --calib "$FM/t10k" --batch-size 500 --report "$T/b.json" -o "$T/b.mge"
    pyq 'import json
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
assert (a["batches"], a["samples"]) == (3, 30), a
assert (b["batches"], b["samples"]) == (2, 1000), b' "$T/a.json" "$T/b.json"
    run ! cmp -s "$T/a.mge" "$T/b.mge"
    # the default batch size is 32
    "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --batch-size 32 -o "$T/c.mge"
    cmp "$T/c.mge" "$Q"
}

@test "--normalize feeds (x/255 - M) / S to calibration" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --method minmax --normalize 0.5,0.25 -o "$T/n.mge"
    assert_success
    # u8 images become [-2, 2]: the input's scale is 4/255, zero 0 or -1
    run "$MGE_DUMP" --json "$T/n.mge"
    pyq 'import json
d = json.loads(sys.argv[1])
xq = [n for n in d["nodes"] if n["op"] == "quantize" and n["inputs"] == ["x"]][0]
assert abs(xq["scale"] - 4 / 255) < 1e-4 and xq["zero"] in (0, -1), xq' "$output"
    "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --method minmax -o "$T/p.mge"
    run "$MGE_DUMP" --json "$T/p.mge"
    pyq 'import json
d = json.loads(sys.argv[1])
xq = [n for n in d["nodes"] if n["op"] == "quantize" and n["inputs"] == ["x"]][0]
assert abs(xq["scale"] - 1 / 255) < 1e-6 and xq["zero"] == -128, xq' "$output"
}

@test "--skip keeps the named nodes in f32" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --skip conv2,fc2 -v -o "$T/s.mge"
    assert_success
    assert_output --partial "conv2: conv2d stays f32 (--skip)"
    assert_output --partial "fc2: linear stays f32 (--skip)"
    run "$MGE_DUMP" "$T/s.mge"
    assert_success
    assert_output --regexp "# conv2 +conv2d +f32\["
    assert_output --regexp "# fc2 +linear +f32\["
    # conv1 and fc1 are still int8, with dequantize/quantize around conv2
    assert_output --regexp "# relu1 +qconv2d"
    assert_output --regexp "# act1 +qlinear"
    assert_output --regexp " dequantize "
    "$MGE_RUN" "$T/s.mge" --data "$FM/t10k" --batch 1000 -o "$T/y.npy"
}

@test "--report writes JSON with the documented fields" {
    run --separate-stderr "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --report "$T/r.json" -o "$T/q.mge"
    assert_success
    [ -z "$stderr" ]
    # the report does not change the model
    cmp "$T/q.mge" "$Q"
    pyq 'import json
d = json.load(open(sys.argv[1]))
for k in ("method", "percentile", "per_tensor", "batches", "samples", "size_f32", "size_int8", "nodes", "outputs"):
    assert k in d, k
assert d["method"] == "percentile" and d["percentile"] == 99.99 and d["per_tensor"] is False
assert d["batches"] == 2 and d["samples"] == 64, d
assert 0 < d["size_int8"] < 0.3 * d["size_f32"], d
names = [n["name"] for n in d["nodes"]]
assert len(names) >= 4, names
for n in d["nodes"]:
    for k in ("name", "op", "value", "scale", "zero", "sqnr_db", "cosine"):
        assert k in n, (k, n)
    assert n["scale"] > 0 and -128 <= n["zero"] <= 127, n
    assert n["sqnr_db"] is None or n["sqnr_db"] > 20, n
    assert 0.99 < n["cosine"] <= 1.000001, n
    if n["op"] in ("qconv2d", "qlinear"):
        assert 0 < n["weight_scale_min"] <= n["weight_scale_max"], n
    else:
        assert "weight_scale_min" not in n, n
assert [o["name"] for o in d["outputs"]] == ["fc2"], d["outputs"]
assert d["outputs"][0]["sqnr_db"] > 20 and d["outputs"][0]["cosine"] > 0.99, d["outputs"]' "$T/r.json"
}

@test "-v prints the decisions, the per-node table and the sizes" {
    run --separate-stderr "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 -v -o "$T/q.mge"
    assert_success
    [ -z "$output" ]
    output=$stderr
    assert_output --partial "note: calibrated on 64 samples in 2 batches"
    assert_output --partial "quantize x -> x.q"
    assert_output --partial "dequantize fc2.q -> fc2 (model output)"
    assert_output --regexp "node +op +scale +zero +weight scales +SQNR dB +cosine"
    assert_output --regexp "relu1 +qconv2d +[0-9.e-]+ +-128 +[0-9.e-]+\.\.[0-9.e-]+ +[0-9.]+ +0\.9"
    assert_output --regexp "output fc2 +[0-9.]+ +0\.9"
    assert_output --regexp "size: [0-9]+ bytes f32 -> [0-9]+ bytes int8 \(0\.[0-2][0-9]*x\)"
    cmp "$T/q.mge" "$Q"
    # without -v nothing is said
    run --separate-stderr "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 -o "$T/q2.mge"
    assert_success
    [ -z "$stderr" ]
}

@test "--int8-outputs keeps the output in qs8" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 2 --int8-outputs -o "$T/o.mge"
    assert_success
    run "$MGE_DUMP" "$T/o.mge"
    assert_output --partial "# outputs: fc2 qs8[N,10]"
    refute_output --regexp " dequantize "
    # mge-run writes it as i8; dequantized it is the default model's output
    "$MGE_RUN" "$T/o.mge" --data "$FM/t10k" --batch 1000 -o "$T/o.npy"
    "$MGE_RUN" "$Q" --data "$FM/t10k" --batch 1000 -o "$T/f.npy"
    run npy_show "$T/o.npy"
    assert_output --regexp "^i8 1000x10 "
    run "$MGE_DUMP" --json "$Q"
    py 'import json
d = json.loads(sys.argv[3])
dq = [n for n in d["nodes"] if n["op"] == "dequantize"][0]
q = np.load(sys.argv[1]).astype(np.float64)
f = np.load(sys.argv[2]).astype(np.float64)
assert np.allclose((q - dq["zero"]) * dq["scale"], f, rtol=1e-6, atol=1e-7)' "$T/o.npy" "$T/f.npy" "$output"
}

@test "a residual add, pools, concat and flatten run in int8" {
    cat > "$T/res.mgt" <<'NET'
input x : f32[N,3,8,8]
c1 = conv2d(x, out=4, kernel=3, pad=1)
r1 = relu(c1)
c2 = conv2d(r1, out=4, kernel=3, pad=1)
s = add(c2, r1)
r2 = relu(s)
a = avgpool2d(r2, kernel=2)
b = maxpool2d(r2, kernel=2)
cat = concat(a, b, axis=1)
p = global_avgpool(cat)
f = flatten(p)
padded = avgpool2d(r2, kernel=3, stride=1, pad=1)
fc = linear(f, out=3)
output fc, padded
NET
    "$MGE_OPT" "$T/res.mgt" -o "$T/res.mge"
    npys "$T/x.npy" f32:64x3x8x8:rand
    run "$MGE_QUANT" "$T/res.mge" --calib "$T/x.npy" --report "$T/r.json" -o "$T/res8.mge"
    assert_success
    run "$MGE_DUMP" "$T/res8.mge"
    assert_success
    # the relu after the add folds into it
    assert_output --regexp "# r2 +qadd +qs8\[1,4,8,8\]"
    assert_output --regexp "# a +avgpool2d +qs8\[1,4,4,4\]"
    assert_output --regexp "# b +maxpool2d +qs8\[1,4,4,4\]"
    assert_output --regexp "# cat +concat +qs8\[1,8,4,4\]"
    assert_output --regexp "# p +global_avgpool +qs8\[1,8,1,1\]"
    assert_output --regexp "# f +flatten +qs8\[1,8\]"
    refute_output --regexp "# s +add "
    # an average that counts padding stays f32
    assert_output --regexp "# padded +avgpool2d +f32\[1,4,8,8\]"
    assert_output --partial "# outputs: fc f32[N,3], padded f32[N,4,8,8]"
    pyq 'import json
d = json.load(open(sys.argv[1]))
ops = {n["name"]: n["op"] for n in d["nodes"]}
assert ops.get("r2") == "qadd", ops
for o in d["outputs"]:
    assert o["cosine"] > 0.99, o' "$T/r.json"
}

@test "a model with nothing to quantize warns and still writes it" {
    write_two
    "$MGE_OPT" "$T/two.mgt" -o "$T/two.mge"
    npys "$T/ab.npy" f32:8x3:rand f32:8x3:rand
    run --separate-stderr "$MGE_QUANT" "$T/two.mge" --calib "$T/ab.npy" -o "$T/two8.mge"
    assert_success
    [[ "$stderr" == *"two.mge: warning: no node was quantized"* ]]
    run "$MGE_DUMP" "$T/two8.mge"
    refute_output --partial "quantize"
    # -q silences the warning
    run --separate-stderr "$MGE_QUANT" -q "$T/two.mge" --calib "$T/ab.npy" -o "$T/two8.mge"
    assert_success
    [ -z "$stderr" ]
}

# ---------------------------------------------------------------- --dtype f16 / bf16

@test "--dtype f16 stores the weights as f16 without calibration" {
    run "$MGE_QUANT" --dtype f16 "$M" -o "$T/h.mge"
    assert_success
    run "$MGE_DUMP" "$T/h.mge"
    assert_output --regexp "# by dtype: .*f16 [0-9]+ bytes"
    refute_output --partial "qs8"
    [ "$(size "$T/h.mge")" -lt "$(( $(size "$M") * 6 / 10 ))" ]
    "$MGE_RUN" "$M" --data "$FM/t10k" --batch 1000 -o "$T/f.npy"
    "$MGE_RUN" "$T/h.mge" --data "$FM/t10k" --batch 1000 -o "$T/h.npy"
    run outputs_close "$T/f.npy" "$T/h.npy" 0.01 0.98
    echo "$output"
    assert_success
    # the inference model (batch norm folded, loss kept), weights as f16
    run "$MGE_DUMP" "$T/h.mge"
    refute_output --partial "batchnorm"
    assert_output --partial "= cross_entropy("
    run "$MGE_RUN" "$T/h.mge" --data "$FM/t10k" --accuracy
    assert_success
    assert_output --partial "accuracy"
}

@test "--dtype bf16 stores the weights as bf16" {
    run "$MGE_QUANT" --dtype bf16 "$M" -o "$T/b.mge"
    assert_success
    run "$MGE_DUMP" "$T/b.mge"
    assert_output --regexp "# by dtype: .*bf16 [0-9]+ bytes"
    "$MGE_RUN" "$M" --data "$FM/t10k" --batch 1000 -o "$T/f.npy"
    "$MGE_RUN" "$T/b.mge" --data "$FM/t10k" --batch 1000 -o "$T/b.npy"
    run outputs_close "$T/f.npy" "$T/b.npy" 0.05 0.95
    echo "$output"
    assert_success
}

@test "--dtype: int8-only options and unknown types are usage errors" {
    for extra in "--calib x.npy" "--method minmax" "--percentile 99" "--skip fc2" "--report r.json" "--per-tensor" \
        "--batches 2" "--batch-size 8" "--normalize 0.5,0.5" "--int8-outputs"; do
        run "$MGE_QUANT" --dtype f16 $extra "$M" -o "$T/h.mge"
        assert_failure 2
        assert_output --partial "${extra%% *} applies to int8 only: --dtype f16 stores the weights"
    done
    run "$MGE_QUANT" --dtype f32 "$M"
    assert_failure 2
    assert_output --partial "--dtype f32: expected int8, f16 or bf16"
    [ ! -e "$T/h.mge" ]
    # --dtype int8 is the default
    "$MGE_QUANT" --dtype int8 "$M" --calib "$FM/t10k" --batches 2 -o "$T/q.mge"
    cmp "$T/q.mge" "$Q"
}

@test "--dtype bf16 converts an -O3 model's f16 weights, and says so with -v" {
    "$MGE_OPT" -O3 "$M" -o "$T/o3.mge"
    run "$MGE_DUMP" "$T/o3.mge"
    assert_output --regexp "# by dtype: f16 [0-9]+ bytes"
    run --separate-stderr "$MGE_QUANT" --dtype bf16 -v "$T/o3.mge" -o "$T/b.mge"
    assert_success
    [[ "$stderr" == *"o3.mge: note: "*" f16 weights converted to bf16"* ]] || { echo "$stderr"; return 1; }
    run "$MGE_DUMP" "$T/b.mge"
    assert_output --regexp "# by dtype: bf16 [0-9]+ bytes"
    refute_output --regexp "param .* : f16\["
    "$MGE_RUN" "$M" --data "$FM/t10k" --batch 1000 -o "$T/f.npy"
    "$MGE_RUN" "$T/b.mge" --data "$FM/t10k" --batch 1000 -o "$T/b.npy"
    run outputs_close "$T/f.npy" "$T/b.npy" 0.05 0.95
    echo "$output"
    assert_success
    # and back: bf16 weights to f16
    run --separate-stderr "$MGE_QUANT" --dtype f16 -v "$T/b.mge" -o "$T/h.mge"
    assert_success
    [[ "$stderr" == *"note: "*" bf16 weights converted to f16"* ]] || { echo "$stderr"; return 1; }
    run "$MGE_DUMP" "$T/h.mge"
    assert_output --regexp "# by dtype: f16 [0-9]+ bytes"
}

@test "--dtype with nothing to convert warns and writes the model" {
    "$MGE_OPT" -O3 "$M" -o "$T/o3.mge"
    run --separate-stderr "$MGE_QUANT" --dtype f16 "$T/o3.mge" -o "$T/h.mge"
    assert_success
    [[ "$stderr" == *"o3.mge: warning: --dtype f16: nothing to convert: the weights are already f16"* ]] || {
        echo "$stderr"; return 1; }
    run "$MGE_DUMP" "$T/h.mge"
    assert_output --regexp "# by dtype: f16 [0-9]+ bytes"
    printf 'input x : f32[N,4]\ny = relu(x)\noutput y\n' > "$T/relu.mgt"
    run --separate-stderr "$MGE_QUANT" --dtype bf16 "$T/relu.mgt" -o "$T/r.mge"
    assert_success
    [[ "$stderr" == *"relu.mgt: warning: --dtype bf16: nothing to convert: no conv2d or linear weight"* ]] || {
        echo "$stderr"; return 1; }
    [ -s "$T/r.mge" ]
    # an int8 model is refused, as for int8
    run --separate-stderr "$MGE_QUANT" --dtype f16 "$Q" -o "$T/x.mge"
    assert_failure 1
    [[ "$stderr" == *"already quantized"* ]]
    [ ! -e "$T/x.mge" ]
}

@test "int8 options that cannot apply to the model or data warn" {
    write_mlp
    "$MGE_OPT" "$T/mlp.mgt" -o "$T/mlp.mge"
    npys "$T/x.npy" f32:16x4:rand
    # float data: --normalize is for u8 images; 16 samples are 1 batch of 32
    run --separate-stderr "$MGE_QUANT" "$T/mlp.mge" --calib "$T/x.npy" --normalize 0.5,0.5 --batches 5 -o "$T/q.mge"
    assert_success
    [[ "$stderr" == *"x.npy: warning: --normalize has no effect: the calibration data has no u8 images"* ]] || {
        echo "$stderr"; return 1; }
    [[ "$stderr" == *"x.npy: warning: --batches 5: the data has only 1 batch (16 samples at --batch-size 32), all used"* ]] || {
        echo "$stderr"; return 1; }
    # every layer skipped: --per-tensor and --int8-outputs have nothing to act on
    run --separate-stderr "$MGE_QUANT" "$T/mlp.mge" --calib "$T/x.npy" --skip fc1,fc2 --per-tensor --int8-outputs \
        -o "$T/q.mge"
    assert_success
    [[ "$stderr" == *"warning: --per-tensor has no effect: no conv2d or linear weight was quantized"* ]] || {
        echo "$stderr"; return 1; }
    [[ "$stderr" == *"warning: --int8-outputs has no effect: no model output is written by an int8 node"* ]] || {
        echo "$stderr"; return 1; }
    # nothing a quantizer could act on: said once, up front
    printf 'input x : f32[N,4]\ny = relu(x)\noutput y\n' > "$T/relu.mgt"
    run --separate-stderr "$MGE_QUANT" "$T/relu.mgt" --calib "$T/x.npy" -o "$T/r.mge"
    assert_success
    [[ "$stderr" == *"relu.mgt: warning: nothing to quantize: the model has no conv2d, linear or add"* ]] || {
        echo "$stderr"; return 1; }
    [ "$(grep -c warning <<< "$stderr")" -eq 1 ]
    # -q silences them
    run --separate-stderr "$MGE_QUANT" -q "$T/mlp.mge" --calib "$T/x.npy" --normalize 0.5,0.5 -o "$T/q.mge"
    assert_success
    [ -z "$stderr" ]
}

# ---------------------------------------------------------------- usage errors (2)

@test "usage: no --calib" {
    run "$MGE_QUANT" "$M" -o "$T/q.mge"
    assert_failure 2
    assert_output --partial "no calibration data: give --calib DATA"
    assert_output --partial "Try 'mge-quant --help'"
    [ ! -e "$T/q.mge" ]
}

@test "usage: unknown --method" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --method kl
    assert_failure 2
    assert_output --partial "--method kl: expected minmax, percentile or entropy"
}

@test "usage: bad --percentile" {
    for p in abc 50 40 100.5 -1 nan; do
        run "$MGE_QUANT" "$M" --calib "$FM/t10k" --percentile "$p"
        assert_failure 2
        assert_output --partial "--percentile"
    done
    # 100 is allowed
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 1 --percentile 100 -o "$T/q.mge"
    assert_success
}

@test "usage: --percentile without --method percentile" {
    for m in minmax entropy; do
        run "$MGE_QUANT" "$M" --calib "$FM/t10k" --method "$m" --percentile 99.9
        assert_failure 2
        assert_output --partial "--percentile only applies to --method percentile"
    done
}

@test "usage: --skip with an empty name, or given twice" {
    for s in "" "," "a," ",a" "a,,b"; do
        run "$MGE_QUANT" "$M" --calib "$FM/t10k" --skip "$s"
        assert_failure 2
        assert_output --partial "--skip: empty node name in '$s'"
    done
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --skip fc1 --skip fc2
    assert_failure 2
    assert_output --partial "--skip given twice"
}

@test "usage: the model and --calib both on stdin" {
    run "$MGE_QUANT" --calib - < "$M"
    assert_failure 2
    assert_output --partial "the model and --calib cannot both be standard input"
    run "$MGE_QUANT" - --calib - < "$M"
    assert_failure 2
}

@test "usage: bad numbers, unknown options, two models, --report equal to -o" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 0
    assert_failure 2
    assert_output --partial "--batches"
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batch-size x
    assert_failure 2
    assert_output --partial "--batch-size"
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --normalize 0.5,0
    assert_failure 2
    assert_output --partial "standard deviation must be positive"
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --normalize 0.5
    assert_failure 2
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --threads 0
    assert_failure 2
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --bogus
    assert_failure 2
    assert_output --partial "--bogus"
    run "$MGE_QUANT" "$M" --calib
    assert_failure 2
    run "$MGE_QUANT" "$M" "$M" --calib "$FM/t10k"
    assert_failure 2
    assert_output --partial "too many arguments"
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --report "$T/x.mge" -o "$T/x.mge"
    assert_failure 2
    assert_output --partial "--report and -o name the same file"
    [ ! -e "$T/x.mge" ]
}

@test "--device cuda fails clearly in a CPU build" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --device cuda -o "$T/q.mge"
    assert_failure
    assert_output --partial "cuda"
    [ ! -e "$T/q.mge" ]
}

# ---------------------------------------------------------------- failures (1)

@test "error: calibration data whose shape does not fit" {
    npys "$T/bad.npy" f32:4x3x32x32:rand
    run "$MGE_QUANT" "$M" --calib "$T/bad.npy" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/bad.npy: error:"
    assert_output --partial "f32[4,3,32,32]: does not fit input 'x' f32[N,1,28,28]"
    [ ! -e "$T/q.mge" ]
}

@test "error: calibration data whose dtype does not fit" {
    # float data for an integer input
    cat > "$T/ci.mgt" <<'NET'
input x : i32[N,4]
y = cast(x, dtype=f32)
fc = linear(y, out=3)
output fc
NET
    "$MGE_OPT" "$T/ci.mgt" -o "$T/ci.mge"
    npys "$T/f.npy" f32:8x4:rand
    run "$MGE_QUANT" "$T/ci.mge" --calib "$T/f.npy" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/f.npy: error:"
    assert_output --partial "cannot convert f32 data to input 'x' i32[N,4]"
    [ ! -e "$T/q.mge" ]
    # integer data for it is fine, and the linear layer after the cast is int8
    npys "$T/i.npy" i32:8x4:arange
    run "$MGE_QUANT" "$T/ci.mge" --calib "$T/i.npy" -o "$T/q.mge"
    assert_success
    run "$MGE_DUMP" "$T/q.mge"
    assert_output --partial "qlinear"
    # a dtype NPY cannot bring at all
    need_numpy
    py 'np.save(sys.argv[1], np.zeros((4, 1, 28, 28), np.complex64))' "$T/c8.npy"
    run "$MGE_QUANT" "$M" --calib "$T/c8.npy" -o "$T/q8.mge"
    assert_failure 1
    assert_output --partial "$T/c8.npy"
    assert_output --partial "complex64"
    [ ! -e "$T/q8.mge" ]
}

@test "error: an empty calibration set" {
    npys "$T/empty.npy" f32:0x1x28x28:0
    run "$MGE_QUANT" "$M" --calib "$T/empty.npy" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/empty.npy: error:"
    assert_output --partial "empty"
    [ ! -e "$T/q.mge" ]
    : > "$T/zero.npy"
    run "$MGE_QUANT" "$M" --calib "$T/zero.npy" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/zero.npy"
    assert_output --partial "empty"
}

@test "error: calibration data that does not exist" {
    run "$MGE_QUANT" "$M" --calib "$T/nope.npy" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "nope.npy"
    [ ! -e "$T/q.mge" ]
}

@test "error: a model that is already quantized" {
    run "$MGE_QUANT" "$Q" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$Q: error: the model is already quantized"
    assert_output --partial "quantize the f32 model"
    [ ! -e "$T/q.mge" ]
}

@test "error: an unknown --skip node" {
    run "$MGE_QUANT" "$M" --calib "$FM/t10k" --batches 1 --skip conv1,nope -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$M: error: --skip: no node named 'nope' in the model"
    [ ! -e "$T/q.mge" ]
}

@test "error: a model file that does not exist" {
    run "$MGE_QUANT" "$T/nope.mge" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/nope.mge: error:"
    [ ! -e "$T/q.mge" ]
}

@test "error: a corrupt model" {
    head -c 1000 "$M" > "$T/trunc.mge"
    run "$MGE_QUANT" "$T/trunc.mge" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/trunc.mge: error: truncated"
    [ ! -e "$T/q.mge" ]
    echo garbage > "$T/g.mge"
    run "$MGE_QUANT" "$T/g.mge" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/g.mge:1:1: error:"
    run "$MGE_QUANT" "$FM/../../../tests/cli/npy.py" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    npys "$T/x.npy" f32:2x1x28x28:0
    run "$MGE_QUANT" "$T/x.npy" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "NPY tensor stream, not a model"
    : > "$T/empty.mge"
    run "$MGE_QUANT" "$T/empty.mge" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "$T/empty.mge"
    [ ! -e "$T/q.mge" ]
}

@test "error: a text model whose parameters have no values" {
    run "$MGE_QUANT" "$SAMPLES/lenet.mgt" --calib "$FM/t10k" -o "$T/q.mge"
    assert_failure 1
    assert_output --partial "lenet.mgt: error: parameter 'conv1.weight' has no value"
    assert_output --partial "quantize a trained model"
    [ ! -e "$T/q.mge" ]
    # on stdin too, for --dtype as well
    run "$MGE_QUANT" --dtype f16 < "$SAMPLES/lenet.mgt"
    assert_failure 1
    assert_output --partial "<stdin>: error: parameter 'conv1.weight' has no value"
}
