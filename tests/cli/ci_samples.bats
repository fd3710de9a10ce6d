#!/usr/bin/env bats
# samples/ci: the bats files users copy into their projects, run here as a
# project would (the tools on PATH, the model as model.mge, fashion-mnist
# the bundled sample) against a LeNet trained on the sample, once with
# settings they pass and once with settings each check must fail.

bats_require_minimum_version 1.5.0

setup_file() {
    export REPO="$BATS_TEST_DIRNAME/../.."
    export P="$BATS_FILE_TMPDIR/project"
    mkdir -p "$P"
    ln -s "$(cd "$REPO" && pwd)/samples/data/fashion-mnist" "$P/fashion-mnist"
    # 0.83-0.87 on the 1000 sample test images
    "${MGE_BIN:-$REPO/bin}/mge-train" "$REPO/samples/nets/lenet.mgt" --data "$P/fashion-mnist" --epochs 2 \
        --optimizer adam --lr 0.001 --batch 64 --seed 1 -o "$P/model.mge"
}

setup() {
    load helper
    command -v jq > /dev/null || skip "jq not installed (scripts/deps installs it)"
    export PATH="$MGE_BIN:$PATH"
    CI="$(cd "$REPO" && pwd)/samples/ci"
}

# ci FILE [VAR=VALUE...]: runs samples/ci/FILE in the project directory
# with those settings; $output is its TAP.
ci() {
    local f=$1
    shift
    cd "$P"
    run env "$@" bats --tap "$CI/$f"
    cd - > /dev/null
}

@test "accuracy.bats: passes above the floor, fails below it showing the accuracy" {
    ci accuracy.bats MIN_ACCURACY=0.75
    assert_success
    assert_line --regexp '^ok 1 top-1 accuracy'
    ci accuracy.bats MIN_ACCURACY=0.99
    assert_failure
    assert_line --regexp '^not ok 1 top-1 accuracy'
    assert_line --regexp '^# accuracy 0\.[0-9]+, floor 0\.99$'
}

@test "golden.bats: skips until the outputs are recorded, then passes, and fails when they differ" {
    mkdir -p "$P/golden"
    npys "$P/golden/inputs.npy" f32:4x1x28x28:rand f32:2x1x28x28:rand
    rm -f "$P/golden/outputs.npy"
    ci golden.bats
    assert_success
    assert_line --regexp '^ok 1 .* # skip no golden/outputs.npy yet: record it with  mge-run model.mge < golden/inputs.npy > golden/outputs.npy$'
    # the command the skip gives
    (cd "$P" && mge-run model.mge < golden/inputs.npy > golden/outputs.npy)
    ci golden.bats
    assert_success
    assert_line --regexp '^ok 1 outputs on the golden inputs match'
    refute_output --partial "# skip"
    # one output moved by 0.01
    py 'f = open(sys.argv[1], "rb"); a = np.load(f); b = np.load(f); f.close()
b[1, 3] += 0.01
f = open(sys.argv[2], "wb"); np.save(f, a); np.save(f, b); f.close()' "$P/golden/outputs.npy" "$T/moved.npy"
    ci golden.bats GOLDEN_OUT="$T/moved.npy"
    assert_failure
    assert_line --regexp '^not ok 1 '
    assert_output --partial "1 of 60 values differ beyond atol 0.0001"
}

@test "latency.bats: records a baseline and skips, then passes or fails against it" {
    rm -rf "$P/bench"
    ci latency.bats
    assert_success
    assert_line --regexp '^ok 1 .* # skip no baseline yet: recorded bench/baseline.json; commit it$'
    pyq 'import json
d = json.load(open(sys.argv[1]))
assert [(r["name"], r["batch"], r["threads"]) for r in d["results"]] == [("model.mge", 1, 1), ("model.mge", 8, 1)], d' "$P/bench/baseline.json"
    # timing is not asserted: a baseline 100x slower passes, one 1e6x faster fails
    pyq 'import json, sys
d = json.load(open(sys.argv[1]))
for f, out in ((100, sys.argv[2]), (1e-6, sys.argv[3])):
    for r in d["results"]: r["gate_ms"] = r["max_ms"] * f
    json.dump(d, open(out, "w"))' "$P/bench/baseline.json" "$T/slow.json" "$T/fast.json"
    ci latency.bats BASELINE="$T/slow.json"
    assert_success
    assert_line --regexp '^ok 1 no row is more than'
    ci latency.bats BASELINE="$T/fast.json"
    assert_failure
    assert_line --regexp '^not ok 1 '
    assert_output --partial "model.mge (threads 1, x=8x1x28x28): "
    assert_output --partial "more than the allowed 10%"
}

@test "memory.bats: within the budgets; each budget fails alone when too small" {
    ci memory.bats
    assert_success
    assert_line --regexp '^ok 1 the arena fits'
    assert_line --regexp '^ok 2 the peak RSS fits'
    ci memory.bats MAX_ARENA_BYTES=1000
    assert_failure
    assert_line --regexp '^not ok 1 the arena fits'
    assert_line --regexp '^# arena [0-9]+ bytes at batch 1, budget 1000$'
    assert_line --regexp '^ok 2 '
    ci memory.bats MAX_RSS_BYTES=1000 BATCH=4
    assert_failure
    assert_line --regexp '^ok 1 '
    assert_line --regexp '^not ok 2 the peak RSS fits'
    assert_line --regexp '^# peak RSS [0-9]+ bytes at batch 4, budget 1000$'
}

@test "quant.bats: int8 within 2 points of f32 and int8 for real; fails when the int8 model must be 100 points better" {
    # the demo's LeNet loses 0.1 points; 2 leaves room for other CPUs' int8 kernels
    ci quant.bats MAX_DROP=2
    assert_success
    assert_line --regexp '^ok 1 int8 accuracy is within'
    assert_line --regexp '^ok 2 the int8 model has int8'
    ci quant.bats MAX_DROP=-100
    assert_failure
    assert_line --regexp '^not ok 1 '
    assert_line --regexp '^# f32 0\.[0-9]+, int8 0\.[0-9]+, allowed drop -100 points$'
}

@test "model-file.bats: LeNet's interface, ops and size pass; another model, a missing op or a small budget fail" {
    ci model-file.bats
    assert_success
    [ "$(grep -c '^ok ' <<< "$output")" -eq 3 ]
    "$MGE_BIN/mge-opt" "$REPO/samples/nets/mlp.mgt" -o "$P/mlp.mge"
    ci model-file.bats MODEL=mlp.mge
    assert_failure
    assert_line --regexp '^not ok 1 the input and output'
    assert_output --partial "no outputs entry fc2 f32"
    ci model-file.bats ALLOWED_OPS="conv2d relu"
    assert_failure
    assert_line --regexp '^not ok 2 only ops'
    assert_line "# ops not allowed: batchnorm cross_entropy flatten linear maxpool2d"
    ci model-file.bats MAX_PARAM_BYTES=1000
    assert_failure
    assert_line --regexp '^not ok 3 the parameters fit'
    # and the int8 model passes the same checks
    mge-quant "$P/model.mge" --calib "$P/fashion-mnist" --batches 4 -o "$P/int8.mge"
    ci model-file.bats MODEL=int8.mge
    assert_success
}

@test "every file in samples/ci is run above and shown in README's Model checks in CI" {
    for f in "$CI"/*.bats; do
        name=$(basename "$f")
        grep -qF "ci $name" "$BATS_TEST_FILENAME" || { echo "$name: not run here"; return 1; }
        grep -qF "samples/ci/$name" "$REPO/README.md" || { echo "$name: not in README.md"; return 1; }
    done
    grep -q '^## Model checks in CI$' "$REPO/README.md"
}
