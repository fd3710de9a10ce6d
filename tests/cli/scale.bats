#!/usr/bin/env bats
# Long graphs: each tool on a 100,000-node chain (and mge-opt's folds on
# 100,000 nodes of linear, mul, dropout) finishes and is right. `timeout 60`
# is a hang guard, not a speed test: these runs take seconds; with costs
# that grow with the square of the graph they took minutes.

bats_require_minimum_version 1.5.0

# chain.mge: x f32[N,16] -> linear -> 99,998 relus -> cross_entropy with
# label; in.npy (x), data.npy (x, label) and calib.npy (two batches of x)
# at batch 4.
setup_file() {
    load helper
    local D=$BATS_FILE_TMPDIR
    pyq 'n = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    f.write("input x : f32[N,16]\ninput label : i32[N]\nfc = linear(x, out=16)\n")
    prev = "fc"
    for i in range(n - 2):
        f.write(f"r{i} = relu({prev})\n")
        prev = f"r{i}"
    f.write(f"loss = cross_entropy({prev}, label)\noutput {prev}\nminimize loss\n")' "$D/chain.mgt" 100000
    "$MGE_OPT" -O0 --seed 1 "$D/chain.mgt" -o "$D/chain.mge"
    "$PY" "$BATS_TEST_DIRNAME/npy.py" save "$D/in.npy" f32:4x16:rand
    "$PY" "$BATS_TEST_DIRNAME/npy.py" save "$D/data.npy" f32:4x16:rand i32:4:arange
    "$PY" "$BATS_TEST_DIRNAME/npy.py" save "$D/calib.npy" f32:4x16:rand f32:4x16:arange
}

setup() {
    load helper
    D=$BATS_FILE_TMPDIR
}

jcheck() {
    pyq 'import json
d = json.load(open(sys.argv[1]))
if not eval(sys.argv[2]):
    sys.exit("check failed: " + sys.argv[2])' "$@"
}

@test "mge-opt -O2 on a 100k-node chain gives the same outputs" {
    run timeout 60 "$MGE_OPT" -O2 "$D/chain.mge" -o "$T/o.mge"
    assert_success
    timeout 60 "$MGE_RUN" "$D/chain.mge" --input "$D/in.npy" -o "$T/a.npy"
    timeout 60 "$MGE_RUN" "$T/o.mge" --input "$D/in.npy" -o "$T/b.npy"
    cmp "$T/a.npy" "$T/b.npy"
}

@test "mge-quant on a 100k-node chain: the int8 output follows the f32 one" {
    run timeout 60 "$MGE_BIN/mge-quant" --calib "$D/calib.npy" --batch-size 4 "$D/chain.mge" -o "$T/q.mge" \
        --report "$T/r.json"
    assert_success
    jcheck "$T/r.json" 'd["batches"] == 2 and len(d["outputs"]) == 1 and d["outputs"][0]["cosine"] > 0.99'
    timeout 60 "$MGE_RUN" "$T/q.mge" --input "$D/in.npy" -o "$T/q.npy"
    run "$PY" "$BATS_TEST_DIRNAME/npy.py" show "$T/q.npy"
    assert_output --partial "f32 4x16"
}

@test "mge-train takes a step on a 100k-node chain" {
    run timeout 60 "$MGE_BIN/mge-train" "$D/chain.mge" --data "$D/data.npy" --batch 4 --steps 1 --log "$T/l.jsonl" \
        -o "$T/t.mge"
    assert_success
    pyq 'import json, math
r = [json.loads(l) for l in open(sys.argv[1])]
s = [x for x in r if x["kind"] == "step"]
assert len(s) == 1 and math.isfinite(s[0]["loss"]) and s[0]["loss"] > 0, r' "$T/l.jsonl"
    # the linear layer moved
    timeout 60 "$MGE_RUN" "$D/chain.mge" --input "$D/in.npy" -o "$T/a.npy"
    timeout 60 "$MGE_RUN" "$T/t.mge" --input "$D/in.npy" -o "$T/b.npy"
    ! cmp -s "$T/a.npy" "$T/b.npy"
}

@test "mge-bench --train and mge-prof --train on a 100k-node chain" {
    run timeout 60 "$MGE_BIN/mge-bench" "$D/chain.mge" --train --batch 4 --warmup 1 --iters 2 --json -o "$T/b.json"
    assert_success
    jcheck "$T/b.json" 'd["config"]["train"] and d["results"][0]["runs"] == 2 and d["results"][0]["arena_bytes"] > 0'
    run timeout 60 "$MGE_BIN/mge-bench" "$D/chain.mge" --batch 4 --warmup 1 --iters 2 --json -o "$T/i.json"
    assert_success
    run timeout 60 "$MGE_BIN/mge-prof" "$D/chain.mge" --train --batch 4 --iters 2 --json
    assert_success
    echo "$output" > "$T/p.json"
    # forward, backward and update: about twice the chain, every node profiled
    jcheck "$T/p.json" 'd["train"] and d["nnodes"] > 200000 and len(d["nodes"]) == d["nnodes"]'
}

@test "mge-opt -O2 folds 33k scales and drops 33k dropouts, outputs unchanged" {
    pyq 'n = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    f.write("input x : f32[N,4]\ninput label : i32[N]\nconst c : f32[4] = [0.5, 1, 1.5, 2]\n")
    prev = "x"
    for i in range(n):
        f.write(f"l{i} = linear({prev}, out=4)\nm{i} = mul(l{i}, c)\nd{i} = dropout(m{i}, p=0.1)\n")
        prev = f"d{i}"
    f.write(f"loss = cross_entropy({prev}, label)\noutput {prev}\nminimize loss\n")' "$T/fold.mgt" 33333
    "$MGE_OPT" -O0 --seed 1 "$T/fold.mgt" -o "$T/fold.mge"
    run timeout 60 "$MGE_OPT" -O2 "$T/fold.mge" -o "$T/o.mge" --verify --batch 2
    assert_success
    # the folded graph: linear layers only
    run "$MGE_DUMP" "$T/o.mge"
    refute_output --partial "mul("
    refute_output --partial "dropout("
}
