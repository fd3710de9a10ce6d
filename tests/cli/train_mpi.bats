#!/usr/bin/env bats
# mge-train under MPI (OpenMPI's mpirun): N ranks with per-rank batch B
# train to the weights of one process with batch N*B, the ranks stay
# bitwise in step (--check-sync), ranks that disagree at start are refused,
# a killed or stopped rank ends the job with the last checkpoint intact,
# and a checkpoint resumes exactly. Skipped, with the reason, without mpirun.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    MGE_TRAIN="$MGE_BIN/mge-train"
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
    command -v mpirun > /dev/null || skip "mpirun not installed (scripts/deps installs openmpi-bin)"
    ldd "$MGE_TRAIN" | grep -q libmpi || skip "mge-train built without MPI (libopenmpi-dev missing at build time)"
    # CI runs as root; 3 ranks on 2 cores need --oversubscribe
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPIRUN=(mpirun --oversubscribe --bind-to none)
    # Under ASan (make check SANITIZE=1), LeakSanitizer reports OpenMPI's own
    # allocations at exit (ompi_op_base_op_select and its unloaded plugins)
    # in every rank; mge's side of the data-parallel step is leak-checked
    # without MPI by tests/unit/test_dist.c, so leak detection is off here only.
    if ldd "$MGE_TRAIN" | grep -q libasan; then
        export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
        echo "# train_mpi.bats: leak detection off under mpirun (OpenMPI's allocations at exit)" >&3
    fi
}

# close A.mge B.mge KIND TOL: every parameter and state tensor of B is
# within TOL of A's, relative to A's largest magnitude (KIND=max) or in
# norm, ||a - b|| / ||a|| (KIND=norm); prints the worst one either way.
close() {
    "$MGE_DUMP" "$1" --params "$T/a.npz" > /dev/null
    "$MGE_DUMP" "$2" --params "$T/b.npz" > /dev/null
    py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2]); kind, tol = sys.argv[3], float(sys.argv[4])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
worst, name = 0.0, ""
for k in a.files:
    x, y = a[k].astype(np.float64), b[k].astype(np.float64)
    if kind == "max":
        r = np.abs(x - y).max() / max(np.abs(x).max(), 1e-30) if x.size else 0
    else:
        r = np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30)
    if r > worst:
        worst, name = r, k
print("worst %s %.3g %s" % (kind, worst, name))
sys.exit(0 if worst <= tol else 1)' "$T/a.npz" "$T/b.npz" "$3" "$4"
}

# equal A.mge B.mge: the same bits in every parameter and state tensor.
equal() {
    "$MGE_DUMP" "$1" --params "$T/a.npz" > /dev/null
    "$MGE_DUMP" "$2" --params "$T/b.npz" > /dev/null
    py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
bad = [k for k in a.files if a[k].tobytes() != b[k].tobytes()]
print("differ:", bad); sys.exit(1 if bad else 0)' "$T/a.npz" "$T/b.npz"
}

# lenet without the conv biases: a bias right before a batchnorm has a zero
# gradient in exact arithmetic, so Adam (which divides by the gradient's
# size) turns its rounding noise into steps of about lr; SGD leaves it alone.
write_lenet_nobias() {
    sed 's/conv2d(\([^)]*\))/conv2d(\1, bias=false)/' "$SAMPLES/lenet.mgt" > "$T/lenet_nb.mgt"
}

# ddp N B NET ARGS...: N ranks of batch B against one process of batch N*B
# on the same data (5 steps), both written to $T/ddp.mge and $T/one.mge.
ddp() {
    local n=$1 b=$2 net=$3
    shift 3
    run "${MPIRUN[@]}" -np "$n" "$MGE_TRAIN" "$net" --data "$FM" --batch "$b" --steps 5 --threads 1 --check-sync \
        -o "$T/ddp.mge" "$@"
    assert_success
    local a one=()
    for a in "$@"; do
        [ "$a" = --sync-bn ] || one+=("$a")   # one process: its statistics are over the global batch anyway
    done
    "$MGE_TRAIN" "$net" --data "$FM" --batch $((n * b)) --steps 5 --threads 1 -o "$T/one.mge" "${one[@]}"
}

@test "mlp, sgd with momentum, 2 ranks: the weights of one process with the global batch (1e-6), ranks in step" {
    need_numpy
    ddp 2 32 "$SAMPLES/mlp.mgt" --momentum 0.9 --lr 0.05
    run close "$T/one.mge" "$T/ddp.mge" max 1e-6
    echo "$output"
    assert_success
    run "$MGE_DUMP" "$T/ddp.mge"
    assert_line "meta train.ranks = 2"
    assert_line "meta train.batch = 32"
}

@test "an uncompressed NPY file (read per sample by each rank), uneven last batch: one process's weights (1e-6)" {
    need_numpy
    # 1000 = 15 * 64 + 40 samples: the last global batch splits 20 + 20
    py 'r = np.random.default_rng(3)
with open(sys.argv[1], "wb") as f:
    np.save(f, r.random((1000, 1, 28, 28), dtype=np.float32))
    np.save(f, r.integers(0, 10, 1000).astype(np.int32))' "$T/d.npy"
    run "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$T/d.npy" --batch 32 --epochs 1 --threads 1 \
        --momentum 0.9 --check-sync -o "$T/ddp.mge"
    assert_success
    "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$T/d.npy" --batch 64 --epochs 1 --threads 1 --momentum 0.9 -o "$T/one.mge"
    run close "$T/one.mge" "$T/ddp.mge" max 1e-6
    echo "$output"
    assert_success
    # a different file of the same shape is refused at start
    py 'r = np.random.default_rng(4)
with open(sys.argv[1], "wb") as f:
    np.save(f, r.random((1000, 1, 28, 28), dtype=np.float32))
    np.save(f, r.integers(0, 10, 1000).astype(np.int32))' "$T/e.npy"
    local args=(--steps 2 --threads 1 -o "$T/x.mge")
    run "${MPIRUN[@]}" -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$T/d.npy" "${args[@]}" : \
        -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$T/e.npy" "${args[@]}"
    assert_failure
    assert_output --partial "rank 1 differs from rank 0 in the training data (--data)"
}

# Adam at eps 1e-4, as tests/oracle/test_train_step.py: at the default 1e-8
# the update lr * m / (sqrt(v) + eps) of a weight whose gradient is near 0
# (the MLP's weights of always-black border pixels) is its rounding noise
# scaled up to about lr, so two summation orders differ by ~1e-6 there.
@test "mlp, adam, 3 ranks oversubscribed: one process's weights (1e-6 in norm)" {
    need_numpy
    ddp 3 16 "$SAMPLES/mlp.mgt" --optimizer adam --eps 1e-4
    run close "$T/one.mge" "$T/ddp.mge" norm 1e-6
    echo "$output"
    assert_success
}

@test "lenet --sync-bn, sgd with momentum, 2 ranks: one process's weights and running statistics (1e-6)" {
    need_numpy
    ddp 2 16 "$SAMPLES/lenet.mgt" --momentum 0.9 --sync-bn
    run close "$T/one.mge" "$T/ddp.mge" max 1e-6
    echo "$output"
    assert_success
}

@test "lenet --sync-bn, adam, 2 ranks: one process's weights (1e-6 in norm)" {
    need_numpy
    write_lenet_nobias
    ddp 2 16 "$T/lenet_nb.mgt" --optimizer adam --eps 1e-4 --sync-bn
    run close "$T/one.mge" "$T/ddp.mge" norm 1e-6
    echo "$output"
    assert_success
}

@test "lenet without --sync-bn: per-rank statistics, which differ from one process's" {
    need_numpy
    ddp 2 16 "$SAMPLES/lenet.mgt" --momentum 0.9
    run close "$T/one.mge" "$T/ddp.mge" max 1e-6
    echo "$output"
    assert_failure
}

@test "an uneven last global batch (4000 = 41 * 96 + 64 over 3 ranks): shares weighted, one process's weights" {
    need_numpy
    run "${MPIRUN[@]}" -np 3 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 32 --epochs 1 --threads 1 \
        --lr 0.05 --check-sync -o "$T/ddp.mge"
    assert_success
    "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 96 --epochs 1 --threads 1 --lr 0.05 -o "$T/one.mge"
    run close "$T/one.mge" "$T/ddp.mge" max 1e-5
    echo "$output"
    assert_success
}

@test "resume under MPI continues exactly: 4 steps + 4 resumed = 8 steps, bit for bit" {
    need_numpy
    "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 16 --steps 8 --threads 1 --momentum 0.9 \
        -o "$T/full.mge"
    "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 16 --steps 4 --threads 1 --momentum 0.9 \
        -o "$T/half.mge"
    "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --steps 8 --threads 1 --resume "$T/half.mge" \
        -o "$T/resumed.mge"
    run equal "$T/full.mge" "$T/resumed.mge"
    echo "$output"
    assert_success
}

@test "a checkpoint from 2 ranks refused by 3 ranks and by one process, naming both counts" {
    "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 16 --steps 2 --threads 1 -o "$T/ck.mge"
    run "${MPIRUN[@]}" -np 3 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --steps 4 --threads 1 --resume "$T/ck.mge" \
        -o "$T/x.mge"
    assert_failure
    assert_output --partial "ck.mge: error: the checkpoint was written by 2 ranks, this run has 3: resume it with the same mpirun -np"
    run "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --steps 4 --resume "$T/ck.mge" -o "$T/x.mge"
    assert_failure
    assert_output "mge-train: $T/ck.mge: error: the checkpoint was written by 2 ranks, this run has 1: resume it with the same mpirun -np"
    [ ! -e "$T/x.mge" ]
}

@test "ranks started with another --lr, model or data: refused at start, naming the first difference" {
    local args=(--data "$FM" --steps 2 --threads 1 -o "$T/x.mge")
    run "${MPIRUN[@]}" -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" "${args[@]}" --lr 0.1 : \
        -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" "${args[@]}" --lr 0.2
    assert_failure
    assert_output --partial "mge-train: error: rank 1 differs from rank 0 in --lr (0.1 on rank 0): every rank needs the same model, data and options"
    run "${MPIRUN[@]}" -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" "${args[@]}" : \
        -np 1 "$MGE_TRAIN" "$SAMPLES/lenet.mgt" "${args[@]}"
    assert_failure
    assert_output --partial "mge-train: error: rank 1 differs from rank 0 in the model: every rank needs"
    run "${MPIRUN[@]}" -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" "${args[@]}" : \
        -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" "${args[@]}" --seed 3
    assert_failure
    assert_output --partial "rank 1 differs from rank 0 in --seed (0 on rank 0)"
    run "${MPIRUN[@]}" -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" "${args[@]}" : \
        -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" "${args[@]/$FM/$FM/t10k}"
    assert_failure
    assert_output --partial "rank 1 differs from rank 0 in the training data (--data)"
    [ ! -e "$T/x.mge" ]
}

# rank_pid N: the pid of the mge-train that is rank N of a running job.
rank_pid() {
    local p
    for p in $(pgrep -f "$MGE_TRAIN"); do
        if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# start_long ARGS...: a long 2-rank run checkpointing every 10 steps into
# $T/ck.mge, in the background (pid $JOB, output in $T/job.out); returns
# once the first checkpoint exists.
start_long() {
    "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 16 --steps 1000000 --threads 1 \
        --checkpoint-every 10 "$@" -o "$T/ck.mge" > "$T/job.out" 2>&1 3>&- &
    JOB=$!
    local i
    for i in $(seq 300); do
        [ -e "$T/ck.mge" ] && return 0
        sleep 0.1
    done
    kill "$JOB"
    return 1
}

# wait_job SECONDS: the job's exit status into JOB_RC; the job is killed
# (and JOB_RC is "hung") when it outlives the limit.
wait_job() {
    # (its fds closed: bats waits for whatever holds them)
    ( sleep "$1"; kill -9 "$JOB" 2> /dev/null; touch "$T/hung" ) > /dev/null 2>&1 3>&- &
    local dog=$!
    JOB_RC=0
    wait "$JOB" || JOB_RC=$?
    kill "$dog" 2> /dev/null || true
    [ -e "$T/hung" ] && JOB_RC=hung
    return 0
}

@test "a rank killed with -9: the job stops with an error naming it, the last checkpoint is intact and resumes" {
    start_long
    local p
    p=$(rank_pid 1)
    kill -9 "$p"
    wait_job 30
    echo "status: $JOB_RC"
    [ "$JOB_RC" != hung ] && [ "$JOB_RC" -ne 0 ]
    run cat "$T/job.out"
    assert_output --partial "process rank 1"
    assert_output --partial "signal 9"
    run "$MGE_DUMP" "$T/ck.mge"
    assert_success
    local step
    step=$(sed -n 's/^meta train.step = //p' <<< "$output")
    [ "$step" -ge 10 ]
    [ $((step % 10)) -eq 0 ]
    run "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --steps $((step + 3)) --threads 1 \
        --resume "$T/ck.mge" -o "$T/resumed.mge"
    assert_success
    run "$MGE_DUMP" "$T/resumed.mge"
    assert_line "meta train.step = $((step + 3))"
}

@test "a rank that stops answering (SIGSTOP): the others fail after --comm-timeout, no hang" {
    start_long --comm-timeout 2
    local p
    p=$(rank_pid 1)
    kill -STOP "$p"
    wait_job 40
    kill -CONT "$p" 2> /dev/null || true
    echo "status: $JOB_RC"
    [ "$JOB_RC" != hung ] && [ "$JOB_RC" -ne 0 ]
    run cat "$T/job.out"
    assert_output --partial "no answer from the other ranks in 2 s (a rank died or stopped; --comm-timeout sets the limit)"
    run "$MGE_DUMP" "$T/ck.mge"
    assert_success
}

@test "mpirun -np 1 runs as one process; --sync-bn without batchnorm is a warning" {
    run "${MPIRUN[@]}" -np 1 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --steps 2 --sync-bn -o "$T/x.mge"
    assert_success
    assert_output --partial "warning: --sync-bn: the model has no batchnorm; there are no statistics to synchronize"
    run "$MGE_DUMP" "$T/x.mge"
    assert_line "meta train.ranks = 1"
}

@test "under MPI: --data - refused (stdin reaches rank 0 only); fewer samples than ranks, another device refused" {
    need_numpy
    run "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data - -o "$T/x.mge" < /dev/null
    assert_failure
    assert_output --partial "mge-train: error: --data -: under an MPI launcher stdin reaches rank 0 only; give a file"
    py 'np.savez(sys.argv[1], x=np.zeros((2, 1, 28, 28), np.float32), label=np.zeros(2, np.int32))' "$T/two.npz"
    run "${MPIRUN[@]}" -np 3 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$T/two.npz" -o "$T/x.mge"
    assert_failure
    assert_output --partial "two.npz: error: 2 samples for 3 ranks: every rank needs at least one"
    run "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --steps 1 --device sim -o "$T/x.mge"
    assert_failure
    assert_output --partial "mlp.mgt: error: distributed training runs on the cpu device, not sim"
    [ ! -e "$T/x.mge" ]
}

@test "-v under MPI: rank 0 alone reports, with the gradient buckets and their overlap" {
    run "${MPIRUN[@]}" -np 2 "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 16 --steps 3 --threads 1 \
        --bucket-mb 0.5 -v -o "$T/x.mge"
    assert_success
    assert_output --partial "note: 2 ranks (Open MPI"
    assert_output --regexp "note: allreduce: 2 buckets, 940584 bytes per step; [0-9.]+ ms per step in flight"
    # in the order the backward pass makes them: fc3, fc2, fc1.weight fill the first 0.5 MiB
    assert_output --partial "note: bucket 0: 5 gradients, 939560 bytes"
    assert_output --partial "note: bucket 1: 1 gradient, 1024 bytes"
    refute_output --partial "rank 1"
    [ "$(grep -c 'epoch 1/1' <<< "$output")" -eq 1 ]
}

# Two "hosts": network namespaces joined by a veth pair, addresses only
# inside them; mpirun in the first reaches the second through an rsh agent
# that enters it (in place of ssh), and the ranks talk over TCP alone.
teardown() {
    if [ -n "${NSA:-}" ]; then
        ip netns del "$NSA" 2> /dev/null || true
        ip netns del "$NSB" 2> /dev/null || true
    fi
}

@test "two hosts (network namespaces over a veth pair, TCP only): one process's weights" {
    need_numpy
    command -v ip > /dev/null || skip "no ip(8) (iproute2) to make network namespaces"
    NSA="mgeA$$" NSB="mgeB$$"
    ip netns add "$NSA" 2> /dev/null || { NSA=""; skip "ip netns add not permitted here (needs CAP_SYS_ADMIN)"; }
    ip netns add "$NSB"
    ip link add "va$$" type veth peer name "vb$$"
    ip link set "va$$" netns "$NSA"
    ip link set "vb$$" netns "$NSB"
    ip -n "$NSA" addr add 10.201.0.1/24 dev "va$$"
    ip -n "$NSB" addr add 10.201.0.2/24 dev "vb$$"
    for ns in "$NSA" "$NSB"; do
        ip -n "$ns" link set lo up
    done
    ip -n "$NSA" link set "va$$" up
    ip -n "$NSB" link set "vb$$" up
    cat > "$T/agent" <<AGENT
#!/bin/sh
# ssh's stand-in: run the remote command inside the second host
echo "\$1" >> "$T/agent.log"
shift
exec ip netns exec $NSB sh -c "\$*"
AGENT
    chmod +x "$T/agent"
    run ip netns exec "$NSA" mpirun --mca plm_rsh_agent "$T/agent" --host 10.201.0.1:1,10.201.0.2:1 -np 2 \
        --mca btl self,tcp --mca btl_tcp_if_include 10.201.0.0/24 --mca oob_tcp_if_include 10.201.0.0/24 \
        "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 16 --steps 5 --threads 1 --momentum 0.9 --check-sync \
        -o "$T/ddp.mge"
    assert_success
    # rank 1 was started on the second host
    run cat "$T/agent.log"
    assert_output "10.201.0.2"
    "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$FM" --batch 32 --steps 5 --threads 1 --momentum 0.9 -o "$T/one.mge"
    run close "$T/one.mge" "$T/ddp.mge" max 1e-6
    echo "$output"
    assert_success
}

@test "mge-prof --train under mpirun: rank 0 reports each allreduce bucket and the overlap" {
    MGE_PROF="$MGE_BIN/mge-prof"
    ldd "$MGE_PROF" | grep -q libmpi || skip "mge-prof built without MPI"
    run "${MPIRUN[@]}" -np 2 "$MGE_PROF" "$SAMPLES/lenet.mgt" --train --batch 4 --iters 2 --threads 1 --top 3
    assert_success
    # one report (rank 0), its bucket table and the overlap line
    [ "$(grep -c '^allreduce over 2 ranks, per step' <<< "$output")" -eq 1 ]
    assert_line --regexp '^ +0 +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+$'
    assert_line --regexp '^ +total +[0-9]+ +[0-9.]+ +[0-9.]+$'
    assert_line --regexp '^overlapped with the backward pass: [0-9.]+% of the communication time$'
    # 3 warm-up steps, then 2 unprofiled and 2 profiled ones
    run --separate-stderr "${MPIRUN[@]}" -np 2 "$MGE_PROF" "$SAMPLES/lenet.mgt" --train --batch 4 --iters 2 --threads 1 --json
    assert_success
    # rank 0 only: one JSON document; the buckets add up to the total and
    # every gradient of the model is in one bucket
    py 'import json
d = json.loads(sys.stdin.read()); c = d["comm"]
assert c["ranks"] == 2 and c["steps"] == 7, c
assert c["buckets"] and sum(b["bytes"] for b in c["buckets"]) == c["bytes"] > 0, c
assert abs(sum(b["waited_ms"] for b in c["buckets"]) - c["waited_ms"]) < 1e-3, c
assert 0 <= c["overlap"] <= 1 and c["in_flight_ms"] >= c["waited_ms"] >= 0, c
assert sum(b["gradients"] for b in c["buckets"]) == 12, c
assert sum(r["op"] == "allreduce" for r in d["nodes"]) == 12, [r["op"] for r in d["nodes"]]' <<< "$output"
}

@test "mge-prof --train as one process: no communication section" {
    run "$MGE_BIN/mge-prof" "$SAMPLES/lenet.mgt" --train --batch 4 --iters 2 --threads 1
    assert_success
    refute_line --partial "allreduce"
    run --separate-stderr "$MGE_BIN/mge-prof" "$SAMPLES/lenet.mgt" --train --batch 4 --iters 2 --threads 1 --json
    assert_success
    py 'import json; d = json.loads(sys.stdin.read()); assert "comm" not in d, d.keys()' <<< "$output"
}
