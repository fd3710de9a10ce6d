#!/usr/bin/env bats
# mge-prof: per-node report, --by-op, --top, --sort, --json, --train,
# --trace, the peak cache, and bad input.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    MGE_PROF="$MGE_BIN/mge-prof"
    # one probe per test file, never the user's cache
    export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache"
    write_mlp "$T/mlp.mgt"
}

# jq-like checks on a --json report: jcheck FILE 'python expression over d'
jcheck() {
    pyq 'import json
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok:
    print("failed:", sys.argv[2]); print(json.dumps(d, indent=1)[:3000])
sys.exit(0 if ok else 1)' "$@"
}

FOOTER='^profiled total [0-9]+\.[0-9]+ ms, unprofiled [0-9]+\.[0-9]+ ms, overhead -?[0-9]+\.[0-9]+%$'

@test "mge-prof --help and --version" {
    run --separate-stderr "$MGE_PROF" --help
    assert_success
    assert_output --partial "Usage: mge-prof"
    # it ends with examples, then the exit status
    [[ "$output" == *$'\nExit status: '*$'\n\nExamples:\n  mge-prof '* ]]
    assert_output --partial "--trace"
    [ -z "$stderr" ]
    run "$MGE_PROF" --version
    assert_output "mge-prof (mge) 0.1.0"
}

@test "the default report: every node, a total line and the overhead footer" {
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --batch 16 --iters 5 --threads 1
    assert_success
    assert_line --regexp '^.*mlp.mgt: batch 16, inference, 5 iterations after 3 warm-up, 1 thread$'
    assert_line --regexp '^peak: [0-9.]+ GFLOP/s'
    assert_line --regexp '^node +op +output +ms +% +cum% +GFLOP/s +%peak +read +written +FLOP/B$'
    assert_line --regexp '^fc1 +linear +f32\[16,8\] '
    assert_line --regexp '^act1 +relu +f32\[16,8\] '
    assert_line --regexp '^fc2 +linear +f32\[16,3\] '
    assert_line --regexp '^total +[0-9.]+ +100\.0 '
    assert_line --regexp "$FOOTER"
    # bytes: fc1 reads x (16x4), weight (8x4), bias (8) in f32 = 416 B... shown as B
    assert_line --regexp '^fc1 .* 416 B +512 B +'
    [ -z "$stderr" ]
    # the footer's numbers parse; the overhead is reported, not asserted (timing)
    line=$(grep -E "$FOOTER" <<< "$output")
    pyq 'import re
p, u, o = map(float, re.findall(r"-?[0-9]+\.[0-9]+", sys.argv[1]))
assert p >= 0 and u > 0, (p, u, o)' "$line"
}

@test "--json: documented keys, rows that add up" {
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 3 --json
    assert_success
    echo "$output" > "$T/r.json"
    jcheck "$T/r.json" 'd["tool"] == "mge-prof" and d["batch"] == 8 and d["iters"] == 3 and d["train"] is False'
    jcheck "$T/r.json" 'd["nnodes"] == 3 and [n["name"] for n in sorted(d["nodes"], key=lambda n: n["index"])] == ["fc1", "act1", "fc2"]'
    jcheck "$T/r.json" 'all(set(n) >= {"index", "name", "op", "shape", "ms", "pct", "cum_pct", "flops", "gflops", "peak_pct", "bytes_read", "bytes_written", "intensity"} for n in d["nodes"])'
    jcheck "$T/r.json" 'abs(sum(n["pct"] for n in d["nodes"]) - 100) < 0.1 and abs(d["nodes"][-1]["cum_pct"] - 100) < 0.1'
    jcheck "$T/r.json" 'd["peak_gflops"] > 0 and d["peak_gflops_1thread"] > 0'
    jcheck "$T/r.json" 'd["total"]["flops"] == sum(n["flops"] for n in d["nodes"]) and d["profiled_ms"] > 0 and d["unprofiled_ms"] > 0 and "overhead_pct" in d'
    # linear(x[8,4] -> 8): 2*8*4*8 multiply-adds plus the bias
    jcheck "$T/r.json" '[n for n in d["nodes"] if n["name"] == "fc1"][0]["flops"] >= 2 * 8 * 4 * 8'
    jcheck "$T/r.json" '[n for n in d["nodes"] if n["name"] == "act1"][0]["bytes_written"] == 8 * 8 * 4'
}

@test "--sort time, flops and name order the rows" {
    run "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 2 --json --sort name
    assert_success
    echo "$output" > "$T/n.json"
    jcheck "$T/n.json" '[n["name"] for n in d["nodes"]] == ["act1", "fc1", "fc2"]'
    run "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 2 --json --sort flops
    assert_success
    echo "$output" > "$T/f.json"
    jcheck "$T/f.json" '[n["flops"] for n in d["nodes"]] == sorted([n["flops"] for n in d["nodes"]], reverse=True)'
    run "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 2 --json --sort time
    assert_success
    echo "$output" > "$T/t.json"
    jcheck "$T/t.json" '[n["ms"] for n in d["nodes"]] == sorted([n["ms"] for n in d["nodes"]], reverse=True)'
}

@test "--by-op aggregates nodes of one op; --top limits the rows" {
    run "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 2 --by-op
    assert_success
    assert_line --regexp '^op +nodes +ms '
    assert_line --regexp '^linear +2 '
    assert_line --regexp '^relu +1 '
    assert_line --regexp '^total +3 '
    run "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 2 --by-op --json --sort name
    echo "$output" > "$T/o.json"
    jcheck "$T/o.json" '[(o["op"], o["count"]) for o in d["ops"]] == [("linear", 2), ("relu", 1)]'
    run "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 2 --top 1
    assert_success
    assert_line "(1 of 3 rows shown)"
    assert_line --regexp '^total '
    run "$MGE_PROF" "$T/mlp.mgt" --batch 8 --iters 2 --top 2 --json
    echo "$output" > "$T/top.json"
    jcheck "$T/top.json" 'len(d["nodes"]) == 2 and d["nnodes"] == 3'
}

@test "--shape, --batch and --input set the batch" {
    run "$MGE_PROF" "$T/mlp.mgt" --shape x=5x4 --iters 1 --json
    assert_success
    echo "$output" > "$T/s.json"
    jcheck "$T/s.json" 'd["batch"] == 5 and [n["shape"] for n in d["nodes"] if n["name"] == "fc2"] == ["f32[5,3]"]'
    npys "$T/x.npy" f32:7x4:rand
    run "$MGE_PROF" "$T/mlp.mgt" --input "$T/x.npy" --iters 1 --json --seed 3
    assert_success
    echo "$output" > "$T/i.json"
    jcheck "$T/i.json" 'd["batch"] == 7'
}

@test "--train profiles forward, backward and sgd nodes" {
    write_small
    run --separate-stderr "$MGE_PROF" "$T/small.mgt" --train --batch 4 --iters 2 --json
    assert_success
    echo "$output" > "$T/tr.json"
    jcheck "$T/tr.json" 'd["train"] is True and d["nnodes"] == len(d["nodes"])'
    jcheck "$T/tr.json" '{"linear", "relu", "cross_entropy", "sgd"} <= {n["op"] for n in d["nodes"]}'
    jcheck "$T/tr.json" 'any("grad" in n["op"] for n in d["nodes"])'
    jcheck "$T/tr.json" 'sum(n["op"] == "sgd" for n in d["nodes"]) == 4'   # fc1, fc2 weight and bias
    run "$MGE_PROF" "$T/small.mgt" --train --batch 4 --iters 2 --by-op
    assert_success
    assert_line --regexp 'training step'
    assert_line --regexp '^sgd +4 '
}

@test "--train without a loss is an error" {
    run "$MGE_PROF" "$T/mlp.mgt" --train --iters 1
    assert_failure 1
    assert_output --regexp "^mge-prof: .*mlp.mgt: error: --train needs a loss"
}

@test "--trace: Chrome trace format, one complete event per node per iteration on tid 0" {
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --batch 32 --iters 4 --threads 2 --json --trace "$T/tr.json"
    assert_success
    echo "$output" > "$T/r.json"
    [ -s "$T/tr.json" ]
    pyq 'import json
d = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
ev = d["traceEvents"]
assert d["displayTimeUnit"] == "ms"
x0 = [e for e in ev if e["ph"] == "X" and e["tid"] == 0]
assert len(x0) == r["nnodes"] * r["iters"], (len(x0), r["nnodes"], r["iters"])
names = sorted(n["name"] for n in r["nodes"])
for name in names:
    assert sum(e["name"] == name for e in x0) == r["iters"], name
assert all(e["dur"] >= 0 and e["ts"] >= 0 and set(e["args"]) == {"op", "shape", "flops"} for e in x0)
c = [e for e in ev if e["ph"] == "C"]
assert len(c) == len(x0) and all(e["name"] == "arena" and e["args"]["bytes"] > 0 for e in c)
m = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert set(m) == {0, 1, 2}, m
pool = [e for e in ev if e["ph"] == "X" and e["tid"] != 0]
assert all(e["tid"] in (1, 2) and e["name"] == "task" for e in pool)
' "$T/tr.json" "$T/r.json"
}

@test "--trace with --train and one thread: no pool threads" {
    write_small
    run "$MGE_PROF" "$T/small.mgt" --train --batch 4 --iters 3 --threads 1 --json --trace "$T/t1.json"
    assert_success
    echo "$output" > "$T/r.json"
    pyq 'import json
d = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
ev = d["traceEvents"]
assert sum(e["ph"] == "X" and e["tid"] == 0 for e in ev) == r["nnodes"] * 3
assert all(e.get("tid", 0) == 0 for e in ev)' "$T/t1.json" "$T/r.json"
}

@test "an unwritable --trace fails and leaves nothing" {
    run "$MGE_PROF" "$T/mlp.mgt" --iters 1 --trace "$T/nodir/t.json"
    assert_failure 1
    assert_output --partial "nodir/t.json"
    [ ! -e "$T/nodir" ]
}

@test "the peak is cached per CPU model and thread count" {
    export XDG_CACHE_HOME="$T/c"
    run "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 1
    assert_success
    refute_line --partial "cached"
    [ -s "$T/c/mge/peak" ]
    run grep -cP '^.+\t1\t[0-9.]+$' "$T/c/mge/peak"
    assert_output 1
    # a planted value is used as is
    sed -i 's/\t1\t.*/\t1\t1234.5/' "$T/c/mge/peak"
    run "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 1 --json
    assert_success
    echo "$output" > "$T/p.json"
    jcheck "$T/p.json" 'd["peak_gflops"] == 1234.5'
    run "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 1
    assert_line "peak: 1234.5 GFLOP/s (GEMM probe, cached)"
    # another thread count is probed and added
    run "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 2
    assert_success
    run grep -c . "$T/c/mge/peak"
    assert_output 2
}

@test "an unwritable cache directory is not an error" {
    touch "$T/file"
    XDG_CACHE_HOME="$T/file" run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 1
    assert_success
    assert_line --regexp '^peak: [0-9.]+ GFLOP/s \(GEMM probe\)$'
    [ -z "$stderr" ]
}

@test "lenet at batch 64" {
    run "$MGE_PROF" "$SAMPLES/lenet.mgt" --batch 64 --iters 2 --json
    assert_success
    echo "$output" > "$T/l.json"
    jcheck "$T/l.json" 'd["nnodes"] == 12 and max(d["nodes"], key=lambda n: n["flops"])["name"] == "conv2"'
    jcheck "$T/l.json" '[n["bytes_read"] for n in d["nodes"] if n["name"] == "flat"] == [0]'
}

@test "usage errors exit 2" {
    run "$MGE_PROF"
    assert_failure 2
    assert_output --partial "Try 'mge-prof --help'"
    run "$MGE_PROF" "$T/mlp.mgt" --iters 0
    assert_failure 2
    assert_output --partial "--iters"
    run "$MGE_PROF" "$T/mlp.mgt" --top 0
    assert_failure 2
    assert_output --partial "--top"
    run "$MGE_PROF" "$T/mlp.mgt" --sort speed
    assert_failure 2
    assert_output --partial "expected time, flops or name"
    run "$MGE_PROF" "$T/mlp.mgt" --shape x=2x4 --input x.npy
    assert_failure 2
    run "$MGE_PROF" "$T/mlp.mgt" --shape x2x4
    assert_failure 2
    run "$MGE_PROF" "$T/mlp.mgt" "$T/mlp.mgt"
    assert_failure 2
    run "$MGE_PROF" "$T/mlp.mgt" --bogus
    assert_failure 2
    run "$MGE_PROF" "$T/mlp.mgt" --device gpu
    assert_failure 2
}

@test "bad input: clear errors, exit 1" {
    run "$MGE_PROF" "$T/nonexistent.mgt"
    assert_failure 1
    assert_output --regexp "^mge-prof: .*nonexistent.mgt: "
    run "$MGE_PROF" "$T/mlp.mgt" --shape x=2x5 --iters 1
    assert_failure 1
    assert_output --partial "does not fit input 'x'"
    run "$MGE_PROF" "$T/mlp.mgt" --shape y=2x4 --iters 1
    assert_failure 1
    assert_output --partial "no input named 'y'"
    run "$MGE_PROF" "$T/mlp.mgt" --shape x=2x4 --batch 3 --iters 1
    assert_failure 1
    npys "$T/bad.npy" f32:2x6:1
    run "$MGE_PROF" "$T/mlp.mgt" --input "$T/bad.npy" --iters 1
    assert_failure 1
    assert_output --partial "bad.npy"
    run "$MGE_PROF" "$T/mlp.mgt" --device cuda
    assert_failure 1
    assert_output --partial "no plugin libmge-cuda.so"
    run "$MGE_PROF" --device cuda:0
    assert_failure 1
}

@test "-v names the peak cache on stderr" {
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --iters 1 -v
    assert_success
    [[ "$stderr" == *"peak cache: $XDG_CACHE_HOME/mge/peak"* ]]
}

@test "-q: nothing on stdout or stderr; --trace and --json are still written" {
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --iters 1 -q
    assert_success
    [ -z "$stderr" ]
    [ -z "$output" ]
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --iters 2 -q --trace "$T/t.json"
    assert_success
    [ -z "$output" ] && [ -z "$stderr" ]
    pyq 'import json; assert json.load(open(sys.argv[1]))["traceEvents"]' "$T/t.json"
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --iters 1 -q --json
    assert_success
    [ -z "$stderr" ]
    [[ "$output" == '{"tool": "mge-prof"'* ]]
    # errors still show
    run --separate-stderr "$MGE_PROF" "$T/nonexistent.mgt" -q
    assert_failure 1
    [[ "$stderr" == "mge-prof: $T/nonexistent.mgt: error: "* ]]
}

@test "Winograd convolutions: GFLOP/s count the direct convolution, %peak the kernel's multiply-adds (marked w)" {
    cat > "$T/w.mgt" <<'NET'
input x : f32[N,8,14,14]
param w : f32[8,8,3,3] init=uniform(0.1)
wt = winograd_weight(w)
c4 = conv2d_winograd(x, wt, out=8, pad=1, bias=false)
w2 = winograd_weight(w, tile=2)
c2 = conv2d_winograd(c4, w2, out=8, tile=2, pad=1, bias=false)
r = relu(c2)
output r
NET
    run --separate-stderr "$MGE_PROF" "$T/w.mgt" --batch 2 --iters 2 --json --threads 1
    assert_success
    echo "$output" > "$T/w.json"
    # direct: 2 * (2*14*14 outputs * 8 channels) * 8 inputs * 9 taps
    jcheck "$T/w.json" 'all(n["flops"] == 2 * 2*14*14*8 * 8 * 9 for n in d["nodes"] if n["op"] == "conv2d_winograd")'
    # F(4,3): 2 * 6^2 * (2 * 4*4 tiles) * 8 * 8; F(2,3): 2 * 4^2 * (2 * 7*7 tiles) * 8 * 8
    jcheck "$T/w.json" '{n["name"]: n["kernel_flops"] for n in d["nodes"] if n["op"] == "conv2d_winograd"} == {"c4": 2*36*32*64, "c2": 2*16*98*64}'
    jcheck "$T/w.json" '[n["kernel_flops"] == n["flops"] for n in d["nodes"] if n["name"] == "r"] == [True]'
    jcheck "$T/w.json" 'd["total"]["kernel_flops"] == sum(n["kernel_flops"] for n in d["nodes"])'
    jcheck "$T/w.json" 'all(abs(n["peak_pct"] - 100 * n["kernel_gflops"] / d["peak_gflops"]) < 1e-2 for n in d["nodes"])'
    run --separate-stderr "$MGE_PROF" "$T/w.mgt" --batch 2 --iters 2 --threads 1
    assert_success
    assert_line --regexp '^c4 +conv2d_winograd +f32\[2,8,14,14\] .* [0-9.]+w +[0-9.]+ [KM]?i?B '
    assert_line --regexp '^r +relu .* [0-9.]+  +[0-9.]+ [KM]?i?B '
    assert_line --partial "w: %peak from the kernel's multiply-adds"
    # without Winograd nodes, no mark and no note
    run --separate-stderr "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 1
    refute_output --partial "w: %peak"
}

@test "the model may come from stdin" {
    run --separate-stderr "$MGE_PROF" - --iters 1 --batch 2 < "$T/mlp.mgt"
    assert_success
    assert_line --regexp '^<stdin>: batch 2, inference'
    assert_line --regexp '^fc2 +linear +f32\[2,3\] '
    run "$MGE_PROF" - --input - --iters 1 < "$T/mlp.mgt"
    assert_failure 2
}

@test "%peak above 100 (a kernel faster than the GEMM probe) is marked '!' with a note" {
    export XDG_CACHE_HOME="$T/c"
    run "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 1
    assert_success
    refute_output --partial "!: above the peak"
    # a planted peak far below any kernel's rate
    sed -i 's/\t1\t.*/\t1\t0.000001/' "$T/c/mge/peak"
    run "$MGE_PROF" "$T/mlp.mgt" --iters 1 --threads 1
    assert_success
    assert_line --regexp '^fc1 +linear .* [0-9.]+! +[0-9.]+ B '
    assert_line "!: above the peak: the kernel outruns the 512x512x512 matmul the peak is measured with"
}
