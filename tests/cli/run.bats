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
    npys "$T/x.npy" f32:2x4:rand f32:5x4:rand f32:1x4:rand
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
    make_mlp_mge
    npys "$T/x.npy" f32:3x4:1
    "$MGE_RUN" "$T/mlp.mgt" < "$T/x.npy" > "$T/a.npy"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/b.npy"
    cmp "$T/a.npy" "$T/b.npy"
}

@test "--check passes against a numpy reference and fails on a perturbed one" {
    need_numpy
    make_mlp_mge
    "$MGE_DUMP" "$T/mlp.mge" --params "$T/w.npz" > /dev/null
    npys "$T/x.npy" f32:4x4:rand f32:3x4:rand
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
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/ref.npy"
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" -o "$T/out.npy" < "$T/x.npy"
    assert_success
    cmp "$T/ref.npy" "$T/out.npy"
}

@test "--check fails when the reference has too few or too many records" {
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1 f32:2x4:1
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/ref.npy"
    npys "$T/x1.npy" f32:2x4:1
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" < "$T/x1.npy"
    assert_failure 1
    assert_output --partial "more records"
    npys "$T/x3.npy" f32:2x4:1 f32:2x4:1 f32:2x4:1
    run "$MGE_RUN" "$T/mlp.mge" --check "$T/ref.npy" < "$T/x3.npy"
    assert_failure 1
    assert_output --partial "ends before"
}

@test "--check with a shape that does not fit fails" {
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1
    npys "$T/ref.npy" f32:2x5:1
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
    write_two
    npys "$T/in.npy" f32:2x3:2 f32:2x3:5 f32:1x3:1 f32:1x3:3
    "$MGE_RUN" "$T/two.mgt" < "$T/in.npy" > "$T/out.npy"
    run npy_show "$T/out.npy"
    assert_output "$(printf 'f32 2x3 7.0\nf32 2x3 10.0\nf32 1x3 4.0\nf32 1x3 3.0')"
}

@test "--input NAME=FILE reads each input from its own file" {
    write_two
    npys "$T/a.npy" f32:2x3:2 f32:1x3:1
    npys "$T/b.npy" f32:2x3:5 f32:1x3:3
    "$MGE_RUN" "$T/two.mgt" --input b="$T/b.npy" -i a="$T/a.npy" --output prod > "$T/out.npy"
    run npy_show "$T/out.npy"
    assert_output "$(printf 'f32 2x3 10.0\nf32 1x3 3.0')"
    # one named, the other from stdin
    "$MGE_RUN" "$T/two.mgt" --input b="$T/b.npy" --output sum < "$T/a.npy" > "$T/out2.npy"
    run npy_show "$T/out2.npy"
    assert_output "$(printf 'f32 2x3 7.0\nf32 1x3 4.0')"
}

@test "--input FILE replaces stdin and the model may come from stdin" {
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/a.npy"
    "$MGE_RUN" --input "$T/x.npy" < "$T/mlp.mge" > "$T/b.npy"
    cmp "$T/a.npy" "$T/b.npy"
    run "$MGE_RUN" - < "$T/mlp.mge"
    assert_failure 1
    assert_output --partial "--input"
}

@test "--input files with different record counts are an error" {
    write_two
    npys "$T/a.npy" f32:2x3:1 f32:2x3:1
    npys "$T/b.npy" f32:2x3:1
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
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:-1
    "$MGE_RUN" "$T/mlp.mge" --output act1,fc2 < "$T/x.npy" > "$T/o.npy"
    run npy_show "$T/o.npy"
    assert_line --index 0 --regexp '^f32 2x8 [0-9.e-]+$'
    assert_line --index 1 --regexp '^f32 2x3 -?[0-9.e-]+$'
    [ "${#lines[@]}" = 2 ]
    run "$MGE_RUN" "$T/mlp.mge" --output nosuch < "$T/x.npy"
    assert_failure 1
    assert_output --partial "nosuch"
    run "$MGE_RUN" "$T/mlp.mge" --output fc2, < "$T/x.npy"
    assert_failure 2
}

@test "a record with the wrong dtype or shape names the input, expected and got" {
    make_mlp_mge
    npys "$T/i.npy" i32:2x4:1
    run "$MGE_RUN" "$T/mlp.mge" < "$T/i.npy"
    assert_failure 1
    assert_output --partial "'x'"
    assert_output --partial "f32"
    assert_output --partial "i32"
    npys "$T/s.npy" f32:2x5:1
    run "$MGE_RUN" "$T/mlp.mge" < "$T/s.npy"
    assert_failure 1
    assert_output --partial "x"
    assert_output --partial "[2,5]"
    assert_output --partial "4]"
}

@test "a stream ending inside a record fails after writing the complete steps" {
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1 f32:3x4:1 f32:4x4:1
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
    write_two
    npys "$T/in.npy" f32:2x3:1 f32:2x3:1 f32:2x3:1
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
    make_mlp_mge
    "$PY" -c 'import sys
h = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1073741824, 1073741824), }"
h = h.replace(chr(34), chr(39))
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + b"\0" * 64)' "$T/huge.npy"
    run timeout 20 "$MGE_RUN" "$T/mlp.mge" < "$T/huge.npy"
    assert_failure 1
    assert_output --partial "error:"
}

@test "results do not depend on --threads" {
    [ -f "$SAMPLES/lenet.mgt" ] || skip "samples/nets/lenet.mgt missing"
    "$MGE_OPT" "$SAMPLES/lenet.mgt" -o "$T/lenet.mge"
    npys "$T/x.npy" f32:3x1x28x28:rand
    "$MGE_RUN" --threads 1 "$T/lenet.mge" < "$T/x.npy" > "$T/a.npy"
    run npy_show "$T/a.npy"
    assert_output --regexp '^f32 3x10 '
    run "$MGE_RUN" --threads 2 "$T/lenet.mge" --check "$T/a.npy" < "$T/x.npy"
    assert_success
}

@test "parameters without values are initialized from --seed, with a warning unless -q" {
    write_mlp
    npys "$T/x.npy" f32:2x4:1
    run --separate-stderr bash -c "'$MGE_RUN' '$T/mlp.mgt' < '$T/x.npy' > '$T/a.npy'"
    assert_success
    [[ "$stderr" == *"mlp.mgt: warning: 4 parameters have no values: running with random weights from seed 0"* ]]
    run --separate-stderr bash -c "'$MGE_RUN' -q '$T/mlp.mgt' < '$T/x.npy' > '$T/q.npy'"
    assert_success
    [ -z "$stderr" ]
    cmp "$T/a.npy" "$T/q.npy"
    "$MGE_RUN" -q --seed 0 "$T/mlp.mgt" < "$T/x.npy" > "$T/b.npy"
    "$MGE_RUN" -q --seed 5 "$T/mlp.mgt" < "$T/x.npy" > "$T/c.npy"
    cmp "$T/a.npy" "$T/b.npy"
    run ! cmp -s "$T/a.npy" "$T/c.npy"
    # a model with values (mge-opt stores the initialized ones) says nothing
    make_mlp_mge
    run --separate-stderr bash -c "'$MGE_RUN' '$T/mlp.mge' < '$T/x.npy' > /dev/null"
    assert_success
    [ -z "$stderr" ]
}

@test "mge-run refuses to write NPY to a terminal unless -f" {
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1
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
    assert_output --partial "no plugin libmge-cuda.so"
    run "$MGE_RUN" --device gpu
    assert_failure 2
}

@test "--rtol scales with the reference and -q silences a passing --check" {
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:rand
    "$MGE_RUN" "$T/mlp.mge" --output fc1 < "$T/x.npy" > "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" -q "$T/mlp.mge" --output fc1 --check "$T/ref.npy" < "$T/x.npy"
    assert_success
    [ -z "$stderr" ]
    # a reference off by 1% of its value: rtol 2e-2 accepts, the default rejects
    pyq 'import struct
d = bytearray(open(sys.argv[1], "rb").read())
hl = struct.unpack_from("<H", d, 8)[0]; off = 10 + hl
n = (len(d) - off) // 4
vals = struct.unpack_from("<%df" % n, d, off)
struct.pack_into("<%df" % n, d, off, *[v * 1.01 for v in vals])
open(sys.argv[2], "wb").write(d)' "$T/ref.npy" "$T/ref101.npy"
    run "$MGE_RUN" "$T/mlp.mge" --output fc1 --check "$T/ref101.npy" --atol 0 --rtol 2e-2 < "$T/x.npy"
    assert_success
    run "$MGE_RUN" "$T/mlp.mge" --output fc1 --check "$T/ref101.npy" --atol 0 < "$T/x.npy"
    assert_failure 1
    assert_output --partial "max rel err 0.0099"
}

@test "every sample net runs end to end at batch 2" {
    ls "$SAMPLES"/*.mgt > /dev/null 2>&1 || skip "no samples/nets/*.mgt"
    for net in "$SAMPLES"/*.mgt; do
        name=$(basename "$net" .mgt)
        "$MGE_OPT" -O1 "$net" -o "$T/$name.mge"
        # one record per input the outputs need, shaped from the declarations
        # (other symbols 5: gpt-tiny's S; integer rand data is 0, a valid token)
        spec=$("$MGE_DUMP" --json "$T/$name.mge" | pyq 'import json
d = json.load(sys.stdin)
i = d["inputs"][0]
print("%s:%s:rand" % (i["dtype"], "x".join("2" if s == "N" else str(s) if isinstance(s, int) else "5"
                                           for s in i["shape"])))')
        npys "$T/$name.in.npy" "$spec"
        run "$MGE_RUN" "$T/$name.mge" -o "$T/$name.out.npy" < "$T/$name.in.npy"
        assert_success
        run npy_show "$T/$name.out.npy"
        assert_success
        assert_line --index 0 --regexp '^[a-z0-9]+ 2(x[0-9]+)* '
        refute_output --partial nan
    done
}

@test "mge-run does not wait for NPY records typed on a terminal" {
    make_mlp_mge
    run script -qec "'$MGE_RUN' '$T/mlp.mge' -o '$T/out.npy'" /dev/null
    assert_failure 1
    assert_output --partial "terminal"
    [ ! -e "$T/out.npy" ]
}

@test "mge-run --data --accuracy on IDX files; --normalize; records with -o" {
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
    "$MGE_BIN/mge-train" "$SAMPLES/mlp.mgt" --data "$FM/train" --steps 30 --optimizer adam -o "$T/m.mge"
    run --separate-stderr "$MGE_RUN" "$T/m.mge" --data "$FM/t10k" --accuracy
    assert_success
    [[ "$output" =~ ^accuracy\ 0\.[0-9]{4}\ \(([0-9]+)\ of\ 1000\)$ ]]
    # 30 Adam steps learn something: well above chance (0.1)
    [ "${BASH_REMATCH[1]}" -gt 400 ]
    # normalization changes what the model sees
    run "$MGE_RUN" "$T/m.mge" --data "$FM/t10k" --accuracy --normalize 0.5,0.01
    assert_success
    [[ "$output" == accuracy* ]]
    # outputs: one record of all 1000 rows, whatever the batch (np.load reads it whole)
    run "$MGE_RUN" "$T/m.mge" --data "$FM/t10k" --batch 256 -o "$T/y.npy"
    assert_success
    run npy_show "$T/y.npy"
    assert_output --regexp '^f32 1000x10 '
    [ "${#lines[@]}" = 1 ]
}

@test "mge-run --data usage errors" {
    make_mlp_mge
    run "$MGE_RUN" "$T/mlp.mge" --accuracy
    assert_failure 2
    run "$MGE_RUN" "$T/mlp.mge" --data x.npz --input y.npy
    assert_failure 2
    run "$MGE_RUN" "$T/mlp.mge" --normalize 0.5,0
    assert_failure 2
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/nope.npz"
    assert_failure 1
    assert_output --partial "nope.npz"
    # a model without a cross_entropy loss scores from the data, which here has no labels
    need_numpy
    py 'np.savez(sys.argv[1], x=np.zeros((3, 4), np.float32))' "$T/xonly.npz"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/xonly.npz" --accuracy
    assert_failure 1
    assert_output --partial "no labels"
    assert_output --partial "--target"
}
