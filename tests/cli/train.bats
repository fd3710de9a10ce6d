#!/usr/bin/env bats
# mge-train: options, data sources, bad input, checkpoints, determinism.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    MGE_TRAIN="$MGE_BIN/mge-train"
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
    MLP="$SAMPLES/mlp.mgt"
}

# small.npz: n samples of a learnable rule (label = argmax of the first 3 features).
write_small_data() {
    local n=${1:-256}
    py 'n = int(sys.argv[2]); r = np.random.default_rng(0)
x = r.standard_normal((n, 4)).astype(np.float32)
np.savez(sys.argv[1], x=x, label=np.argmax(x[:, :3], 1).astype(np.int32))' "$T/small.npz" "$n"
}

@test "mge-train --help and --version" {
    run --separate-stderr "$MGE_TRAIN" --help
    assert_success
    assert_output --partial "Usage: mge-train"
    assert_output --partial "--checkpoint-every"
    [ -z "$stderr" ]
    run "$MGE_TRAIN" --version
    assert_output "mge-train (mge) 0.1.0"
}

@test "usage errors exit 2 with a hint" {
    write_small
    run "$MGE_TRAIN" "$T/small.mgt" -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--data"
    run "$MGE_TRAIN" "$T/small.mgt" --data x.npz --optimizer adam --momentum 0.9 -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--momentum does not apply to --optimizer adam"
    run "$MGE_TRAIN" "$T/small.mgt" --data x.npz --betas 0.9,0.99 -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--betas does not apply to --optimizer sgd"
    run "$MGE_TRAIN" "$T/small.mgt" --data x.npz --epochs 1 --steps 3 -o "$T/o.mge"
    assert_failure 2
    run "$MGE_TRAIN" "$T/small.mgt" --data x.npz --optimizer rmsprop -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "expected sgd, adam or adamw"
    run "$MGE_TRAIN" "$T/small.mgt" --data x.npz --nesterov -o "$T/o.mge"
    assert_failure 2
    run "$MGE_TRAIN" "$T/small.mgt" --data x.npz --batch 0 -o "$T/o.mge"
    assert_failure 2
    run "$MGE_TRAIN" "$T/small.mgt" --data x.npz --log out.txt -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "Try 'mge-train --help'"
    [ ! -e "$T/o.mge" ]
}

@test "a bad --schedule is a usage error" {
    need_numpy
    write_small
    write_small_data
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --schedule wobbly -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "wobbly"
    [ ! -e "$T/o.mge" ]
}

@test "trains a small classifier from .npz: loss falls, accuracy rises, mge-run reads the result" {
    need_numpy
    write_small
    write_small_data 512
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --epochs 30 --batch 32 --optimizer adam --lr 0.01 \
        --log "$T/log.jsonl" -o "$T/o.mge"
    assert_success
    [ -s "$T/o.mge" ]
    # the first epoch's loss is well above the last's, and the last accuracy is high
    pyq 'import json
ep = [json.loads(l) for l in open(sys.argv[1]) if "\"epoch\"" in l and "\"kind\":\"epoch\"" in l]
assert len(ep) == 30, len(ep)
assert ep[-1]["loss"] < 0.5 * ep[0]["loss"], (ep[0], ep[-1])
assert ep[-1]["accuracy"] > 0.9, ep[-1]' "$T/log.jsonl"
    npys "$T/x.npy" f32:5x4:rand
    run "$MGE_RUN" "$T/o.mge" --input x="$T/x.npy" -o "$T/y.npy"
    assert_success
}

@test "trains the sample MLP on IDX files (prefix form), quiet in a pipe" {
    run --separate-stderr "$MGE_TRAIN" "$MLP" --data "$FM/train" --steps 5 --batch 16 -o "$T/m.mge"
    assert_success
    [ -z "$stderr" ]
    run "$MGE_DUMP" "$T/m.mge"
    assert_success
}

@test "-v prints epoch summaries with validation in a pipe; --log csv" {
    run --separate-stderr "$MGE_TRAIN" "$MLP" --data "$FM/train" --val "$FM/t10k" --steps 4 --batch 16 \
        --log "$T/log.csv" -v -o "$T/m.mge"
    assert_success
    [[ "$stderr" == *"epoch 1/1: train loss"*"val loss"* ]]
    run head -1 "$T/log.csv"
    assert_output "kind,epoch,step,loss,accuracy,lr,samples_per_s,seconds,val_loss,val_accuracy"
    run grep -c '^step,' "$T/log.csv"
    assert_output "4"
}

@test "bad input: data that does not fit the model is an error and nothing is overwritten" {
    need_numpy
    write_small
    echo keep > "$T/o.mge"
    py 'np.savez(sys.argv[1], x=np.zeros((8, 5), np.float32), label=np.zeros(8, np.int32))' "$T/wide.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/wide.npz" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "wide.npz: error:"
    assert_output --partial "'x'"
    py 'np.savez(sys.argv[1], x=np.zeros((8, 4), np.float32), label=np.zeros(8, np.float32))' "$T/flab.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/flab.npz" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "label"
    run cat "$T/o.mge"
    assert_output "keep"
}

@test "bad input: an empty dataset" {
    need_numpy
    write_small
    py 'np.savez(sys.argv[1], x=np.zeros((0, 4), np.float32), label=np.zeros(0, np.int32))' "$T/empty.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/empty.npz" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "empty"
    [ ! -e "$T/o.mge" ]
}

@test "bad input: labels out of range name the range and the classes" {
    need_numpy
    write_small
    py 'np.savez(sys.argv[1], x=np.zeros((8, 4), np.float32), label=np.arange(8, dtype=np.int32))' "$T/lab.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/lab.npz" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "[0, 7]"
    assert_output --partial "3 classes"
    [ ! -e "$T/o.mge" ]
}

@test "bad input: missing data file and unknown format" {
    write_small
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/nope.npz" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "nope.npz"
    echo "hello" > "$T/junk.bin"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/junk.bin" -o "$T/o.mge"
    assert_failure 1
    [ ! -e "$T/o.mge" ]
}

@test "bad input: --resume from another architecture, or without state" {
    need_numpy
    write_small
    write_small_data
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 2 -o "$T/a.mge"
    sed 's/out=8/out=9/' "$T/small.mgt" > "$T/other.mgt"
    cp "$T/a.mge" "$T/keep.mge"
    run "$MGE_TRAIN" "$T/other.mgt" --data "$T/small.npz" --steps 4 --resume "$T/a.mge" -o "$T/a.mge"
    assert_failure 1
    assert_output --partial "another architecture"
    assert_output --partial "fc1.weight"
    cmp "$T/a.mge" "$T/keep.mge"
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 2 --no-state -o "$T/ns.mge"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 4 --resume "$T/ns.mge" -o "$T/r.mge"
    assert_failure 1
    assert_output --partial "not a training checkpoint"
    [ "$(stat -c %s "$T/ns.mge")" -lt "$(stat -c %s "$T/a.mge")" ]
}

@test "a diverging run stops with the step named; the output holds the last good step" {
    need_numpy
    write_small
    write_small_data
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 200 --lr 1e30 --checkpoint-every 1 --batch 8 \
        -o "$T/n.mge"
    assert_failure 1
    assert_output --regexp "step ([0-9]+): (the loss is (NaN|infinite)|the update made parameter [a-z0-9.]+ non-finite)"
    [[ "$output" =~ "holds the weights of step "([0-9]+) ]] || [[ "$output" == *"nothing written"* ]]
    if [ -e "$T/n.mge" ]; then "$MGE_DUMP" "$T/n.mge" > /dev/null; fi
}

@test "same seed and threads: bit-identical weights; another seed differs" {
    need_numpy
    write_small
    write_small_data
    for s in 1 1 2; do
        "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 20 --batch 16 --optimizer adam --seed $s \
            --threads 2 -o "$T/s$s-$((n++)).mge"
    done
    cmp "$T/s1-0.mge" "$T/s1-1.mge"
    ! cmp -s "$T/s1-0.mge" "$T/s2-2.mge"
}

@test "stopped and resumed ends with the same weights as uninterrupted" {
    need_numpy
    write_small
    write_small_data
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 40 --batch 16 --optimizer adam --seed 3 -o "$T/full.mge"
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 17 --batch 16 --optimizer adam --seed 3 -o "$T/half.mge"
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 40 --batch 16 --resume "$T/half.mge" -o "$T/rest.mge"
    cmp "$T/full.mge" "$T/rest.mge"
}

@test "kill -9 during checkpointed training leaves a resumable checkpoint" {
    need_numpy
    write_small
    write_small_data 4096
    # about 5 s of steps with a checkpoint every 50 (each written, synced, renamed)
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 200000 --batch 8 --optimizer sgd --momentum 0.9 \
        --seed 5 -o "$T/ref.mge"
    for delay in 0.2 0.9; do
        rm -f "$T/k.mge"
        "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 200000 --batch 8 --optimizer sgd --momentum 0.9 \
            --seed 5 --checkpoint-every 50 -o "$T/k.mge" &
        pid=$!
        # wait for the first checkpoint, then kill at an arbitrary moment
        for _ in $(seq 200); do [ -e "$T/k.mge" ] && break; sleep 0.02; done
        sleep "$delay"
        kill -9 $pid 2>/dev/null || true
        wait $pid 2>/dev/null || true
        [ -e "$T/k.mge" ]
        "$MGE_DUMP" "$T/k.mge" > /dev/null
        # it was killed mid-run, not after the end
        step=$("$MGE_DUMP" "$T/k.mge" | sed -n 's/^meta train.step = //p')
        [ "$step" -lt 200000 ]
        # resuming (optimizer settings come from the checkpoint) completes the run exactly
        "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 200000 --checkpoint-every 50 \
            --resume "$T/k.mge" -o "$T/k.mge"
        cmp "$T/ref.mge" "$T/k.mge"
    done
}

@test "on a terminal: a progress bar and an epoch summary on stderr" {
    command -v script > /dev/null || skip "script (util-linux) not installed: no pseudo-terminal to test with"
    need_numpy
    write_small
    write_small_data
    run script -qec "'$MGE_TRAIN' '$T/small.mgt' --data '$T/small.npz' --steps 20 --batch 8 -o '$T/p.mge'" /dev/null
    assert_success
    assert_output --partial "epoch 1/1 ["
    assert_output --partial "samples/s ETA"
    assert_output --partial "mge-train: epoch 1/1: train loss"
    # -q silences both
    run script -qec "'$MGE_TRAIN' '$T/small.mgt' --data '$T/small.npz' --steps 20 --batch 8 -q -o '$T/p.mge'" /dev/null
    assert_success
    assert_output ""
}

@test "data from an NPY stream on stdin and from a tar of NPY files train the same" {
    need_numpy
    write_small
    write_small_data 64
    # the stream: records x, label, x, label (two chunks of 32 samples)
    py 'd = np.load(sys.argv[1]); f = open(sys.argv[2], "wb")
for s in (slice(0, 32), slice(32, 64)):
    np.save(f, d["x"][s]); np.save(f, d["label"][s])
f.close()
import tarfile
np.save(sys.argv[3] + "/x.npy", d["x"]); np.save(sys.argv[3] + "/label.npy", d["label"])
with tarfile.open(sys.argv[4], "w") as t:
    t.add(sys.argv[3] + "/x.npy", "x.npy"); t.add(sys.argv[3] + "/label.npy", "label.npy")' \
        "$T/small.npz" "$T/stream.npy" "$T" "$T/data.tar"
    opts=(--steps 8 --batch 16 --optimizer adam --seed 4)
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" "${opts[@]}" -o "$T/a.mge"
    "$MGE_TRAIN" "$T/small.mgt" --data - "${opts[@]}" -o "$T/b.mge" < "$T/stream.npy"
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/data.tar" "${opts[@]}" -o "$T/c.mge"
    cmp "$T/a.mge" "$T/b.mge"
    cmp "$T/a.mge" "$T/c.mge"
}

@test "--val-split holds out data for validation; --weights binds initial values by name" {
    need_numpy
    write_small
    write_small_data 200
    run --separate-stderr "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --val-split 0.25 --steps 5 --batch 10 \
        -v -o "$T/v.mge"
    assert_success
    [[ "$stderr" == *"150 samples"* ]]
    [[ "$stderr" == *"val loss"* ]]
    # initial weights from an npz: zero weights give a first loss of log(3)
    py 'np.savez(sys.argv[1], **{"fc1.weight": np.zeros((8, 4), np.float32), "fc1.bias": np.zeros(8, np.float32),
    "fc2.weight": np.zeros((3, 8), np.float32), "fc2.bias": np.zeros(3, np.float32)})' "$T/w.npz"
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --weights "$T/w.npz" --steps 1 --log "$T/l.jsonl" -o "$T/w.mge"
    pyq 'import json, math; l = json.loads(open(sys.argv[1]).readline())
assert abs(l["loss"] - math.log(3)) < 1e-6, l' "$T/l.jsonl"
    py 'np.savez(sys.argv[1], **{"fc1.weight": np.zeros((9, 4), np.float32)})' "$T/bad.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --weights "$T/bad.npz" --steps 1 -o "$T/x.mge"
    assert_failure 1
    assert_output --partial "fc1.weight"
    [ ! -e "$T/x.mge" ]
}

@test "mge-dump counts the model's parameters, not the optimizer state a checkpoint carries" {
    need_numpy
    write_small
    write_small_data
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 2 --optimizer adam -o "$T/a.mge"
    run "$MGE_DUMP" "$T/a.mge"
    assert_success
    # fc1 8*4+8, fc2 3*8+3: 67 values, although the file also holds 2*67 Adam moments
    assert_output --partial "# params:  67 values, 268 bytes"
    assert_output --partial "fc1.weight.__opt.exp_avg"
}
