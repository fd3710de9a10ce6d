#!/usr/bin/env bats
# golden.bats — the model's outputs on fixed inputs still match recorded
# ones. Record them once, commit both files, and record again after a
# change meant to move the outputs:
#   mge-run model.mge < golden/inputs.npy > golden/outputs.npy
# Set:
#   MODEL       the model (default model.mge)
#   GOLDEN_IN   NPY records, one per model input and step (default golden/inputs.npy)
#   GOLDEN_OUT  the recorded outputs (default golden/outputs.npy)
#   ATOL, RTOL  tolerances (default 1e-4 and 1e-3: other CPUs run other
#               kernels, whose rounding differs a little)

setup() {
    MODEL=${MODEL:-model.mge}
    GOLDEN_IN=${GOLDEN_IN:-golden/inputs.npy}
    GOLDEN_OUT=${GOLDEN_OUT:-golden/outputs.npy}
    ATOL=${ATOL:-1e-4}
    RTOL=${RTOL:-1e-3}
}

@test "outputs on the golden inputs match the recorded ones" {
    [ -f "$GOLDEN_OUT" ] || skip "no $GOLDEN_OUT yet: record it with  mge-run $MODEL < $GOLDEN_IN > $GOLDEN_OUT"
    # --check compares each output record and exits 1 on a mismatch,
    # naming the worst element
    run mge-run "$MODEL" --check "$GOLDEN_OUT" --atol "$ATOL" --rtol "$RTOL" < "$GOLDEN_IN"
    echo "$output"
    [ "$status" -eq 0 ]
}
