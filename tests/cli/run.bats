#!/usr/bin/env bats
# mge-run: steps over NPY streams, inputs and outputs, --check.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# numpy forward of the test MLP from exported parameters: ref.py W.npz X.npy OUT.npy
mlp_ref() {
    py 'import os
w = np.load(sys.argv[1]); f = open(sys.argv[2], "rb"); g = open(sys.argv[3], "wb")
while f.tell() < os.path.getsize(sys.argv[2]):
    x = np.load(f)
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    np.save(g, (h @ w["fc2.weight"].T + w["fc2.bias"]).astype(np.float32))
g.close()' "$@"
}

@test "mge-run --help and --version" {
    run --separate-stderr "$MGE_RUN" --help
    assert_success
    assert_output --partial "Usage: mge-run"
    run "$MGE_RUN" --version
    assert_output "mge-run (mge) 0.1.0"
}

@test "mge-run matches numpy over several steps with varying batch" {
    need_numpy
    make_mlp_mge
    "$MGE_DUMP" "$T/mlp.mge" --params "$T/w.npz" > /dev/null
    npy_records "$T/x.npy" "np.random.rand(2,4).astype(np.float32)" \
        "np.random.rand(5,4).astype(np.float32)" "np.random.rand(1,4).astype(np.float32)"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/y.npy"
    mlp_ref "$T/w.npz" "$T/x.npy" "$T/ref.npy"
    run py 'f = open(sys.argv[1], "rb"); g = open(sys.argv[2], "rb")
for i in range(3):
    a = np.load(f); b = np.load(g)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape)
    assert np.allclose(a, b, atol=1e-5, rtol=1e-4), (a, b)
print(len(f.read()), len(g.read()))' "$T/y.npy" "$T/ref.npy"
    assert_success
    assert_output "0 0"
}

@test "the text form runs directly and gives the same result as its .mge" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.ones((3,4), np.float32)"
    "$MGE_RUN" "$T/mlp.mgt" < "$T/x.npy" > "$T/a.npy"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/b.npy"
    cmp "$T/a.npy" "$T/b.npy"
}

@test "--check passes against a numpy reference and fails on a perturbed one" {
    need_numpy
    make_mlp_mge
    "$MGE_DUMP" "$T/mlp.mge" --params "$T/w.npz" > /dev/null
    npy_records "$T/x.npy" "np.random.rand(4,4).astype(np.float32)" "np.random.rand(3,4).astype(np.float32)"
    mlp_ref "$T/w.npz" "$T/x.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" < "$T/x.npy"
    assert_success
    [ -z "$output" ]                        # no -o: nothing on stdout
    [[ "$stderr" == *"max abs err"*"max rel err"* ]]
    py 'f = open(sys.argv[1], "rb"); a = np.load(f); b = np.load(f)
b[2, 1] += 0.5
g = open(sys.argv[2], "wb"); np.save(g, a); np.save(g, b)' "$T/ref.npy" "$T/bad.npy"
    run --separate-stderr "$MGE_RUN" "$T/mlp.mge" --check "$T/bad.npy" < "$T/x.npy"
    assert_failure 1
    [[ "$stderr" == *"step 1"* ]]
    [[ "$stderr" == *"element 7"* ]]
    [[ "$stderr" == *"max abs err 0.5"* ]]
    # a loose tolerance accepts it
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/bad.npy" --atol 0.6 < "$T/x.npy"
    assert_success
}

@test "--check with -o still writes the outputs" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.ones((2,4), np.float32)"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/ref.npy"
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" -o "$T/out.npy" < "$T/x.npy"
    assert_success
    cmp "$T/ref.npy" "$T/out.npy"
}

@test "--check fails when the reference has too few or too many records" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.ones((2,4), np.float32)" "np.ones((2,4), np.float32)"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/ref.npy"
    npy_records "$T/x1.npy" "np.ones((2,4), np.float32)"
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" < "$T/x1.npy"
    assert_failure 1
    assert_output --partial "more records"
    npy_records "$T/x3.npy" "np.ones((2,4), np.float32)" "np.ones((2,4), np.float32)" "np.ones((2,4), np.float32)"
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" < "$T/x3.npy"
    assert_failure 1
    assert_output --partial "ends before"
}

@test "--check with a shape that does not fit fails" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.ones((2,4), np.float32)"
    npy_records "$T/ref.npy" "np.ones((2,5), np.float32)"
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" < "$T/x.npy"
    assert_failure 1
    assert_output --partial "f32[2,5]"
}

@test "bad --atol/--rtol values are usage errors" {
    run "$MGE_RUN" --atol abc
    assert_failure 2
    run "$MGE_RUN" --rtol -1
    assert_failure 2
}

@test "no input at all is zero steps with empty output" {
    make_mlp_mge
    run --separate-stderr "$MGE_RUN" "$T/mlp.mge" < /dev/null
    assert_success
    [ -z "$output" ]
    "$MGE_RUN" "$T/mlp.mge" -o "$T/out.npy" < /dev/null
    [ -f "$T/out.npy" ] && [ ! -s "$T/out.npy" ]
}

@test "two inputs are read in input order and two outputs written in output order" {
    need_numpy
    write_two
    npy_records "$T/in.npy" "np.full((2,3), 2, np.float32)" "np.full((2,3), 5, np.float32)" \
        "np.full((1,3), 1, np.float32)" "np.full((1,3), 3, np.float32)"
    "$MGE_RUN" "$T/two.mgt" < "$T/in.npy" > "$T/out.npy"
    run py 'f = open(sys.argv[1], "rb")
print([float(np.load(f)[0, 0]) for i in range(4)])' "$T/out.npy"
    assert_output "[7.0, 10.0, 4.0, 3.0]"
}

@test "--input NAME=FILE reads each input from its own file" {
    need_numpy
    write_two
    npy_records "$T/a.npy" "np.full((2,3), 2, np.float32)" "np.full((1,3), 1, np.float32)"
    npy_records "$T/b.npy" "np.full((2,3), 5, np.float32)" "np.full((1,3), 3, np.float32)"
    "$MGE_RUN" "$T/two.mgt" --input b="$T/b.npy" -i a="$T/a.npy" --output prod > "$T/out.npy"
    run py 'f = open(sys.argv[1], "rb")
print([float(np.load(f)[0, 0]) for i in range(2)], len(f.read()))' "$T/out.npy"
    assert_output "[10.0, 3.0] 0"
    # one named, the other from stdin
    "$MGE_RUN" "$T/two.mgt" --input b="$T/b.npy" --output sum < "$T/a.npy" > "$T/out2.npy"
    run py 'f = open(sys.argv[1], "rb")
print([float(np.load(f)[0, 0]) for i in range(2)])' "$T/out2.npy"
    assert_output "[7.0, 4.0]"
}

@test "--input FILE replaces stdin and the model may come from stdin" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.ones((2,4), np.float32)"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/a.npy"
    "$MGE_RUN" --input "$T/x.npy" < "$T/mlp.mge" > "$T/b.npy"
    cmp "$T/a.npy" "$T/b.npy"
    run "$MGE_RUN" - < "$T/mlp.mge"
    assert_failure 1
    assert_output --partial "--input"
}

@test "--input files with different record counts are an error" {
    need_numpy
    write_two
    npy_records "$T/a.npy" "np.ones((2,3), np.float32)" "np.ones((2,3), np.float32)"
    npy_records "$T/b.npy" "np.ones((2,3), np.float32)"
    run "$MGE_RUN" "$T/two.mgt" --input a="$T/a.npy" --input b="$T/b.npy" -o "$T/out.npy"
    assert_failure 1
    assert_output --partial "'b'"
    [ ! -e "$T/out.npy" ]
    run "$MGE_RUN" "$T/two.mgt" --input a="$T/b.npy" --input b="$T/a.npy"
    assert_failure 1
    assert_output --partial "more records"
}

@test "--input with an unknown name fails and names it" {
    write_two
    run "$MGE_RUN" "$T/two.mgt" --input nosuch="$T/a.npy" < /dev/null
    assert_failure 1
    assert_output --partial "nosuch"
}

@test "--output selects values, including intermediate ones" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.full((2,4), -1, np.float32)"
    "$MGE_RUN" "$T/mlp.mge" --output act1,fc2 < "$T/x.npy" > "$T/o.npy"
    run py 'f = open(sys.argv[1], "rb"); a = np.load(f); b = np.load(f)
print(a.shape, b.shape, bool((a >= 0).all()), len(f.read()))' "$T/o.npy"
    assert_output "(2, 8) (2, 3) True 0"
    run "$MGE_RUN" "$T/mlp.mge" --output nosuch < "$T/x.npy"
    assert_failure 1
    assert_output --partial "nosuch"
    run "$MGE_RUN" "$T/mlp.mge" --output fc2, < "$T/x.npy"
    assert_failure 2
}

@test "a record with the wrong dtype or shape names the input, expected and got" {
    need_numpy
    make_mlp_mge
    npy_records "$T/i.npy" "np.ones((2,4), np.int32)"
    run "$MGE_RUN" "$T/mlp.mge" < "$T/i.npy"
    assert_failure 1
    assert_output --partial "'x'"
    assert_output --partial "f32"
    assert_output --partial "i32"
    npy_records "$T/s.npy" "np.ones((2,5), np.float32)"
    run "$MGE_RUN" "$T/mlp.mge" < "$T/s.npy"
    assert_failure 1
    assert_output --partial "x"
    assert_output --partial "[2,5]"
    assert_output --partial "4]"
}

@test "a stream ending inside a record fails after writing the complete steps" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.ones((2,4), np.float32)" "np.ones((3,4), np.float32)" "np.ones((4,4), np.float32)"
    size=$(stat -c %s "$T/x.npy")
    head -c $((size - 10)) "$T/x.npy" > "$T/cut.npy"
    run --separate-stderr bash -c "'$MGE_RUN' '$T/mlp.mge' < '$T/cut.npy' > '$T/out.npy'"
    assert_failure 1
    [[ "$stderr" == *"step 2"* ]]
    run npy_count "$T/out.npy"
    assert_output "2"
    # with -o the file is not created
    run "$MGE_RUN" "$T/mlp.mge" -o "$T/never.npy" < "$T/cut.npy"
    assert_failure 1
    [ ! -e "$T/never.npy" ]
}

@test "a stream ending in the middle of a step is an error" {
    need_numpy
    write_two
    npy_records "$T/in.npy" "np.ones((2,3), np.float32)" "np.ones((2,3), np.float32)" "np.ones((2,3), np.float32)"
    run --separate-stderr bash -c "'$MGE_RUN' '$T/two.mgt' < '$T/in.npy' > '$T/out.npy'"
    assert_failure 1
    [[ "$stderr" == *"middle of step 1"* ]]
    [[ "$stderr" == *"'b'"* ]]
    run npy_count "$T/out.npy"
    assert_output "2"
}

@test "garbage on stdin is a clean error" {
    make_mlp_mge
    run bash -c "printf 'hello world, not npy' | '$MGE_RUN' '$T/mlp.mge'"
    assert_failure 1
    assert_output --partial "mge-run: <stdin>: error:"
}

@test "an NPY header claiming 2^60 elements is refused" {
    need_numpy
    make_mlp_mge
    py 'h = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1073741824, 1073741824), }"
h = h.replace(chr(34), chr(39))
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + b"\0" * 64)' "$T/huge.npy"
    run timeout 20 "$MGE_RUN" "$T/mlp.mge" < "$T/huge.npy"
    assert_failure 1
    assert_output --partial "error:"
}

@test "results do not depend on --threads" {
    need_numpy
    [ -f "$SAMPLES/lenet.mgt" ] || skip "samples/nets/lenet.mgt missing"
    "$MGE_OPT" "$SAMPLES/lenet.mgt" -o "$T/lenet.mge"
    npy_records "$T/x.npy" "np.random.RandomState(1).rand(3,1,28,28).astype(np.float32)"
    "$MGE_RUN" --threads 1 "$T/lenet.mge" < "$T/x.npy" > "$T/a.npy"
    "$MGE_RUN" --threads 2 "$T/lenet.mge" -o "$T/b.npy" < "$T/x.npy"
    run py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
print(a.shape, np.allclose(a, b, atol=1e-5, rtol=1e-4))' "$T/a.npy" "$T/b.npy"
    assert_output "(3, 10) True"
}

@test "parameters without values are initialized from --seed, with a -v note" {
    need_numpy
    write_mlp
    npy_records "$T/x.npy" "np.ones((2,4), np.float32)"
    run --separate-stderr bash -c "'$MGE_RUN' -v '$T/mlp.mgt' < '$T/x.npy' > '$T/a.npy'"
    assert_success
    [[ "$stderr" == *"note:"*"seed 0"* ]]
    "$MGE_RUN" --seed 0 "$T/mlp.mgt" < "$T/x.npy" > "$T/b.npy"
    "$MGE_RUN" --seed 5 "$T/mlp.mgt" < "$T/x.npy" > "$T/c.npy"
    cmp "$T/a.npy" "$T/b.npy"
    run ! cmp -s "$T/a.npy" "$T/c.npy"
}

@test "mge-run refuses to write NPY to a terminal unless -f" {
    need_numpy
    make_mlp_mge
    npy_records "$T/x.npy" "np.ones((2,4), np.float32)"
    run script -qec "'$MGE_RUN' '$T/mlp.mge' < '$T/x.npy'" /dev/null
    assert_failure 1
    assert_output --partial "terminal"
    run script -qec "'$MGE_RUN' -f '$T/mlp.mge' < '$T/x.npy' > /dev/null" /dev/null
    assert_success
}

@test "mge-run --threads and --device checks" {
    run "$MGE_RUN" --threads 0
    assert_failure 2
    run "$MGE_RUN" --threads 257
    assert_failure 2
    run "$MGE_RUN" --device cuda
    assert_failure 1
    assert_output --partial "no CUDA backend"
    run "$MGE_RUN" --device gpu
    assert_failure 2
}
