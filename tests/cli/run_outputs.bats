#!/usr/bin/env bats
# mge-run's outputs as numpy reads them: --concat, .npz, --data's one
# record per output, the stream-reading recipes of mge-run(1); the hints for
# files given as NPY streams that are not; the random-weights warning.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
}

# lenet trained a little on the bundled sample (30 steps), as $T/m.mge
train_lenet() {
    "$MGE_BIN/mge-train" -q "$SAMPLES/lenet.mgt" --data "$FM/train" --steps 30 --optimizer adam -o "$T/m.mge"
}

@test "--data -o: np.load reads all 1000 rows, whatever --batch" {
    need_numpy
    train_lenet
    "$MGE_RUN" "$T/m.mge" --data "$FM/t10k" --batch 256 -o "$T/y.npy"
    "$MGE_RUN" "$T/m.mge" --data "$FM/t10k" --batch 1000 > "$T/y1000.npy"
    run py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
print(a.shape, a.dtype, np.array_equal(a, b))' "$T/y.npy" "$T/y1000.npy"
    assert_success
    assert_output "(1000, 10) float32 True"
}

@test "--concat joins a stream's steps into one record per output" {
    need_numpy
    write_two
    npys "$T/in.npy" f32:2x3:2 f32:2x3:5 f32:1x3:1 f32:1x3:3 f32:4x3:arange f32:4x3:1
    "$MGE_RUN" "$T/two.mgt" < "$T/in.npy" > "$T/steps.npy"
    "$MGE_RUN" "$T/two.mgt" --concat < "$T/in.npy" > "$T/one.npy"
    run py 'f = open(sys.argv[1], "rb"); steps = [np.load(f) for _ in range(6)]
g = open(sys.argv[2], "rb"); s = np.load(g); p = np.load(g)
assert not g.read(), "more than two records"
assert np.array_equal(s, np.concatenate(steps[0::2])), s
assert np.array_equal(p, np.concatenate(steps[1::2])), p
print(s.shape, p.shape)' "$T/steps.npy" "$T/one.npy"
    assert_success
    assert_output "(7, 3) (7, 3)"
}

@test "-o FILE.npz: one array per output, named after it" {
    need_numpy
    write_two
    npys "$T/in.npy" f32:2x3:2 f32:2x3:5 f32:1x3:1 f32:1x3:3
    "$MGE_RUN" "$T/two.mgt" -o "$T/out.npz" < "$T/in.npy"
    run py 'd = np.load(sys.argv[1])
print(sorted(d.files), d["sum"][:, 0].tolist(), d["prod"][:, 0].tolist())' "$T/out.npz"
    assert_success
    assert_output "['prod', 'sum'] [7.0, 7.0, 4.0] [10.0, 10.0, 3.0]"
}

@test "a scalar output gathers into one value per step" {
    cat > "$T/s.mgt" <<'NET'
input x : f32[N,3]
s = sum(x)
output s
NET
    npys "$T/in.npy" f32:2x3:1 f32:3x3:2
    "$MGE_RUN" "$T/s.mgt" --concat -o "$T/s.npy" < "$T/in.npy"
    run npy_show "$T/s.npy"
    assert_output "f32 2 6.0"
}

@test "--concat with records of different shapes fails and leaves no file" {
    cat > "$T/tr.mgt" <<'NET'
input x : f32[N,3]
y = transpose(x, perm=[1, 0])
output y
NET
    npys "$T/in.npy" f32:2x3:1 f32:4x3:1
    run "$MGE_RUN" "$T/tr.mgt" --concat -o "$T/out.npy" < "$T/in.npy"
    assert_failure 1
    assert_output --partial "output 'y' is f32[3,4] in step 1 but f32[N,2] in the steps before"
    [ ! -e "$T/out.npy" ]
    # without --concat the same stream is fine
    run "$MGE_RUN" "$T/tr.mgt" -o "$T/out.npy" < "$T/in.npy"
    assert_success
}

@test "the stream-reading recipes of mge-run(1) read every record" {
    need_numpy
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1 f32:3x4:2 f32:1x4:3
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/y.npy"
    # from a file: np.load in a loop on one file object
    run py 'n = []
with open(sys.argv[1], "rb") as f:
    while f.peek(1): y = np.load(f); n.append(y.shape[0])
print(n)' "$T/y.npy"
    assert_output "[2, 3, 1]"
    # from a pipe: into memory first (np.load seeks)
    run bash -c "'$MGE_RUN' '$T/mlp.mge' < '$T/x.npy' | '$PY' -c 'import io, sys, numpy as np
n = []
f = io.BytesIO(sys.stdin.buffer.read())
while f.tell() < len(f.getbuffer()): y = np.load(f); n.append(y.shape[0])
print(n)'"
    assert_output "[2, 3, 1]"
}

@test "an .npz given as an NPY stream says to use --data" {
    need_numpy
    make_mlp_mge
    py 'np.savez(sys.argv[1], x=np.zeros((2, 4), np.float32))' "$T/x.npz"
    run "$MGE_RUN" "$T/mlp.mge" --input "$T/x.npz"
    assert_failure 1
    assert_output --partial "x.npz: error: step 0, input 'x': not an NPY record (bad magic): this is a zip archive; give datasets with --data FILE"
    assert_output --partial "--data FILE"
    # on stdin, a file: the same
    run bash -c "'$MGE_RUN' '$T/mlp.mge' < '$T/x.npz'"
    assert_output --partial "--data FILE"
    # through a pipe the content is gone: a general hint
    run bash -c "cat '$T/x.npz' | '$MGE_RUN' '$T/mlp.mge'"
    assert_failure 1
    assert_output --partial "go with --data, images with --image"
    # an image and an IDX file are named too
    printf '\x89PNG\r\n\x1a\nxxxxxxxx' > "$T/cat.png"
    run "$MGE_RUN" "$T/mlp.mge" --input "$T/cat.png"
    assert_output --partial "this is a PNG image"
    assert_output --partial "give images with --image FILE"
    run "$MGE_RUN" "$T/mlp.mge" --input "$FM/t10k-labels-idx1-ubyte.gz"
    assert_output --partial "this is gzip-compressed data; give datasets (IDX .gz, .tar.gz, .npy.gz) with --data FILE"
}

@test "a text model without weights warns that it runs with random weights; -q is silent" {
    [ -f "$SAMPLES/lenet.mgt" ] || skip "samples/nets/lenet.mgt missing"
    npys "$T/x.npy" f32:1x1x28x28:rand
    run --separate-stderr bash -c "'$MGE_RUN' '$SAMPLES/lenet.mgt' < '$T/x.npy' > '$T/y.npy'"
    assert_success
    [[ "$stderr" == *"lenet.mgt: warning: "*" parameters have no values: running with random weights from seed 0"* ]]
    run npy_show "$T/y.npy"
    assert_output --regexp '^f32 1x10 '
    run --separate-stderr bash -c "'$MGE_RUN' -q '$SAMPLES/lenet.mgt' < '$T/x.npy' > /dev/null"
    assert_success
    [ -z "$stderr" ]
}
