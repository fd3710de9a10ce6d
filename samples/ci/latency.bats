#!/usr/bin/env bats
# latency.bats — fail the build when the model got slower than a recorded
# baseline. The first run records the baseline and skips: commit it, on the
# machine (or runner type) CI uses. Delete it to record again after a
# change meant to be slower. Set:
#   MODEL           the model (default model.mge)
#   BASELINE        the recorded mge-bench --json (default bench/baseline.json)
#   BATCHES         batch sizes, one row each (default 1,8)
#   MAX_REGRESSION  allowed slowdown in percent (default 10)
# mge-bench matches rows by file name, input shapes and threads, and gates
# on the median of interleaved rounds' fastest runs, which a busy runner
# moves far less than a mean; it warns when the baseline came from another
# CPU. One thread: all-core timings on a shared runner vary the most.

setup() {
    MODEL=${MODEL:-model.mge}
    BASELINE=${BASELINE:-bench/baseline.json}
    BATCHES=${BATCHES:-1,8}
    MAX_REGRESSION=${MAX_REGRESSION:-10}
}

@test "no row is more than MAX_REGRESSION percent slower than the baseline" {
    if [ ! -f "$BASELINE" ]; then
        mkdir -p "$(dirname "$BASELINE")"
        mge-bench "$MODEL" --batch "$BATCHES" --threads 1 --json -o "$BASELINE"
        skip "no baseline yet: recorded $BASELINE; commit it"
    fi
    # the thread count comes from the baseline
    run mge-bench "$MODEL" --batch "$BATCHES" --baseline "$BASELINE" --max-regression "$MAX_REGRESSION"
    echo "$output"   # the table and, per row, both times
    [ "$status" -eq 0 ]
}
