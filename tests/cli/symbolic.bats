#!/usr/bin/env bats
# Symbolic dimensions from the command line: any input dim may be a named
# symbol, records of any fitting shape run in one stream, the tools take
# --shape for every symbol, and mismatches name the symbol and both values.

bats_require_minimum_version 1.5.0
load helper

setup() {
    sed 's/^input x : f32\[N,3,224,224\]/input x : f32[N,3,H,W]/' "$SAMPLES/resnet18.mgt" > "$T/r18.mgt"
    grep -q 'f32\[N,3,H,W\]' "$T/r18.mgt"
}

@test "resnet18 with symbolic H and W runs 160, 224 and 320 in one stream, as the static models do" {
    need_numpy
    "$MGE_OPT" "$T/r18.mgt" -o "$T/r18.mge"
    py '
f = open(sys.argv[1], "wb")
rng = np.random.default_rng(0)
for s in (160, 224, 320, 224):
    np.save(f, rng.standard_normal((1, 3, s, s)).astype(np.float32))' "$T/x.npy"
    "$MGE_RUN" "$T/r18.mge" < "$T/x.npy" > "$T/y.npy"
    # each size against the static model of that size (same weights: same seed)
    for s in 160 224 320; do
        sed "s/^input x : f32\[N,3,224,224\]/input x : f32[N,3,$s,$s]/" "$SAMPLES/resnet18.mgt" > "$T/r$s.mgt"
        "$MGE_OPT" "$T/r$s.mgt" -o "$T/r$s.mge"
    done
    py '
f = open(sys.argv[1], "rb")
xs = [np.load(f) for _ in range(4)]
f = open(sys.argv[2], "rb")
ys = [np.load(f) for _ in range(4)]
assert all(y.shape == (1, 1000) for y in ys), [y.shape for y in ys]
for i, x in enumerate(xs):
    s = x.shape[2]
    np.save(sys.argv[3] + "/x%d.npy" % i, x)
    np.save(sys.argv[3] + "/y%d.npy" % i, ys[i])
' "$T/x.npy" "$T/y.npy" "$T"
    for i in 0 1 2 3; do
        s=$(py 'print(np.load(sys.argv[1]).shape[2])' "$T/x$i.npy")
        "$MGE_RUN" "$T/r$s.mge" < "$T/x$i.npy" > "$T/ys$i.npy"
        py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2]); assert np.array_equal(a, b), abs(a - b).max()' \
            "$T/y$i.npy" "$T/ys$i.npy"
    done
}

@test "mge-dump prints symbolic shapes, and concrete ones with --shape" {
    run --separate-stderr "$MGE_DUMP" "$T/r18.mgt"
    assert_success
    [[ "$output" == *"input x : f32[N,3,H,W]"* ]]
    [[ "$output" == *"f32[N,64,(H+1)/2,(W+1)/2]"* ]]
    [[ "$output" == *"f32[N,512,(H+31)/32,(W+31)/32]"* ]]   # layer4: one division by 32
    [[ "$output" == *"memory plan: unavailable (no value for the symbol H"* ]]
    run --separate-stderr "$MGE_DUMP" "$T/r18.mgt" --shape x=2x3x320x320
    assert_success
    [[ "$output" == *"summary (N=2,H=320,W=320)"* ]]
    [[ "$output" == *"f32[2,64,160,160]"* ]]
    [[ "$output" == *"memory plan (N=2,H=320,W=320): arena"* ]]
    "$MGE_DUMP" --json "$T/r18.mgt" --shape x=1x3x160x160 > "$T/d.json"
    pyq 'import json; d = json.load(open(sys.argv[1])); assert d["binding"] == {"N": 1, "H": 160, "W": 160}, d["binding"]' "$T/d.json"
}

@test "the symbols survive the .mge format and -O2; the passes optimize for --shape" {
    "$MGE_OPT" -O2 "$T/r18.mgt" --shape x=1x3x224x224 -o "$T/o2.mge"
    run --separate-stderr "$MGE_DUMP" "$T/o2.mge"
    assert_success
    [[ "$output" == *"input x : f32[N,3,H,W]"* ]]
    [[ "$output" == *"opt.shape"*"N=1,H=224,W=224"* ]]
    need_numpy
    npys "$T/a.npy" f32:1x3x96x128:rand
    "$MGE_RUN" "$T/r18.mgt" < "$T/a.npy" > "$T/ya.npy"
    "$MGE_RUN" "$T/o2.mge" < "$T/a.npy" > "$T/yb.npy"
    py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2]); assert np.allclose(a, b, rtol=1e-3, atol=1e-3), abs(a - b).max()' \
        "$T/ya.npy" "$T/yb.npy"
}

@test "records that do not fit name the symbol and both values" {
    need_numpy
    cat > "$T/m.mgt" <<'NET'
input x : f32[N,S,4]
input mask : f32[N,S,4]
y = mul(x, mask)
output y
NET
    npys "$T/ok.npy" f32:2x5x4:rand f32:2x5x4:rand f32:1x7x4:rand f32:1x7x4:rand
    "$MGE_RUN" "$T/m.mgt" < "$T/ok.npy" > "$T/y.npy"
    npys "$T/bad.npy" f32:2x5x4:rand f32:2x6x4:rand
    run --separate-stderr "$MGE_RUN" "$T/m.mgt" < "$T/bad.npy"
    assert_failure 1
    [[ "$stderr" == *"S is 5 from x but 6 from mask"* ]]
    npys "$T/rank.npy" f32:2x5:rand f32:2x5:rand
    run --separate-stderr "$MGE_RUN" "$T/m.mgt" < "$T/rank.npy"
    assert_failure 1
    [[ "$stderr" == *"input 'x': expected f32[N,S,4], got f32[2,5]"* ]]
}

@test "mge-bench and mge-prof take --shape for every symbol and say which one is missing" {
    run --separate-stderr "$MGE_BIN/mge-bench" "$T/r18.mgt" --iters 1 --warmup 0
    assert_failure 1
    [[ "$stderr" == *"give H a value with --shape x=DIMS"* ]]
    "$MGE_BIN/mge-bench" "$T/r18.mgt" --shape x=1x3x64x80 --iters 1 --warmup 0 --json > "$T/b.json"
    "$MGE_BIN/mge-prof" "$T/r18.mgt" --shape x=1x3x64x80 --iters 1 > "$T/p.txt"
    grep -q "conv2d" "$T/p.txt"
}

@test "symbols are refused where shapes are fixed, and bad symbol names are errors" {
    printf 'param w : f32[H,3]\n' > "$T/p.mgt"
    run --separate-stderr "$MGE_DUMP" "$T/p.mgt"
    assert_failure 1
    [[ "$stderr" == *"only inputs may have symbolic dimensions"* ]]
    printf 'input x : f32[N,F]\ny = linear(x, out=4)\noutput y\n' > "$T/l.mgt"
    run --separate-stderr "$MGE_DUMP" "$T/l.mgt"
    assert_failure 1
    [[ "$stderr" == *"y.weight: the parameter's shape would depend on a symbolic dim"* ]]
}

@test "mge-train trains on variable-length sequences: batches cut to their longest sample" {
    need_numpy
    cat > "$T/seq.mgt" <<'NET'
input x : f32[N,S,4]
input label : i32[N]
h = linear(x, out=8)
r = relu(h)
m = mean(r, axis=1)
fc = linear(m, out=3)
loss = cross_entropy(fc, label)
output fc
minimize loss
NET
    py '
rng = np.random.default_rng(0); n = 240; S = 12
L = rng.integers(2, S + 1, n); x = np.zeros((n, S, 4), np.float32)
lab = rng.integers(0, 3, n).astype(np.int32)
for i in range(n):
    x[i, :L[i]] = rng.standard_normal((L[i], 4)) + lab[i]
np.savez(sys.argv[1], x=x, label=lab, lengths=L)
L[5] = 13
np.savez(sys.argv[2], x=x, label=lab, lengths=L)' "$T/seq.npz" "$T/bad.npz"
    "$MGE_BIN/mge-train" "$T/seq.mgt" --data "$T/seq.npz" --batch 16 --epochs 6 --lr 0.05 -o "$T/seq.mge" \
        --log "$T/log.jsonl"
    pyq '
import json
ep = [json.loads(l) for l in open(sys.argv[1]) if "\"epoch\",\"epoch\"" in l or "\"kind\":\"epoch\"" in l]
assert ep[-1]["loss"] < 0.8 * ep[0]["loss"], (ep[0]["loss"], ep[-1]["loss"])' "$T/log.jsonl"
    # the trained model takes sequences of any length
    npys "$T/q.npy" f32:2x3x4:rand f32:1x9x4:rand
    "$MGE_RUN" "$T/seq.mge" < "$T/q.npy" > /dev/null
    run --separate-stderr "$MGE_BIN/mge-train" "$T/seq.mgt" --data "$T/bad.npz" --batch 16 -o "$T/b.mge"
    assert_failure 1
    [[ "$stderr" == *"lengths[5] is 13: must be 1 to 12"* ]]
}

@test "--plan-cache bounds the plans; 0 or an absurd bound is a usage error" {
    need_numpy
    npys "$T/x.npy" f32:1x3x40x40:rand f32:1x3x48x48:rand f32:1x3x40x40:rand
    "$MGE_RUN" --plan-cache 1 "$T/r18.mgt" < "$T/x.npy" > "$T/y1.npy"
    "$MGE_RUN" "$T/r18.mgt" < "$T/x.npy" > "$T/y2.npy"
    cmp "$T/y1.npy" "$T/y2.npy"
    for bad in 0 4097 -3 x; do
        run --separate-stderr "$MGE_RUN" --plan-cache "$bad" "$T/r18.mgt"
        assert_failure 2
        [[ "$stderr" == *"--plan-cache"* ]]
    done
}

@test "mge-bench: one row per shape set of a symbolic model, and -v counts plan-cache hits and misses" {
    "$MGE_BIN/mge-bench" -v "$T/r18.mgt" --shape x=1x3x64x64 --shape x=1x3x96x80 --iters 2 --warmup 1 --threads 1 \
        --json -o "$T/b.json" 2> "$T/err"
    pyq 'import json; d = json.load(open(sys.argv[1])); r = d["results"]
assert len(r) == 2, len(r)
assert [x["shapes"] for x in r] == ["x=1x3x64x64", "x=1x3x96x80"], [x["shapes"] for x in r]' "$T/b.json"
    grep -Eq "row 1: plan cache [0-9]+ hits, 1 misses, 1 of 16 plans held" "$T/err"
    grep -Eq "row 2: plan cache [0-9]+ hits, 1 misses" "$T/err"
}

@test "mge-dump: --batch lists and several --shape sets give one plan row each" {
    run --separate-stderr "$MGE_DUMP" "$T/r18.mgt" --shape x=1x3x160x160 --shape x=1x3x224x224 --shape x=1x3x320x320
    assert_success
    [[ "$output" == *"plans, one per binding"* ]]
    [[ "$output" == *"# N=1,H=160,W=160  "* && "$output" == *"# N=1,H=320,W=320  "* ]]
    "$MGE_DUMP" --json "$SAMPLES/lenet.mgt" --batch 1,8,32 > "$T/d.json"
    pyq 'import json; d = json.load(open(sys.argv[1])); p = d["plans"]
assert [x["binding"] for x in p] == ["N=1", "N=8", "N=32"], p
assert p[1]["flops_total"] == 8 * p[0]["flops_total"] and p[2]["arena_bytes"] > p[1]["arena_bytes"] > p[0]["arena_bytes"], p' "$T/d.json"
    run --separate-stderr "$MGE_DUMP" "$SAMPLES/lenet.mgt" --batch 1,,8
    assert_failure 2
}

@test "mge-prof: a --batch list or several shape sets add one row per binding" {
    run --separate-stderr "$MGE_BIN/mge-prof" "$T/r18.mgt" --shape x=1x3x64x64 --shape x=1x3x96x96 --iters 2 --threads 1
    assert_success
    [[ "$output" == *"per binding"* && "$output" == *"N=1,H=64,W=64"* && "$output" == *"N=1,H=96,W=96"* ]]
    "$MGE_BIN/mge-prof" "$SAMPLES/lenet.mgt" --batch 1,16 --iters 2 --threads 1 --json > "$T/p.json"
    pyq 'import json; d = json.load(open(sys.argv[1])); b = d["bindings"]
assert [x["binding"] for x in b] == ["N=1", "N=16"], b
assert b[1]["flops"] == 16 * b[0]["flops"] and all(x["ms_per_run"] > 0 for x in b), b' "$T/p.json"
}

@test "-O2 on the symbolic resnet18 makes the static model's choices at its opt.shape (Winograd, blocked layout)" {
    "$MGE_OPT" -O2 "$SAMPLES/resnet18.mgt" -o "$T/static.mge"
    "$MGE_OPT" -O2 "$T/r18.mgt" --shape x=1x3x224x224 -o "$T/sym.mge"
    "$MGE_DUMP" --json "$T/static.mge" > "$T/a.json"
    "$MGE_DUMP" --json "$T/sym.mge" --shape x=1x3x224x224 > "$T/b.json"
    pyq 'import json; a = json.load(open(sys.argv[1]))["op_counts"]; b = json.load(open(sys.argv[2]))["op_counts"]
assert a == b, (a, b)
assert a.get("conv2d_winograd_nchwc", 0) >= 8, a' "$T/a.json" "$T/b.json"
}
