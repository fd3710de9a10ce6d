#!/usr/bin/env bats
# mge-dump: models (text + summary, JSON, DOT, --params) and tensor streams.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

@test "mge-dump --help and --version" {
    run --separate-stderr "$MGE_DUMP" --help
    assert_success
    assert_output --partial "Usage: mge-dump"
    # it ends with examples, then the exit status
    [[ "$output" == *$'\nExit status: '*$'\n\nExamples:\n  mge-dump '* ]]
    run "$MGE_DUMP" --version
    assert_output "mge-dump (mge) 0.1.0"
}

@test "the model listing parses back as text and ends with a '#' summary" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/conv.mge"
    "$MGE_DUMP" "$T/conv.mge" > "$T/d.mgt"
    grep -q '^# ---- summary (batch 1)' "$T/d.mgt"
    grep -q '^# inputs : x f32\[N,1,8,8\], label i32\[N\]' "$T/d.mgt"
    grep -q '^# outputs: fc f32\[N,5\]' "$T/d.mgt"
    grep -q '^# params:  365 values, 1460 bytes' "$T/d.mgt"
    grep -Eq '^# conv1 +conv2d +f32\[1,4,8,8\] +4864$' "$T/d.mgt"
    grep -q '^# memory plan (batch 1): arena' "$T/d.mgt"
    # everything after the model is a comment, and the listing reassembles
    "$MGE_OPT" -S "$T/d.mgt" > "$T/back.mgt"
    "$MGE_OPT" -S "$T/conv.mge" > "$T/orig.mgt"
    cmp "$T/back.mgt" "$T/orig.mgt"
}

@test "text and .mge inputs and stdin give the same listing" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/conv.mge"
    "$MGE_DUMP" "$T/conv.mgt" > "$T/a"
    "$MGE_DUMP" < "$T/conv.mge" > "$T/b"
    "$MGE_DUMP" - -o "$T/c" < "$T/conv.mgt"
    cmp "$T/a" "$T/b"
    cmp "$T/a" "$T/c"
}

@test "--json has the documented keys and consistent totals" {
    write_conv
    run --separate-stderr "$MGE_DUMP" --json "$T/conv.mgt"
    assert_success
    echo "$output" > "$T/d.json"
    run pyq 'import json
d = json.load(open(sys.argv[1]))
assert d["kind"] == "model"
assert set(d) >= {"inputs", "outputs", "params", "nodes", "flops_total", "batch", "plan", "meta"}, d.keys()
assert d["inputs"][0] == {"name": "x", "dtype": "f32", "shape": ["N", 1, 8, 8]}, d["inputs"]
assert [o["name"] for o in d["outputs"]] == ["fc"]
assert d["params"] == {"count": 365, "bytes": 1460, "by_dtype": {"f32": 1460}}, d["params"]
assert abs(sum(n["flops"] for n in d["nodes"]) - d["flops_total"]) < 1e-6
n = d["nodes"][0]
assert set(n) == {"name", "op", "inputs", "outputs", "shape", "flops"}, n  # int8 nodes add scale, zero
assert n["op"] == "conv2d" and n["inputs"][0] == "x" and n["shape"] == [1, 4, 8, 8]
p = d["plan"]
assert p["lower_bound"] <= p["arena_bytes"] <= p["no_reuse_bytes"], p
print(d["batch"], len(d["nodes"]))' "$T/d.json"
    assert_output "1 7"
}

@test "--json counts the nodes per op (op_counts, nnodes) for model-file checks" {
    write_conv
    "$MGE_DUMP" --json "$T/conv.mgt" > "$T/d.json"
    pyq 'import json
d = json.load(open(sys.argv[1]))
assert d["nnodes"] == len(d["nodes"]) == 7, d["nnodes"]
assert d["op_counts"] == {"conv2d": 1, "relu": 1, "maxpool2d": 1, "sigmoid": 1, "flatten": 1, "linear": 1, "cross_entropy": 1}, d["op_counts"]
# keys in the order the ops first appear
assert list(d["op_counts"]) == ["conv2d", "relu", "maxpool2d", "sigmoid", "flatten", "linear", "cross_entropy"]' "$T/d.json"
    "$MGE_DUMP" --json "$SAMPLES/lenet.mgt" > "$T/l.json"
    pyq 'import json
d = json.load(open(sys.argv[1]))
c = d["op_counts"]
assert c["conv2d"] == 2 and c["relu"] == 3 and c["linear"] == 2 and sum(c.values()) == d["nnodes"] == 13, c' "$T/l.json"
}

@test "--batch and --shape scale shapes, FLOPs and the plan" {
    write_mlp
    "$MGE_DUMP" --json "$T/mlp.mgt" > "$T/b1.json"
    "$MGE_DUMP" --json --batch 4 "$T/mlp.mgt" > "$T/b4.json"
    "$MGE_DUMP" --json --shape x=4x4 "$T/mlp.mgt" > "$T/s4.json"
    cmp "$T/b4.json" "$T/s4.json"
    run pyq 'import json
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
print(b["batch"], b["nodes"][0]["shape"], b["flops_total"] == 4 * a["flops_total"],
      b["plan"]["arena_bytes"] > a["plan"]["arena_bytes"])' "$T/b1.json" "$T/b4.json"
    assert_output "4 [4, 8] True True"
}

@test "--shape that does not fit the input fails" {
    write_mlp
    run "$MGE_DUMP" --shape x=4x5 "$T/mlp.mgt"
    assert_failure 1
    assert_output --partial "f32[N,4]"
    run "$MGE_DUMP" --shape x=4 "$T/mlp.mgt"
    assert_failure 1
    run "$MGE_DUMP" --shape nosuch=4x4 "$T/mlp.mgt"
    assert_failure 1
    assert_output --partial "nosuch"
    run "$MGE_DUMP" --shape x=4x4 --batch 2 "$T/mlp.mgt"
    assert_failure 1
    run "$MGE_DUMP" --shape x=4xq "$T/mlp.mgt"
    assert_failure 2
    run "$MGE_DUMP" --batch 0 "$T/mlp.mgt"
    assert_failure 2
}

@test "--dot writes a Graphviz digraph with every node" {
    write_conv
    run --separate-stderr "$MGE_DUMP" --dot "$T/conv.mgt"
    assert_success
    assert_line --index 0 "digraph model {"
    assert_line --partial '"v:x" -> "n:conv1"'
    assert_line --partial '"n:fc" -> "o:fc"'
    [ "$(grep -c '^  "n:[a-z0-9]*" \[' <<< "$output")" = 7 ]
    [ "${lines[-1]}" = "}" ]
    if command -v dot > /dev/null; then echo "$output" | dot -Tsvg > /dev/null; fi
    run "$MGE_DUMP" --dot --json "$T/conv.mgt"
    assert_failure 2
}

@test "--params exports the parameters by name as .npz" {
    need_numpy
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/conv.mge"
    "$MGE_DUMP" "$T/conv.mge" --params "$T/p.npz" > /dev/null
    run py 'p = np.load(sys.argv[1])
print(sorted((k, p[k].shape) for k in p.files))' "$T/p.npz"
    assert_output "[('conv1.bias', (4,)), ('conv1.weight', (4, 1, 3, 3)), ('fc.bias', (5,)), ('fc.weight', (5, 64))]"
    # the exported values are the model's: binding them back gives the same file
    "$MGE_OPT" "$T/conv.mgt" --weights "$T/p.npz" --seed 99 -o "$T/again.mge"
    cmp "$T/conv.mge" "$T/again.mge"
}

@test "tensor stream statistics match numpy" {
    need_numpy
    npy_records "$T/t.npy" "np.arange(12, dtype=np.float32).reshape(3,4) - 5" "np.array([1, np.nan, np.inf, -np.inf, 2], np.float32)" "np.arange(6, dtype=np.int32)"
    run --separate-stderr "$MGE_DUMP" "$T/t.npy"
    assert_success
    assert_line --index 0 --regexp '^# index +shape +min +max +mean +std +nan +inf$'
    assert_line --index 1 --regexp '^0 +f32\[3,4\] +-5 +6 +0.5 +3.45205 +0 +0$'
    assert_line --index 2 --regexp '^1 +f32\[5\] +1 +2 +1.5 +0.5 +1 +2$'
    assert_line --index 3 --regexp '^2 +i32\[6\] +0 +5 +2.5 +1.70783 +0 +0$'
    run --separate-stderr "$MGE_DUMP" --json "$T/t.npy"
    echo "$output" > "$T/t.json"
    run py 'import json
d = json.load(open(sys.argv[1])); t = d["tensors"]
a = np.arange(12, dtype=np.float32) - 5
assert d["kind"] == "tensors" and len(t) == 3
assert t[0]["shape"] == [3, 4] and t[0]["dtype"] == "f32" and t[0]["name"] is None
assert abs(t[0]["std"] - a.std()) < 1e-5 and t[0]["min"] == -5 and t[0]["max"] == 6
assert t[1]["nan"] == 1 and t[1]["inf"] == 2
print("ok")' "$T/t.json"
    assert_output "ok"
}

@test ".npz tensors are listed by name" {
    need_numpy
    py 'np.savez(sys.argv[1], alpha=np.ones((2,2), np.float32), beta=np.zeros(3, np.int64))' "$T/n.npz"
    run --separate-stderr "$MGE_DUMP" "$T/n.npz"
    assert_success
    assert_line --regexp '^alpha +f32\[2,2\] +1 +1 +1 +0 +0 +0$'
    assert_line --regexp '^beta +i64\[3\] +0 +0 +0 +0 +0 +0$'
    run "$MGE_DUMP" --dot "$T/n.npz"
    assert_failure 2
}

@test "--values prints numpy-like values, summarized past 1000 elements unless -v" {
    npys "$T/v.npy" i32:2x3:arange f32:2000:arange
    run --separate-stderr "$MGE_DUMP" --values "$T/v.npy"
    assert_success
    assert_line "[[0 1 2]"
    assert_line " [3 4 5]]"
    assert_line "[0 1 2 ... 1997 1998 1999]"
    run --separate-stderr "$MGE_DUMP" --values -v "$T/v.npy"
    assert_success
    refute_output --partial "..."
    assert_output --partial " 1000 1001 "
}

@test "a corrupt record in a tensor stream is an error" {
    npys "$T/t.npy" f32:100:1
    head -c 200 "$T/t.npy" > "$T/cut.npy"
    run "$MGE_DUMP" "$T/cut.npy"
    assert_failure 1
    assert_output --partial "mge-dump: $T/cut.npy: error:"
}

@test "the sample lenet dumps with the expected parameter count" {
    [ -f "$SAMPLES/lenet.mgt" ] || skip "samples/nets/lenet.mgt missing"
    run --separate-stderr "$MGE_DUMP" --json "$SAMPLES/lenet.mgt"
    assert_success
    # conv1 320 + conv2 18496 + fc1 401536 + fc2 1290, bn1 4*32+1 + bn2 4*64+1 (num_batches_tracked is i64)
    [[ "$output" == *'"params":{"count":422028,"bytes":1688120,"by_dtype":{"f32":1688104,"i64":16}}'* ]]
}

@test "mge-dump -o writes atomically and text may go to a terminal" {
    write_mlp
    "$MGE_DUMP" "$T/mlp.mgt" -o "$T/out.txt"
    grep -q '^# ---- summary' "$T/out.txt"
    run script -qec "'$MGE_DUMP' '$T/mlp.mgt'" /dev/null
    assert_success
    assert_output --partial "summary"
}

@test "--values on a model and model options on a tensor stream are usage errors" {
    write_mlp
    run "$MGE_DUMP" --values "$T/mlp.mgt"
    assert_failure 2
    npys "$T/t.npy" f32:2:1
    for opt in --dot "--params=$T/p.npz" --batch=2 --shape=x=1x4; do
        run "$MGE_DUMP" "$opt" "$T/t.npy"
        assert_failure 2
    done
    [ ! -e "$T/p.npz" ]
}
