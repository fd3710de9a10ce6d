#!/usr/bin/env bats
# accuracy.bats — fail the build when the model's accuracy on a labelled
# dataset falls below a floor. Copy into your project's tests and set:
#   MODEL         the model (default model.mge)
#   DATA          labelled data mge-run --data reads: an IDX directory
#                 (DIR:test for its t10k files), a .npz named after the
#                 inputs, ... (default fashion-mnist:test; see mge-train(1), DATA)
#   MIN_ACCURACY  the floor, 0..1 (default 0.85)
# Run: bats accuracy.bats (mge-run on PATH).

setup() {
    MODEL=${MODEL:-model.mge}
    DATA=${DATA:-fashion-mnist:test}
    MIN_ACCURACY=${MIN_ACCURACY:-0.85}
}

@test "top-1 accuracy on the labelled data is at least MIN_ACCURACY" {
    # scored from the outputs and the labels in the data: an optimized or
    # quantized model (no loss left) scores the same way
    run mge-run "$MODEL" --data "$DATA" --metrics accuracy,top5 --json
    echo "$output"   # shown when the test fails: {"accuracy": 0.894, "top5": ...}
    [ "$status" -eq 0 ]
    echo "accuracy $(jq .accuracy <<< "$output"), floor $MIN_ACCURACY"
    jq -e --argjson m "$MIN_ACCURACY" '.accuracy >= $m' <<< "$output" > /dev/null
}
