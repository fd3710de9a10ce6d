#!/usr/bin/env bats
# mge-train when things go wrong: updates that overflow, non-finite data and
# validation losses, failed writes (log, output, stderr), numeric options
# out of range.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    MGE_TRAIN="$MGE_BIN/mge-train"
}

# small.npz: 256 samples of a learnable rule (label = argmax of the first 3 features).
write_small_data() {
    py 'r = np.random.default_rng(0)
x = r.standard_normal((256, 4)).astype(np.float32)
np.savez(sys.argv[1], x=x, label=np.argmax(x[:, :3], 1).astype(np.int32))' "$T/small.npz"
}

# jump.npz: a zero sample, then samples of 1e20. At --lr 1e18, batch 1, in
# order: step 1 moves only the biases (finite), step 2 has a finite loss but
# an update of about 1e38 * 1e20 on fc1.weight, which overflows f32.
write_jump_data() {
    py 'x = np.zeros((4, 4), np.float32); x[1:] = 1e20
np.savez(sys.argv[1], x=x, label=np.array([0, 1, 2, 0], np.int32))' "$T/jump.npz"
}
JUMP=(--lr 1e18 --batch 1 --no-shuffle)

# Counts of NaN/inf per parameter of a model, "0" when there are none.
nonfinite_params() {
    "$MGE_DUMP" "$1" --params "$T/p.npz" > /dev/null
    py 'd = np.load(sys.argv[1]); print(sum(int((~np.isfinite(v)).sum()) for v in d.values()))' "$T/p.npz"
}

train_step_of() {
    "$MGE_DUMP" "$1" | sed -n 's/^meta train.step = //p'
}

@test "an update that overflows on the first step: error naming step and parameter, nothing written" {
    need_numpy
    write_small
    py 'r = np.random.default_rng(0); x = r.standard_normal((64, 4)).astype(np.float32) * 1e10
np.savez(sys.argv[1], x=x, label=np.argmax(x[:, :3], 1).astype(np.int32))' "$T/big.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/big.npz" --lr 1e30 --steps 1 -o "$T/o.mge"
    assert_failure 1
    assert_output --regexp "small.mgt: error: step 1: the update made parameter fc[12]\.(weight|bias) non-finite"
    assert_output --partial "nothing written"
    [ ! -e "$T/o.mge" ]
}

@test "an update that overflows later: the output holds the finite weights of the step before, and resumes" {
    need_numpy
    write_small
    write_jump_data
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/jump.npz" "${JUMP[@]}" --steps 4 --log "$T/l.jsonl" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "error: step 2: the update made parameter fc1.weight non-finite"
    assert_output --partial "holds the weights of step 1"
    [ "$(train_step_of "$T/o.mge")" = 1 ]
    [ "$(nonfinite_params "$T/o.mge")" = 0 ]
    # the log has the good step only
    run grep -c '"kind":"step"' "$T/l.jsonl"
    assert_output 1
    # mge-run on it gives numbers, and --resume continues from step 1
    npys "$T/x.npy" f32:3x4:rand
    "$MGE_RUN" "$T/o.mge" --input x="$T/x.npy" -o "$T/y.npy"
    py 'y = np.load(sys.argv[1]); assert np.isfinite(y).all(), y' "$T/y.npy"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/jump.npz" --steps 4 --resume "$T/o.mge" --lr 0 -o "$T/r.mge"
    assert_success
    [ "$(train_step_of "$T/r.mge")" = 4 ]
}

@test "--checkpoint-every: no checkpoint holds non-finite weights, and mge-run on the last one is finite" {
    need_numpy
    write_small
    write_jump_data
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/jump.npz" "${JUMP[@]}" --steps 4 --checkpoint-every 1 -o "$T/c.mge"
    assert_failure 1
    assert_output --partial "step 2: the update made parameter fc1.weight non-finite"
    [ "$(train_step_of "$T/c.mge")" = 1 ]
    [ "$(nonfinite_params "$T/c.mge")" = 0 ]
    npys "$T/x.npy" f32:3x4:rand
    "$MGE_RUN" "$T/c.mge" --input x="$T/x.npy" -o "$T/y.npy"
    py 'y = np.load(sys.argv[1]); assert np.isfinite(y).all(), y' "$T/y.npy"
}

@test "a non-finite loss stops the run; the output holds the step before" {
    need_numpy
    write_small
    write_jump_data
    # resumed at step 1 with lr 1: step 2 is finite, step 3's logits overflow
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/jump.npz" "${JUMP[@]}" --steps 1 -o "$T/s1.mge"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/jump.npz" --batch 1 --no-shuffle --steps 4 --resume "$T/s1.mge" --lr 1 \
        -o "$T/o.mge"
    assert_failure 1
    assert_output --regexp "error: step 3: the loss is (NaN|infinite); the output, .*o.mge, holds the weights of step 2"
    [ "$(train_step_of "$T/o.mge")" = 2 ]
    [ "$(nonfinite_params "$T/o.mge")" = 0 ]
}

@test "initial weights or a checkpoint that are not finite are refused before training" {
    need_numpy
    write_small
    write_small_data
    py 'w = np.zeros((8, 4), np.float32); w[1, 2] = np.inf
np.savez(sys.argv[1], **{"fc1.weight": w})' "$T/w.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --weights "$T/w.npz" --steps 2 -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "w.npz: error: parameter fc1.weight holds non-finite values (element 6 is inf) before training"
    [ ! -e "$T/o.mge" ]
    # a checkpoint with an inf (as an earlier version could write): its text
    # form with the values bound from an edited .npz
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 1 -o "$T/c.mge"
    "$MGE_DUMP" "$T/c.mge" --params "$T/c.npz" | grep -v '^#' | sed '/^input label/a weights "bad.npz"' > "$T/bad.mgt"
    py 'd = dict(np.load(sys.argv[1])); d["fc2.bias"][1] = np.inf; np.savez(sys.argv[2], **d)' "$T/c.npz" "$T/bad.npz"
    "$MGE_OPT" "$T/bad.mgt" -o "$T/bad.mge"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 3 --resume "$T/bad.mge" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "bad.mge: error: parameter fc2.bias holds non-finite values (element 1 is inf) before training"
    [ ! -e "$T/o.mge" ]
}

@test "--val data with NaN or inf is an error before training, naming the array and the sample" {
    need_numpy
    write_small
    write_small_data
    py 'd = dict(np.load(sys.argv[1])); d["x"][5, 2] = np.nan; np.savez(sys.argv[2], **d)
d["x"][5, 2] = 0; d["x"][9, 0] = -np.inf; np.savez(sys.argv[3], **d)' "$T/small.npz" "$T/vnan.npz" "$T/vinf.npz"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --val "$T/vnan.npz" --steps 2 -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "vnan.npz: error: the validation data holds NaN in 'x' (sample 5)"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --val "$T/vinf.npz" --steps 2 -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "the validation data holds -inf in 'x' (sample 9)"
    # the training data too (--val-split takes its validation part from it)
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/vnan.npz" --val-split 0.5 --steps 2 -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "vnan.npz: error: the training data holds NaN in 'x' (sample 5)"
    [ ! -e "$T/o.mge" ]
}

@test "a non-finite validation loss shows as nan in the summary and both logs, with a warning" {
    need_numpy
    write_small
    write_small_data
    # finite inputs the model overflows on
    py 'np.savez(sys.argv[1], x=np.full((8, 4), 3e38, np.float32), label=np.zeros(8, np.int32))' "$T/vbig.npz"
    run --separate-stderr "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --val "$T/vbig.npz" --epochs 2 -v \
        --log "$T/l.jsonl" -o "$T/o.mge"
    assert_success
    [[ "$stderr" == *"vbig.npz: warning: the validation loss is NaN after epoch 1"* ]]
    [[ "$stderr" == *"epoch 1/2: train loss "*" | val loss nan acc "* ]]
    [[ "$stderr" == *"epoch 2/2: train loss "*" | val loss nan acc "* ]]
    # one warning, not one per epoch
    [ "$(grep -c warning <<< "$stderr")" = 1 ]
    pyq 'import json
ep = [json.loads(l) for l in open(sys.argv[1]) if "\"kind\":\"epoch\"" in l]
assert len(ep) == 2 and all("val_loss" in e and e["val_loss"] is None for e in ep), ep' "$T/l.jsonl"
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --val "$T/vbig.npz" --steps 2 --log "$T/l.csv" -o "$T/o.mge" 2> /dev/null
    run tail -1 "$T/l.csv"
    assert_output --regexp '^epoch,1,2,[^,]+,[^,]+,,,[^,]+,nan,[0-9.]+$'
}

@test "--log on a full disk: an error naming the log, the run stops and writes nothing" {
    [ -w /dev/full ] || skip "no /dev/full on this system"
    need_numpy
    write_small
    write_small_data
    ln -s /dev/full "$T/full.jsonl"
    # 200 records fill stdio's buffer long before the end: a write fails mid-run
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 200 --batch 8 --log "$T/full.jsonl" -o "$T/o.mge"
    assert_failure 1
    assert_output --regexp "full.jsonl: error: writing the log failed: No space left on device; stopping after step ([0-9]+): nothing written"
    [[ "$output" =~ "after step "([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -lt 200 ]
    [ ! -e "$T/o.mge" ]
}

@test "--log whose final flush and close fail: exit 1, nothing written; a checkpoint flush fails first" {
    [ -w /dev/full ] || skip "no /dev/full on this system"
    need_numpy
    write_small
    write_small_data
    ln -s /dev/full "$T/full.csv"
    # three short records stay in the buffer until the log is closed (unless
    # a stalled machine takes a second, when the timed flush comes first)
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 3 --log "$T/full.csv" -o "$T/o.mge"
    assert_failure 1
    assert_output --regexp "full.csv: error: writing the log failed: No space left on device; stopping after step [123]: nothing written"
    [ ! -e "$T/o.mge" ]
    # the log is flushed before each checkpoint, so none is written past a failed log
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 20 --batch 8 --checkpoint-every 5 \
        --log "$T/full.csv" -o "$T/o.mge"
    assert_failure 1
    assert_output --partial "stopping after step 5: nothing written"
    [ ! -e "$T/o.mge" ]
}

@test "a failed output or checkpoint write is an error with the path and the system's message" {
    [ -w /dev/full ] || skip "no /dev/full on this system"
    need_numpy
    write_small
    write_small_data
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 3 -o /dev/full
    assert_failure 1
    assert_output --partial "/dev/full: error: write failed: No space left on device"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 6 --batch 8 --checkpoint-every 2 -o /dev/full
    assert_failure 1
    assert_output --partial "/dev/full: error: write failed: No space left on device"
    run bash -c "'$MGE_TRAIN' '$T/small.mgt' --data '$T/small.npz' --steps 3 -o - > /dev/full"
    assert_failure 1
    assert_output --partial "write failed: No space left on device"
}

@test "messages that cannot be written to stderr fail the run" {
    [ -w /dev/full ] || skip "no /dev/full on this system"
    need_numpy
    write_small
    write_small_data
    run bash -c "'$MGE_TRAIN' '$T/small.mgt' --data '$T/small.npz' --steps 3 -v -o '$T/o.mge' 2> /dev/full"
    assert_failure 1
    # without -v there is nothing to say in a pipe, so nothing fails
    run bash -c "'$MGE_TRAIN' '$T/small.mgt' --data '$T/small.npz' --steps 3 -o '$T/o.mge' 2> /dev/full"
    assert_success
}

@test "numeric options out of range are usage errors naming the flag and the value" {
    need_numpy
    write_small
    write_small_data
    bad=("--lr 1e300" "--lr inf" "--lr nan" "--lr -0.1" "--lr 1e-60" "--lr 1e400"
        "--momentum 1.5" "--momentum -1" "--momentum nan" "--dampening 2" "--dampening -0.5"
        "--optimizer adam --eps inf" "--optimizer adam --eps -1" "--optimizer adam --betas 0.9,1"
        "--optimizer adam --betas nan,0.9" "--optimizer adam --betas 0.9,-0.1"
        "--weight-decay nan" "--weight-decay 1e39" "--weight-decay -1"
        "--clip-norm 0" "--clip-norm inf" "--clip-norm -1"
        "--warmup -1" "--warmup 16777217" "--batch 0" "--batch 16777217" "--epochs 0" "--steps 0"
        "--steps 16777217" "--checkpoint-every 0" "--val-split 1" "--val-split nan"
        "--normalize 0.5,0" "--normalize 0.5,1e-50" "--normalize inf,1")
    for args in "${bad[@]}"; do
        read -ra a <<< "$args"
        run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" "${a[@]}" -o "$T/o.mge"
        [ "$status" -eq 2 ] || { echo "$args: status $status: $output"; false; }
        flag=${a[-2]} val=${a[-1]}
        [[ "$output" == *"$flag $val: "* ]] || { echo "$args: $output"; false; }
    done
    # what can only be known with the data: the step count and the schedule's peak rate
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --epochs 16000000 -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--epochs 16000000: 16000000 epochs of 4 batches are 64000000 steps, more than 16777216"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 100 --schedule step:1:10 -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--schedule step:1:10: the learning rate would reach"
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 10 --schedule cosine:1e300 -o "$T/o.mge"
    assert_failure 2
    assert_output --partial "--schedule cosine:1e300: the learning rate would reach 1e+300"
    [ ! -e "$T/o.mge" ]
    # a checkpoint's values are checked as well (exit 1: they are not options)
    "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 1 -o "$T/c.mge"
    "$MGE_DUMP" "$T/c.mge" --params "$T/c.npz" | grep -v '^#' | sed '/^input label/a weights "c.npz"' > "$T/c.mgt"
    for kv in "train.lr 1e300" "train.momentum \"nan\"" "train.batch -3" "train.warmup 1e99"; do
        read -r k v <<< "$kv"
        sed "s/^meta $k = .*/meta $k = $v/" "$T/c.mgt" > "$T/e.mgt"
        "$MGE_OPT" "$T/e.mgt" -o "$T/e.mge"
        run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 3 --resume "$T/e.mge" -o "$T/o.mge"
        [ "$status" -eq 1 ] || { echo "$kv: status $status: $output"; false; }
        [[ "$output" == *"e.mge: error: the checkpoint's $k = "* ]] || { echo "$kv: $output"; false; }
    done
    [ ! -e "$T/o.mge" ]
    # the edges are fine
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/small.npz" --steps 2 --momentum 1 --dampening 1 --lr 0 -o "$T/o.mge"
    assert_success
}

@test "going back to the last good step gives the bits of a run that stopped there" {
    need_numpy
    # five ordinary samples, then inputs of 1e30 at a rate that jumps to 1e18 after step 5
    py 'r = np.random.default_rng(1); x = r.standard_normal((8, 1, 28, 28)).astype(np.float32); x[5:] = 1e30
np.savez(sys.argv[1], x=x, label=np.arange(8, dtype=np.int32))' "$T/late.npz"
    opts=(--batch 1 --no-shuffle --momentum 0.9 --lr 0.01 --schedule step:5:1e20 --seed 2)
    run "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$T/late.npz" "${opts[@]}" --steps 8 -o "$T/a.mge"
    assert_failure 1
    assert_output --regexp "step 6: the (update made parameter fc1.weight non-finite|loss is)"
    assert_output --partial "holds the weights of step 5"
    "$MGE_TRAIN" "$SAMPLES/mlp.mgt" --data "$T/late.npz" "${opts[@]}" --steps 5 -o "$T/b.mge"
    # the same bytes: weights, momentum buffers, metadata
    cmp "$T/a.mge" "$T/b.mge"
}

@test "on sim the guard works as on the cpu: the same error and the same last good weights" {
    need_numpy
    write_small
    write_jump_data
    run "$MGE_TRAIN" "$T/small.mgt" --data "$T/jump.npz" "${JUMP[@]}" --steps 4 --threads 1 -o "$T/cpu.mge"
    assert_failure 1
    local cpu_out=$output
    MGE_SIM_OPS=all run "$MGE_TRAIN" "$T/small.mgt" --data "$T/jump.npz" "${JUMP[@]}" --steps 4 --threads 1 \
        --device sim -o "$T/sim.mge"
    assert_failure 1
    assert_output --partial "error: step 2: the update made parameter fc1.weight non-finite"
    [ "$output" = "${cpu_out//cpu.mge/sim.mge}" ]
    cmp "$T/cpu.mge" "$T/sim.mge"
}
