#!/usr/bin/env bats
# quant.bats — the int8 model keeps the f32 model's accuracy within a few
# points, and is int8. Quantizes MODEL with mge-quant, then compares both
# accuracies on the labelled data. Set:
#   MODEL          the f32 model (default model.mge)
#   DATA           labelled evaluation data (default fashion-mnist:test)
#   CALIB          calibration data, not the evaluation data (default fashion-mnist)
#   CALIB_BATCHES  calibration batches (default 16)
#   MAX_DROP       allowed accuracy loss in points (default 1.0)
# Needs jq.

setup_file() {
    export MODEL=${MODEL:-model.mge} DATA=${DATA:-fashion-mnist:test}
    export INT8="$BATS_FILE_TMPDIR/int8.mge"
    mge-quant "$MODEL" --calib "${CALIB:-fashion-mnist}" --batches "${CALIB_BATCHES:-16}" -o "$INT8"
}

setup() {
    MAX_DROP=${MAX_DROP:-1.0}
}

# accuracy MODEL: prints the top-1 accuracy on DATA (0..1)
accuracy() {
    mge-run "$1" --data "$DATA" --metrics accuracy --json | jq .accuracy
}

@test "int8 accuracy is within MAX_DROP points of f32" {
    f32=$(accuracy "$MODEL")
    int8=$(accuracy "$INT8")
    [ -n "$f32" ] && [ -n "$int8" ]
    echo "f32 $f32, int8 $int8, allowed drop $MAX_DROP points"
    jq -en --argjson f "$f32" --argjson q "$int8" --argjson d "$MAX_DROP" '($f - $q) * 100 <= $d'
}

@test "the int8 model has int8 convolutions or linears and int8 weights" {
    mge-dump --json "$INT8" > "$BATS_TEST_TMPDIR/d.json"
    jq -e '(.op_counts.qconv2d // 0) + (.op_counts.qlinear // 0) > 0' "$BATS_TEST_TMPDIR/d.json"
    jq -e '.params.by_dtype.qs8 > 0' "$BATS_TEST_TMPDIR/d.json"
}
