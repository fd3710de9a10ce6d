#!/usr/bin/env bats
# onnx_nodes.bats — the ONNX backend node tests mge passes stay passing:
# scripts/onnx-node-tests runs the tests named in tests/onnx/node-pass.txt
# through mge-run and fails on any that does not pass, naming it and why.
# The whole suite with its per-op report is `make check-onnx`; the list is
# regenerated with scripts/onnx-node-tests --write-pass tests/onnx/node-pass.txt.
# Skips, saying why, without the node-test data or python3's onnx module
# (scripts/deps fetches both).
bats_require_minimum_version 1.5.0
load helper

RUNNER="$BATS_TEST_DIRNAME/../../scripts/onnx-node-tests"
PASS_LIST="$BATS_TEST_DIRNAME/../onnx/node-pass.txt"
FROZEN_LIST="$BATS_TEST_DIRNAME/../onnx/node-pass-frozen.txt"

@test "every ONNX node test on the regression list passes" {
    run --separate-stderr "$RUNNER" --mge-run "$MGE_RUN" --only "$PASS_LIST" --strict -j "$(nproc)"
    if [ "$status" = 77 ]; then
        skip "${stderr#onnx-node-tests: skipped: }"
    fi
    echo "$output"
    echo "$stderr"
    assert_success
    # the closing line counts them: "N tests: N pass (100.0%), 0 fail, ..."
    assert_output --regexp 'onnx-node-tests: ([0-9]+) tests: \1 pass \(100\.0%\), 0 fail, 0 unsupported'
}

@test "the node tests that pass with their shape-like inputs frozen (--freeze) still do, and only so" {
    run --separate-stderr "$RUNNER" --mge-run "$MGE_RUN" --only "$FROZEN_LIST" --freeze --strict -j "$(nproc)"
    if [ "$status" = 77 ]; then
        skip "${stderr#onnx-node-tests: skipped: }"
    fi
    echo "$output"
    echo "$stderr"
    assert_success
    # none of them passes plainly: frozen passes are never counted as passes
    assert_output --regexp 'onnx-node-tests: ([0-9]+) tests: 0 pass \(0\.0%\), 0 fail, 0 unsupported, and \1 more pass'
}

@test "the regression lists are one test name a line, each once, in one list only" {
    for f in "$PASS_LIST" "$FROZEN_LIST"; do
        [ -f "$f" ]
        run grep -v -E '^(#.*|test_[A-Za-z0-9_]+)$' "$f"
        assert_failure 1
    done
    run sh -c "cat '$PASS_LIST' '$FROZEN_LIST' | grep -v '^#' | sort | uniq -d"
    assert_output ""
}
