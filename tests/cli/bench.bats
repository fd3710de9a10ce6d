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
    # it ends with examples, then the exit status
    [[ "$output" == *$'\nExit status: '*$'\n\nExamples:\n  mge-bench '* ]]
    assert_output --partial "--baseline"
    [ -z "$stderr" ]
    run "$MGE_BENCH" --version
    assert_output "mge-bench (mge) 0.1.0"
}

@test "the default table: a narrow header and one row per model, quiet on stderr in a pipe" {
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 3 --warmup 1
    assert_success
    [ -z "$stderr" ]
    [ "${#lines[@]}" -eq 2 ]
    # nine columns: model threads batch min p50 p99 samples/s arena ratio
    [[ "${lines[0]}" =~ ^model\ +threads\ +batch\ +min\ ms\ +p50\ ms\ +p99\ ms\ +samples/s\ +arena\ +ratio$ ]]
    [[ "${lines[1]}" == *"mlp.mgt"*"1.00x" ]]
}

@test "--wide: every statistic in the table; not with --csv or --json" {
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 3 --warmup 0 --wide
    assert_success
    [ "${#lines[@]}" -eq 2 ]
    [[ "${lines[0]}" == "model "*"threads"*"batch"*"load ms"*"first ms"*"min ms"*"mean ms"*"p50 ms"*"p90 ms"*"p99 ms"*"max ms"*"stddev ms"*"gate ms"*"samples/s"*"peak RSS"*"arena"*"ratio" ]]
    # one cell per heading
    [ "$(wc -w <<< "${lines[1]}")" -eq 19 ]   # 17 cells, two of them "N KiB"
    for f in --csv --json; do
        run --separate-stderr "$MGE_BENCH" "$MLP" --wide $f
        assert_failure 2
    done
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
}

@test "--shape sets: naming an input again starts a set, one row each; sets must name the same inputs" {
    run --separate-stderr "$MGE_BENCH" "$MLP" --shape x=1x1x28x28 --shape x=3x1x28x28 --iters 2 --warmup 0 --md
    assert_success
    [ "${#lines[@]}" -eq 4 ]
    [[ "${lines[0]}" == "| model "*"| inputs "*"| threads |"* ]]
    [[ "${lines[2]}" == *"| x=1x1x28x28 |"*"|     1 |"* ]]
    [[ "${lines[3]}" == *"| x=3x1x28x28 |"*"|     3 |"* ]]
    # two inputs per set (training needs the labels too)
    "$MGE_BENCH" "$MLP" --train -s x=2x1x28x28 -s label=2 -s x=4x1x28x28 -s label=4 --iters 2 --json > "$T/r.json"
    jcheck "$T/r.json" '[(r["batch"], r["shapes"]) for r in d["results"]] == [(2, "x=2x1x28x28 label=2"), (4, "x=4x1x28x28 label=4")]' \
        'd["config"]["shapes"] == ["x=2x1x28x28", "label=2", "x=4x1x28x28", "label=4"]'
    # a set without an input the first set has, or with one it lacks
    run --separate-stderr "$MGE_BENCH" "$MLP" --train -s x=2x1x28x28 -s label=2 -s x=4x1x28x28
    assert_failure 2
    [[ "$stderr" == *"--shape: set 2 lacks input 'label'"*"Try 'mge-bench --help'."* ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --train -s x=2x1x28x28 -s x=4x1x28x28 -s label=4
    assert_failure 2
    [[ "$stderr" == *"set 1 has no input 'label'"* ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" -s x=1x1x28x28 -s x=2x1x28x28 --batch 1,2
    assert_failure 2
    [[ "$stderr" == *"several --batch values and several --shape sets exclude each other"* ]]
}

@test "--batch B,B,...: one row per batch, each model then each batch then each thread count" {
    "$MGE_BENCH" "$MLP" "$LENET" --batch 1,8 --threads 1,2 --iters 2 --warmup 0 --json > "$T/r.json"
    jcheck "$T/r.json" 'len(d["results"]) == 8' \
        '[(r["name"], r["batch"], r["threads"]) for r in d["results"]] == [(m, b, t) for m in ("mlp.mgt", "lenet.mgt") for b in (1, 8) for t in (1, 2)]' \
        'all(r["shapes"] == "x=%dx1x28x28" % r["batch"] for r in d["results"])'
    run --separate-stderr "$MGE_BENCH" "$MLP" --batch 1,8 --iters 2 --warmup 0
    assert_success
    [ "${#lines[@]}" -eq 3 ]
    [[ "${lines[1]}" =~ mlp\.mgt\ +[0-9]+\ +1\  ]]
    [[ "${lines[2]}" =~ mlp\.mgt\ +[0-9]+\ +8\  ]]
    for bad in 1,,8 1,1 0,8 8, x; do
        run --separate-stderr "$MGE_BENCH" "$MLP" --batch "$bad"
        assert_failure 2
    done
    npys "$T/in.npy" f32:4x1x28x28:rand
    run --separate-stderr "$MGE_BENCH" "$MLP" --input "$T/in.npy" --batch 1,4
    assert_failure 2
    [[ "$stderr" == *"several --batch values and --input exclude each other"* ]]
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
for r in d["results"]: r["gate_ms"] = r["max_ms"] * 100
json.dump(d, open(sys.argv[2], "w"))' "$T/base.json" "$T/slow.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --iters 3 --baseline "$T/slow.json"
    assert_success
    [[ "$stderr" == *"mlp.mgt (threads 1, x=1x1x28x28): "*" ms against "*"within 10%"* ]]
    # a baseline far faster than possible
    pyq 'import json
d = json.load(open(sys.argv[1]))
for r in d["results"]: r["gate_ms"] = 1e-6
json.dump(d, open(sys.argv[2], "w"))' "$T/base.json" "$T/fast.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --iters 3 --baseline "$T/fast.json" --max-regression 50
    assert_failure 1
    [[ "$stderr" == *"error: mlp.mgt (threads 1, x=1x1x28x28): "*" ms against 1e-06 ms in $T/fast.json ("*"more than the allowed 50%)"* ]]
    # the report is still written
    [[ "$output" == "model "* ]]
}

@test "--baseline from another model or configuration, and malformed baselines, exit 1" {
    "$MGE_BENCH" "$MLP" --threads 1 --iters 2 --json > "$T/base.json"
    run --separate-stderr "$MGE_BENCH" "$LENET" --threads 1 --iters 2 --baseline "$T/base.json"
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/base.json: error: baseline from another model"*"no result for lenet.mgt (threads 1, x=1x1x28x28); it has mlp.mgt (threads 1, x=1x1x28x28)" ]]
    [ -z "$output" ]
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 2 --iters 2 --baseline "$T/base.json"
    assert_failure 1
    [[ "$stderr" == *"no result for mlp.mgt (threads 2, x=1x1x28x28)"* ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --batch 2 --iters 2 --baseline "$T/base.json"
    assert_failure 1
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --train --iters 2 --baseline "$T/base.json"
    assert_failure 1
    [[ "$stderr" == *"baseline from another configuration: it times inference"* ]]
    printf '{"tool": "mge-bench", "results": [' > "$T/trunc.json"
    printf '[1, 2]' > "$T/array.json"
    printf '{"tool": "mge-bench", "results": [{"model": "m", "threads": 1, "batch": 1}]}' > "$T/nop50.json"
    printf '{"tool": "mge-bench", "results": [{"model": "m", "threads": "1", "batch": 1, "p50_ms": 1}]}' > "$T/strthreads.json"
    printf '{"tool": "mge-bench", "results": [{"model": "m", "threads": 1, "batch": 1, "gate_ms": "1"}]}' > "$T/strgate.json"
    printf '{"tool": "mge-bench", "results": [{"model": "m", "shapes": 1, "threads": 1, "batch": 1, "gate_ms": 1}]}' > "$T/numshapes.json"
    printf '{"tool": "other", "results": []}' > "$T/other.json"
    : > "$T/empty.json"
    head -c 2000 /dev/urandom > "$T/random.json"
    pyq 'print("[" * 100000)' > "$T/deep.json"
    printf '{"tool": "mge-bench", "results": []} x' > "$T/trailing.json"
    for f in trunc array nop50 strthreads strgate numshapes other empty random deep trailing; do
        run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --baseline "$T/$f.json"
        assert_failure 1
        [[ "$stderr" == "mge-bench: $T/$f.json: error: malformed baseline"* ]] || { echo "$f: $stderr"; return 1; }
    done
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --baseline "$T/missing.json"
    assert_failure 1
    [[ "$stderr" == "mge-bench: $T/missing.json: error: "* ]]
}

@test "--baseline keys: the file's basename, the input shapes and threads (not the path as typed)" {
    mkdir -p "$T/ci"
    cp "$MLP" "$T/ci/mlp.mgt"
    (cd "$T" && "$MGE_BENCH" ci/mlp.mgt --batch 1,2 --threads 1 --iters 2 --warmup 0 --json -o base.json)
    jcheck "$T/base.json" '[(r["model"], r["name"], r["shapes"]) for r in d["results"]] == [("ci/mlp.mgt", "mlp.mgt", "x=1x1x28x28"), ("ci/mlp.mgt", "mlp.mgt", "x=2x1x28x28")]'
    pyq 'import json
d = json.load(open(sys.argv[1]))
for r in d["results"]: r["gate_ms"] = 1e9
json.dump(d, open(sys.argv[1], "w"))' "$T/base.json"
    # ./mlp.mgt, an absolute path, another directory: the same key
    cd "$T/ci"
    run --separate-stderr "$MGE_BENCH" ./mlp.mgt --batch 1,2 --threads 1 --iters 2 --baseline ../base.json
    assert_success
    [[ "$stderr" == *"mlp.mgt (threads 1, x=2x1x28x28): "*"within 10%"* ]]
    run --separate-stderr "$MGE_BENCH" "$MLP" --batch 2 --threads 1 --iters 2 --baseline ../base.json
    assert_success
    # two models with one basename in one run cannot both match
    run --separate-stderr "$MGE_BENCH" ./mlp.mgt "$MLP" --threads 1 --iters 2 --baseline ../base.json
    assert_failure 1
    [[ "$stderr" == *"share a baseline key (file name mlp.mgt, threads 1, x=1x1x28x28): give the models different file names"* ]]
}

@test "--baseline without --threads runs the thread counts the baseline has, not all CPUs" {
    "$MGE_BENCH" "$MLP" --threads 1,3 --iters 2 --warmup 0 --json -o "$T/base.json"
    "$MGE_BENCH" "$MLP" --iters 2 --warmup 0 --baseline "$T/base.json" --max-regression 1e9 --json -o "$T/r.json"
    jcheck "$T/r.json" '[r["threads"] for r in d["results"]] == [1, 3]'
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --warmup 0 --baseline "$T/base.json" --max-regression 1e9 -v
    [[ "$stderr" == *"threads from the baseline"* ]]
}

@test "--baseline from another machine: a warning naming both, then the comparison" {
    "$MGE_BENCH" "$MLP" --threads 1 --iters 2 --warmup 0 --json -o "$T/base.json"
    pyq 'import json
d = json.load(open(sys.argv[1]))
d["machine"] = {"cpu": "Some Other CPU", "cores": 999}
for r in d["results"]: r["gate_ms"] = 1e9
json.dump(d, open(sys.argv[1], "w"))' "$T/base.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --warmup 0 --baseline "$T/base.json"
    assert_success
    [[ "$stderr" == "mge-bench: $T/base.json: warning: recorded on another machine (Some Other CPU, 999 cores; this one: "*" cores): the times may not compare"* ]]
    [[ "$stderr" == *"within 10%"* ]]
    # the same machine: no warning
    "$MGE_BENCH" "$MLP" --threads 1 --iters 2 --warmup 0 --json -o "$T/same.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --iters 2 --warmup 0 --baseline "$T/same.json" --max-regression 1e9
    assert_success
    [[ "$stderr" != *"warning"* ]]
}

@test "--rounds: the timed runs split into rounds; gate_ms is the median of the rounds' fastest runs" {
    "$MGE_BENCH" "$MLP" "$LENET" --threads 1 --iters 10 --rounds 5 --warmup 0 --json > "$T/r.json"
    jcheck "$T/r.json" 'd["config"]["rounds"] == 5' \
        'all(len(r["round_min_ms"]) == 5 and r["runs"] == 10 for r in d["results"])' \
        'all(r["gate_ms"] == sorted(r["round_min_ms"])[2] for r in d["results"])' \
        'all(r["min_ms"] == min(r["round_min_ms"]) for r in d["results"])' \
        'all(r["min_ms"] <= r["gate_ms"] <= r["max_ms"] for r in d["results"])'
    # an even number of rounds: the mean of the middle two
    "$MGE_BENCH" "$MLP" --iters 8 --rounds 4 --warmup 0 --json > "$T/even.json"
    jcheck "$T/even.json" 'abs(d["results"][0]["gate_ms"] - sum(sorted(d["results"][0]["round_min_ms"])[1:3]) / 2) < 1e-6'
    # fewer runs than rounds: one run per round
    "$MGE_BENCH" "$MLP" --iters 3 --warmup 0 --json > "$T/few.json"
    jcheck "$T/few.json" 'd["config"]["rounds"] == 3 and len(d["results"][0]["round_min_ms"]) == 3'
    # one round: the gate is the fastest run
    "$MGE_BENCH" "$MLP" --iters 7 --rounds 1 --warmup 0 --json > "$T/one.json"
    jcheck "$T/one.json" 'd["results"][0]["gate_ms"] == d["results"][0]["min_ms"]'
    "$MGE_BENCH" "$MLP" --duration 0.2 --rounds 2 --warmup 0 --json > "$T/dur.json"
    jcheck "$T/dur.json" 'len(d["results"][0]["round_min_ms"]) == 2 and d["results"][0]["runs"] >= 2'
    for bad in 0 1001 x; do
        run --separate-stderr "$MGE_BENCH" "$MLP" --rounds "$bad"
        assert_failure 2
    done
}

@test "--baseline from an older mge-bench (no gate_ms, shapes or name): matched by basename, threads and batch, gated on p50_ms" {
    printf '{"tool": "mge-bench", "config": {"train": false}, "results": [{"model": "some/dir/mlp.mgt", "threads": 1, "batch": 2, "p50_ms": 1e9}]}' > "$T/old.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --batch 2 --iters 2 --baseline "$T/old.json"
    assert_success
    [[ "$stderr" == *"mlp.mgt (threads 1, x=2x1x28x28): "*" ms against 1e+09 ms in $T/old.json"*"within 10%"* ]]
    printf '{"tool": "mge-bench", "results": [{"model": "mlp.mgt", "threads": 1, "batch": 2, "p50_ms": 1e-9}]}' > "$T/oldfast.json"
    run --separate-stderr "$MGE_BENCH" "$MLP" --threads 1 --batch 2 --iters 2 --baseline "$T/oldfast.json"
    assert_failure 1
    [[ "$stderr" == *"more than the allowed 10%"* ]]
}
