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
    # TODO(metrics): switch to --metrics --json
    run mge-run "$MODEL" --data "$DATA" --accuracy
    echo "$output"   # shown when the test fails
    [ "$status" -eq 0 ]
    # the line is "accuracy 0.8940 (894 of 1000)"
    acc=$(awk '$1 == "accuracy" { print $2 }' <<< "$output")
    [ -n "$acc" ]
    echo "accuracy $acc, floor $MIN_ACCURACY"
    awk -v a="$acc" -v m="$MIN_ACCURACY" 'BEGIN { exit !(a >= m) }'
}
