#!/usr/bin/env bats
# memory.bats — fail the build when the model needs more memory than its
# budget: the planned arena of one inference (activations; parameters not
# included) and the peak RSS of the whole process. Set:
#   MODEL            the model (default model.mge)
#   BATCH            the batch to measure at (default 1)
#   MAX_ARENA_BYTES  (default 67108864, 64 MiB)
#   MAX_RSS_BYTES    (default 536870912, 512 MiB)
# Needs jq.

setup_file() {
    export MODEL=${MODEL:-model.mge} BATCH=${BATCH:-1}
    # one measurement for both tests; a few runs are enough for memory
    mge-bench "$MODEL" --batch "$BATCH" --threads 1 --iters 3 --json -o "$BATS_FILE_TMPDIR/bench.json"
}

setup() {
    MAX_ARENA_BYTES=${MAX_ARENA_BYTES:-67108864}
    MAX_RSS_BYTES=${MAX_RSS_BYTES:-536870912}
}

@test "the arena fits MAX_ARENA_BYTES" {
    arena=$(jq -e '.results[0].arena_bytes' "$BATS_FILE_TMPDIR/bench.json")
    echo "arena $arena bytes at batch $BATCH, budget $MAX_ARENA_BYTES"
    [ "$arena" -le "$MAX_ARENA_BYTES" ]
}

@test "the peak RSS fits MAX_RSS_BYTES" {
    rss=$(jq -e '.results[0].peak_rss_bytes' "$BATS_FILE_TMPDIR/bench.json")
    echo "peak RSS $rss bytes at batch $BATCH, budget $MAX_RSS_BYTES"
    [ "$rss" -le "$MAX_RSS_BYTES" ]
}
