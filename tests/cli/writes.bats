#!/usr/bin/env bats
# Every write a tool makes is checked: an output on a full disk (/dev/full
# answers every write with ENOSPC) is an error naming the output and the
# system's message, exit 1, for standard output and for each file option.
# (mge-train's log, checkpoints and output are in train.bats.)

bats_require_minimum_version 1.5.0

setup() {
    load helper
    [ -w /dev/full ] || skip "no writable /dev/full on this system"
    MGE_QUANT="$MGE_BIN/mge-quant"
    MGE_BENCH="$MGE_BIN/mge-bench"
    MGE_PROF="$MGE_BIN/mge-prof"
    make_mlp_mge
    M="$T/mlp.mge"
    npys "$T/x.npy" f32:4x4:rand
}

# full TOOL WHERE CMD...: CMD fails with exit 1 and says
# "TOOL: WHERE: error: write failed: No space left on device".
full() {
    local tool=$1 where=$2
    shift 2
    run --separate-stderr "$@"
    [ "$status" -eq 1 ] || { echo "exit $status (want 1): $*"; echo "stderr: $stderr"; return 1; }
    [[ "$stderr" == *"$tool: $where: error: write failed: No space left on device"* ]] || {
        echo "$*"; echo "stderr: $stderr"; return 1; }
}

@test "mge-run: a full standard output or -o is an error" {
    full mge-run "<stdout>" sh -c '"$1" "$2" < "$3" > /dev/full' sh "$MGE_RUN" "$M" "$T/x.npy"
    full mge-run /dev/full "$MGE_RUN" "$M" --input "$T/x.npy" -o /dev/full
}

@test "mge-run --data --accuracy: a full standard output is an error" {
    cat > "$T/cls.mgt" <<'NET'
input x : f32[N,4]
input label : i32[N]
fc = linear(x, out=3)
loss = cross_entropy(fc, label)
output fc
minimize loss
NET
    "$MGE_OPT" "$T/cls.mgt" -o "$T/cls.mge"
    npys "$T/d.npy" f32:6x4:rand i32:6:1
    full mge-run "<stdout>" sh -c '"$1" "$2" --data "$3" --accuracy > /dev/full' sh "$MGE_RUN" "$T/cls.mge" "$T/d.npy"
}

@test "mge-opt: a full standard output or -o is an error" {
    full mge-opt "<stdout>" sh -c '"$1" "$2" > /dev/full' sh "$MGE_OPT" "$M"
    full mge-opt /dev/full "$MGE_OPT" -O2 "$M" -o /dev/full
    full mge-opt "<stdout>" sh -c '"$1" -S "$2" > /dev/full' sh "$MGE_OPT" "$M"
}

@test "mge-opt --list-passes to a full standard output is an error" {
    full mge-opt "<stdout>" sh -c '"$1" --list-passes > /dev/full' sh "$MGE_OPT"
}

@test "mge-quant: a full standard output, -o or --report is an error" {
    full mge-quant "<stdout>" sh -c '"$1" "$2" --calib "$3" > /dev/full' sh "$MGE_QUANT" "$M" "$T/x.npy"
    full mge-quant /dev/full "$MGE_QUANT" "$M" --calib "$T/x.npy" -o /dev/full
    full mge-quant /dev/full "$MGE_QUANT" "$M" --calib "$T/x.npy" -o "$T/q.mge" --report /dev/full
    full mge-quant /dev/full "$MGE_QUANT" --dtype f16 "$M" -o /dev/full
}

@test "mge-dump: a full standard output, -o, --json, --dot or --params is an error" {
    full mge-dump "<stdout>" sh -c '"$1" "$2" > /dev/full' sh "$MGE_DUMP" "$M"
    full mge-dump "<stdout>" sh -c '"$1" --json "$2" > /dev/full' sh "$MGE_DUMP" "$M"
    full mge-dump "<stdout>" sh -c '"$1" --dot "$2" > /dev/full' sh "$MGE_DUMP" "$M"
    full mge-dump "<stdout>" sh -c '"$1" "$2" > /dev/full' sh "$MGE_DUMP" "$T/x.npy"
    full mge-dump /dev/full "$MGE_DUMP" "$M" -o /dev/full
    full mge-dump /dev/full "$MGE_DUMP" --params /dev/full "$M"
}

@test "mge-bench: a full standard output, --json or -o is an error" {
    full mge-bench "<stdout>" sh -c '"$1" "$2" -n 2 --warmup 0 > /dev/full' sh "$MGE_BENCH" "$M"
    full mge-bench "<stdout>" sh -c '"$1" "$2" -n 2 --warmup 0 --json > /dev/full' sh "$MGE_BENCH" "$M"
    full mge-bench /dev/full "$MGE_BENCH" "$M" -n 2 --warmup 0 --csv -o /dev/full
}

@test "mge-prof: a full standard output, --json or --trace is an error" {
    full mge-prof "<stdout>" sh -c '"$1" "$2" --iters 2 > /dev/full' sh "$MGE_PROF" "$M"
    full mge-prof "<stdout>" sh -c '"$1" "$2" --iters 2 --by-op > /dev/full' sh "$MGE_PROF" "$M"
    full mge-prof "<stdout>" sh -c '"$1" "$2" --iters 2 --json > /dev/full' sh "$MGE_PROF" "$M"
    full mge-prof /dev/full "$MGE_PROF" "$M" --iters 2 --trace /dev/full
}

@test "--help and --version to a full standard output are errors, in every tool" {
    for t in run opt quant dump bench prof train; do
        full "mge-$t" "<stdout>" sh -c '"$1" --help > /dev/full' sh "$MGE_BIN/mge-$t"
        full "mge-$t" "<stdout>" sh -c '"$1" --version > /dev/full' sh "$MGE_BIN/mge-$t"
    done
}

@test "a failed write to a file leaves neither it nor a temporary file" {
    # a file size limit of one block makes the kernel refuse the write
    # (EFBIG; SIGXFSZ ignored, as the shell passes it on to the tool)
    mkdir "$T/out"
    run --separate-stderr sh -c 'trap "" XFSZ; ulimit -f 1; exec "$1" "$2" -o "$3"' sh "$MGE_OPT" "$M" "$T/out/m.mge"
    [ "$status" -eq 1 ] || { echo "exit $status; stderr: $stderr"; return 1; }
    [[ "$stderr" == *"mge-opt: $T/out/m.mge: error: write failed: File too large"* ]] || {
        echo "stderr: $stderr"; return 1; }
    [ -z "$(ls -A "$T/out")" ]
}

@test "kill -9 mid-write leaves the old output intact and at most a .OUT.XXXXXX beside it (as the man pages say)" {
    echo "old" > "$T/out.npy"
    mkfifo "$T/fifo"
    "$MGE_RUN" "$M" -o "$T/out.npy" < "$T/fifo" &
    pid=$!
    # one step, then a writer that keeps the pipe open until it is killed
    (cat "$T/x.npy"; exec sleep 20) > "$T/fifo" &
    wpid=$!
    for i in $(seq 100); do
        [ -n "$(ls -A "$T" | grep '^\.out\.npy\.')" ] && break
        sleep 0.1
    done
    kill -KILL $pid
    st=0
    wait $pid || st=$?
    kill $wpid 2> /dev/null || true
    wait $wpid 2> /dev/null || true
    [ "$st" -eq 137 ]
    [ "$(cat "$T/out.npy")" = "old" ]
    left=$(ls -A "$T" | grep '^\.out' || true)
    [[ "$left" =~ ^\.out\.npy\.[A-Za-z0-9]{6}$ ]] || { echo "left: '$left'"; return 1; }
}
