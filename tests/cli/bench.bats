#!/usr/bin/env bats
# mge-bench: output formats, configurations, inputs, baselines, bad input.
# Nothing here asserts a time: only structure, counts and exit codes.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    MGE_BENCH="$MGE_BIN/mge-bench"
    MLP="$SAMPLES/mlp.mgt"
    LENET="$SAMPLES/lenet.mgt"
}

# jq-like checks on a --json result: jcheck FILE 'python expression on d' ...
jcheck() {
    local f=$1
    shift
    pyq 'import json
d = json.load(open(sys.argv[1]))
for e in sys.argv[2:]:
    if not eval(e, {"d": d}):
        print("failed:", e); print(json.dumps(d, indent=1)); sys.exit(1)' "$f" "$@"
}

@test "mge-bench --help and --version" {
    run --separate-stderr "$MGE_BENCH" --help
    assert_success
    assert_output --partial "Usage: mge-bench"
    assert_output --partial "--baseline"
    [ -z "$stderr" ]
    run "$MGE_BENCH" --version
    assert_output "mge-bench (mge) 0.1.0"
}

@test "the default table: a header and one row per model, quiet on stderr in a pipe" {
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 3 --warmup 1
    assert_success
    [ -z "$stderr" ]
    [ "${#lines[@]}" -eq 2 ]
    [[ "${lines[0]}" == "model "*"threads"*"mean ms"*"p50 ms"*"p99 ms"*"samples/s"*"peak RSS"*"arena"*"ratio" ]]
    [[ "${lines[1]}" == *"mlp.mgt"*"1.00x" ]]
}

@test "--md: a markdown table with ratios to the first row" {
    run --separate-stderr "$MGE_BENCH" "$MLP" "$LENET" --iters 2 --warmup 0 --md
    assert_success
    [ "${#lines[@]}" -eq 4 ]
    [[ "${lines[0]}" == "| model "*" ratio |" ]]
    [[ "${lines[1]}" == "| ---"*": |" ]]
    [[ "${lines[2]}" == "| "*"mlp.mgt"*" 1.00x |" ]]
    [[ "${lines[3]}" == "| "*"lenet.mgt"*"x |" ]]
}

@test "--csv: a header and one parseable row per configuration" {
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1,2 --iters 2 --csv
    assert_success
    [ "${#lines[@]}" -eq 3 ]
    [[ "${lines[0]}" == "model,threads,batch,train,load_ms,first_ms,min_ms,mean_ms,p50_ms"* ]]
    printf '%s\n' "$output" > "$T/r.csv"
    pyq 'import csv
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["threads"] for r in rows] == ["1", "2"], rows
assert all(r["runs"] == "2" and r["train"] == "0" for r in rows), rows
assert rows[0]["ratio"] == "1.000", rows' "$T/r.csv"
}

@test "--json: documented keys, one result per (model, threads), runs and batch" {
    "$MGE_BENCH" "$MLP" "$LENET" --threads 1,2 --iters 4 --warmup 1 --batch 3 --json > "$T/r.json"
    jcheck "$T/r.json" 'd["tool"] == "mge-bench" and d["version"] == "0.1.0"' \
        'isinstance(d["machine"]["cpu"], str) and d["machine"]["cores"] >= 1' \
        'd["config"]["iters"] == 4 and d["config"]["warmup"] == 1 and d["config"]["train"] is False' \
        'd["config"]["duration_s"] is None and d["config"]["device"] == "cpu"' \
        'len(d["results"]) == 4' \
        '[(r["model"].split("/")[-1], r["threads"]) for r in d["results"]] == [("mlp.mgt", 1), ("mlp.mgt", 2), ("lenet.mgt", 1), ("lenet.mgt", 2)]' \
        'all(set(r) >= {"model", "threads", "batch", "load_ms", "first_ms", "min_ms", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "stddev_ms", "samples_per_s", "peak_rss_bytes", "arena_bytes", "runs"} for r in d["results"])' \
        'all(r["runs"] == 4 and r["batch"] == 3 for r in d["results"])' \
        'all(0 < r["min_ms"] <= r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] <= r["max_ms"] for r in d["results"])' \
        'all(r["min_ms"] <= r["mean_ms"] <= r["max_ms"] for r in d["results"])' \
        'all(r["peak_rss_bytes"] > 0 and r["arena_bytes"] > 0 and r["samples_per_s"] > 0 for r in d["results"])' \
        'd["results"][0]["ratio"] == 1'
}

@test "percentiles are sorted[floor(n*p)] (ONNX Runtime perf_test), throughput is batch*runs/time" {
    # two runs: p50 = sorted[1] = the max; ten runs: p90 = sorted[9] = the max
    "$MGE_BENCH" "$MLP" --iters 2 --warmup 0 --json > "$T/a.json"
    jcheck "$T/a.json" 'all(r["p50_ms"] == r["max_ms"] == r["p99_ms"] for r in d["results"])'
    "$MGE_BENCH" "$MLP" --iters 10 --warmup 0 --batch 2 --json > "$T/b.json"
    jcheck "$T/b.json" 'all(r["p90_ms"] == r["max_ms"] for r in d["results"])' \
        'all(abs(r["samples_per_s"] - 2 * 10 / (r["mean_ms"] * 10 / 1e3)) < 1e-3 * r["samples_per_s"] for r in d["results"])'
    # one run: everything is that run, the deviation 0
    "$MGE_BENCH" "$MLP" --iters 1 --json > "$T/c.json"
    jcheck "$T/c.json" 'all(r["min_ms"] == r["p50_ms"] == r["max_ms"] and r["stddev_ms"] == 0 for r in d["results"])'
}

@test "--duration runs until the time is up (at least once)" {
    "$MGE_BENCH" "$MLP" --duration 0.2 --warmup 0 --json > "$T/r.json"
    jcheck "$T/r.json" 'd["config"]["iters"] is None and d["config"]["duration_s"] == 0.2' \
        'd["results"][0]["runs"] >= 1'
}

@test "--train times a training step; a model without a loss is an error" {
    "$MGE_BENCH" "$MLP" --train --iters 3 --batch 4 --json > "$T/r.json"
    jcheck "$T/r.json" 'd["config"]["train"] is True' 'd["results"][0]["runs"] == 3 and d["results"][0]["batch"] == 4'
    write_mlp
    run --separate-stderr "$MGE_BENCH" "$T/mlp.mgt" --train --iters 2
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/mlp.mgt: error: --train: the model has no loss"* ]]
}

@test "--shape sets the shape and the batch; shapes that do not fit are errors" {
    "$MGE_BENCH" "$MLP" -s x=5x1x28x28 --iters 2 --json > "$T/r.json"
    jcheck "$T/r.json" 'd["results"][0]["batch"] == 5' 'd["config"]["shapes"] == ["x=5x1x28x28"]'
    run --separate-stderr "$MGE_BENCH" "$MLP" --shape x=1x3x28x28 --iters 2
    assert_failure 1
    [[ "$stderr" == "mge-bench: $MLP: error: --shape x=1x3x28x28 does not fit input 'x' f32[N,1,28,28]: dimension 1 is 3, not 1" ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --shape x=1x28x28 --iters 2
    assert_failure 1
    [[ "$stderr" == *"does not fit input 'x' f32[N,1,28,28]: rank 3, not 4" ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --shape y=1x4 --iters 2
    assert_failure 1
    [[ "$stderr" == *"--shape y=1x4: the model has no input named 'y' (its inputs: x, label)" ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --shape x=2x1x28x28 --batch 3 --iters 2
    assert_failure 1
    [[ "$stderr" == *"N is 3 from --batch but 2 from x=2x1x28x28"* ]]
    # syntax errors are usage errors
    for bad in x x= =1x2 x=1x0 x=1xx2 x=a x=1x2x3x4x5x6x7x8x9; do
        run --separate-stderr "$MGE_BENCH" "$MLP" --shape "$bad"
        assert_failure 2
        [[ "$stderr" == *"Try 'mge-bench --help'."* ]]
    done
    run --separate-stderr "$MGE_BENCH" "$MLP" -s x=1x1x28x28 -s x=2x1x28x28
    assert_failure 2
    [[ "$stderr" == *"input 'x' given twice"* ]]
}

@test "--input uses real records; a missing, short or misfitting file is named" {
    npys "$T/in.npy" f32:4x1x28x28:rand i32:4:1
    "$MGE_BENCH" "$MLP" --input "$T/in.npy" --train --iters 2 --json > "$T/r.json"
    jcheck "$T/r.json" 'd["results"][0]["batch"] == 4' 'd["config"]["input"].endswith("in.npy")'
    # inference needs x only: the first record
    "$MGE_BENCH" "$MLP" -i "$T/in.npy" --iters 2 > /dev/null
    run --separate-stderr "$MGE_BENCH" "$MLP" --input "$T/none.npy" --iters 2
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/none.npy: error: "* ]]
    npys "$T/one.npy" f32:4x1x28x28:rand
    run --separate-stderr "$MGE_BENCH" "$MLP" --input "$T/one.npy" --train --iters 2
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/one.npy: error: 1 record, but the model needs 2"*"'label'"* ]]
    npys "$T/bad.npy" f32:4x28x28:rand
    run --separate-stderr "$MGE_BENCH" "$MLP" --input "$T/bad.npy" --iters 2
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/bad.npy: error: record 1 is f32[4,28,28], but input 'x' is f32[N,1,28,28]: rank 3, not 4" ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --input "$T/in.npy" --batch 2 --iters 2
    assert_failure 1
    [[ "$stderr" == *"N is 2 from --batch but 4 from record 1 ('x')" ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --input "$T/in.npy" --shape x=4x1x28x28
    assert_failure 2
}

@test "usage errors and bad model files" {
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 0
    assert_failure 2
    [[ "$stderr" == *"--iters: 0 is out of range"*"Try 'mge-bench --help'."* ]]
    run --separate-stderr "$MGE_BENCH"
    assert_failure 2
    [[ "$stderr" == *"no model given"* ]]
    for args in "--iters 3 --duration 1" "--md --json" "--csv --md" "--duration 0" "--duration x" \
        "--max-regression 5" "--threads 1,,2" "--threads 0" "--warmup -1" "--batch 0" "--device tpu"; do
        run --separate-stderr "$MGE_BENCH" "$MLP" $args
        assert_failure 2
    done
    run --separate-stderr "$MGE_BENCH" "$MLP" --device cuda:0
    assert_failure 1
    [[ "$stderr" == *"no plugin libmge-cuda.so"* ]]
    run --separate-stderr "$MGE_BENCH" "$T/nosuch.mgt" --iters 2
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/nosuch.mgt: error: "* ]]
    printf 'input x : f32[N,4]\ny = nosuchop(x)\noutput y\n' > "$T/bad.mgt"
    run --separate-stderr "$MGE_BENCH" "$MLP" "$T/bad.mgt" --iters 2
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/bad.mgt:2:"*"error: "* ]]
    [ -z "$output" ]
}

@test "-o writes the report to a file; -v shows progress on stderr" {
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --json -o "$T/r.json"
    assert_success
    [ -z "$output" ]
    jcheck "$T/r.json" 'len(d["results"]) == 1'
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 -v
    assert_success
    [[ "$stderr" == *"timed runs"* ]]
    [[ "$stderr" == *"loaded in"* ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 -q
    [ -z "$stderr" ]
}

@test "--baseline: within the allowance passes, a regression fails naming the model and both times" {
    "$MGE_BENCH" "$MLP" --threads 1 --iters 3 --json > "$T/base.json"
    # a generous baseline (100x slower than measured)
    pyq 'import json
d = json.load(open(sys.argv[1]))
for r in d["results"]: r["p50_ms"] = r["mean_ms"] = r["max_ms"] * 100
json.dump(d, open(sys.argv[2], "w"))' "$T/base.json" "$T/slow.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --iters 3 --baseline "$T/slow.json"
    assert_success
    [[ "$stderr" == *"mlp.mgt (threads 1, batch 1): p50 "*"within 10%"* ]]
    # a baseline far faster than possible
    pyq 'import json
d = json.load(open(sys.argv[1]))
for r in d["results"]: r["p50_ms"] = r["mean_ms"] = 1e-6
json.dump(d, open(sys.argv[2], "w"))' "$T/base.json" "$T/fast.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --iters 3 --baseline "$T/fast.json" --max-regression 50
    assert_failure 1
    [[ "$stderr" == *"error: $MLP (threads 1, batch 1): p50 "*" ms against 1e-06 ms in $T/fast.json ("*"more than the allowed 50%)"* ]]
    # the report is still written
    [[ "$output" == "model "* ]]
}

@test "--baseline from another model or configuration, and malformed baselines, exit 1" {
    "$MGE_BENCH" "$MLP" --threads 1 --iters 2 --json > "$T/base.json"
    run --separate-stderr "$MGE_BENCH" "$LENET" --threads 1 --iters 2 --baseline "$T/base.json"
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/base.json: error: baseline from another model"*"no result for $LENET"* ]]
    [ -z "$output" ]
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 2 --iters 2 --baseline "$T/base.json"
    assert_failure 1
    [[ "$stderr" == *"no result for $MLP (threads 2, batch 1)"* ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --batch 2 --iters 2 --baseline "$T/base.json"
    assert_failure 1
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --train --iters 2 --baseline "$T/base.json"
    assert_failure 1
    [[ "$stderr" == *"baseline from another configuration: it times inference"* ]]
    printf '{"tool": "mge-bench", "results": [' > "$T/trunc.json"
    printf '[1, 2]' > "$T/array.json"
    printf '{"tool": "mge-bench", "results": [{"model": "m", "threads": 1, "batch": 1}]}' > "$T/nop50.json"
    printf '{"tool": "mge-bench", "results": [{"model": "m", "threads": "1", "batch": 1, "p50_ms": 1}]}' > "$T/strthreads.json"
    printf '{"tool": "other", "results": []}' > "$T/other.json"
    : > "$T/empty.json"
    head -c 2000 /dev/urandom > "$T/random.json"
    pyq 'print("[" * 100000)' > "$T/deep.json"
    printf '{"tool": "mge-bench", "results": []} x' > "$T/trailing.json"
    for f in trunc array nop50 strthreads other empty random deep trailing; do
        run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --baseline "$T/$f.json"
        assert_failure 1
        [[ "$stderr" == "mge-bench: $T/$f.json: error: malformed baseline"* ]] || { echo "$f: $stderr"; return 1; }
    done
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --baseline "$T/missing.json"
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/missing.json: error: "* ]]
}
