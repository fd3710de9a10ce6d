#!/usr/bin/env bats
# mge-opt: assembling, passes, weights, output handling.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

@test "mge-opt --help prints usage on stdout and exits 0" {
    run --separate-stderr "$MGE_OPT" --help
    assert_success
    assert_output --partial "Usage: mge-opt"
    assert_output --partial "--list-passes"
    [ -z "$stderr" ]
}

@test "mge-opt --version" {
    run "$MGE_OPT" --version
    assert_success
    assert_output "mge-opt (mge) 0.1.0"
}

@test "mge-opt writes .mge with the signature" {
    write_mlp
    run "$MGE_OPT" "$T/mlp.mgt" -o "$T/mlp.mge"
    assert_success
    run od -An -tx1 -N8 "$T/mlp.mge"
    assert_output " 89 4d 47 45 0d 0a 1a 0a"
}

@test "mge-opt reads stdin and writes stdout by default" {
    write_mlp
    "$MGE_OPT" < "$T/mlp.mgt" > "$T/a.mge"
    "$MGE_OPT" - -o "$T/b.mge" < "$T/mlp.mgt"
    cmp "$T/a.mge" "$T/b.mge"
}

@test "text -> .mge -> text -> .mge is stable" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/c1.mge"
    "$MGE_OPT" -S "$T/c1.mge" -o "$T/c1.mgt"
    "$MGE_OPT" "$T/c1.mgt" -o "$T/c2.mge"
    "$MGE_OPT" -S "$T/c2.mge" -o "$T/c2.mgt"
    cmp "$T/c1.mge" "$T/c2.mge"
    cmp "$T/c1.mgt" "$T/c2.mgt"
    grep -q '^input' "$T/c1.mgt"
}

@test "the sample nets assemble and round-trip" {
    for net in mlp lenet linear; do
        [ -f "$SAMPLES/$net.mgt" ] || skip "samples/nets/$net.mgt missing"
        "$MGE_OPT" "$SAMPLES/$net.mgt" -o "$T/$net.mge"
        "$MGE_OPT" -S "$T/$net.mge" > "$T/$net.1.mgt"
        "$MGE_OPT" -S "$T/$net.1.mgt" > "$T/$net.2.mgt"
        cmp "$T/$net.1.mgt" "$T/$net.2.mgt"
    done
}

@test "the writer is deterministic and --seed changes the initial weights" {
    write_mlp
    "$MGE_OPT" "$T/mlp.mgt" -o "$T/a.mge"
    "$MGE_OPT" "$T/mlp.mgt" --seed 0 -o "$T/b.mge"
    "$MGE_OPT" "$T/mlp.mgt" --seed 7 -o "$T/c.mge"
    cmp "$T/a.mge" "$T/b.mge"
    run ! cmp -s "$T/a.mge" "$T/c.mge"
}

@test "-O0 keeps dead nodes, -O1 and --passes=dce remove them" {
    write_conv
    "$MGE_OPT" -S -O0 "$T/conv.mgt" > "$T/o0.mgt"
    "$MGE_OPT" -S -O1 "$T/conv.mgt" > "$T/o1.mgt"
    "$MGE_OPT" -S --passes=dce "$T/conv.mgt" > "$T/p.mgt"
    grep -q 'sigmoid' "$T/o0.mgt"
    run ! grep -q 'sigmoid' "$T/o1.mgt"
    cmp "$T/o1.mgt" "$T/p.mgt"
    # the loss and the nodes it needs survive
    grep -q 'cross_entropy' "$T/o1.mgt"
    grep -q '^minimize' "$T/o1.mgt"
}

@test "-O2 and -O3 are accepted and -O1 output still runs" {
    write_conv
    "$MGE_OPT" -O2 "$T/conv.mgt" -o "$T/o2.mge"
    "$MGE_OPT" -O3 "$T/conv.mgt" -o "$T/o3.mge"
    run "$MGE_DUMP" "$T/o3.mge"
    assert_success
    refute_output --partial "sigmoid"
}

@test "dce keeps a graph without dead code unchanged" {
    write_mlp
    "$MGE_OPT" "$T/mlp.mgt" -o "$T/a.mge"
    "$MGE_OPT" -O1 "$T/mlp.mgt" -o "$T/b.mge"
    cmp "$T/a.mge" "$T/b.mge"
}

@test "--list-passes lists passes and presets" {
    run --separate-stderr "$MGE_OPT" --list-passes
    assert_success
    assert_line --regexp '^dce +'
    assert_line --regexp '^-O0 +\(no passes\)'
    assert_line --regexp '^-O1 +cse,fold-constants,dce$'
}

@test "mixing -O and --passes is a usage error" {
    write_mlp
    run "$MGE_OPT" -O1 --passes=dce "$T/mlp.mgt"
    assert_failure 2
    assert_output --partial "Try 'mge-opt --help'."
}

@test "an unknown pass is a usage error that lists the known ones" {
    write_mlp
    run "$MGE_OPT" --passes=dce,nosuch "$T/mlp.mgt" -o "$T/x.mge"
    assert_failure 2
    assert_output --partial "unknown pass 'nosuch'"
    assert_output --partial "dce"
    [ ! -e "$T/x.mge" ]
}

@test "-O4 and -Ox are usage errors" {
    run "$MGE_OPT" -O4
    assert_failure 2
    run "$MGE_OPT" -Ox
    assert_failure 2
}

@test "--weights binds values by name" {
    need_numpy
    make_mlp_mge
    "$MGE_DUMP" "$T/mlp.mge" --params "$T/w.npz" > /dev/null
    py 'd = dict(np.load(sys.argv[1]))
d["fc1.weight"] = np.full(d["fc1.weight"].shape, 0.25, np.float32)
np.savez(sys.argv[2], **d)' "$T/w.npz" "$T/w2.npz"
    "$MGE_OPT" "$T/mlp.mgt" --weights "$T/w2.npz" -o "$T/m2.mge"
    "$MGE_DUMP" "$T/m2.mge" --params "$T/out.npz" > /dev/null
    run py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
for k in a.files:
    assert np.array_equal(a[k], b[k]), k
print("ok")' "$T/w2.npz" "$T/out.npz"
    assert_output "ok"
}

@test "--weights is strict: unknown and missing names are errors" {
    need_numpy
    make_mlp_mge
    "$MGE_DUMP" "$T/mlp.mge" --params "$T/w.npz" > /dev/null
    py 'd = dict(np.load(sys.argv[1])); d["bogus.weight"] = np.zeros(3, np.float32); np.savez(sys.argv[2], **d)
del d["bogus.weight"]; del d["fc2.bias"]; np.savez(sys.argv[3], **d)' "$T/w.npz" "$T/extra.npz" "$T/missing.npz"
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/extra.npz" -o "$T/x.mge"
    assert_failure 1
    assert_output --partial "bogus.weight"
    assert_output --partial "error:"
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/missing.npz" -o "$T/x.mge"
    assert_failure 1
    assert_output --partial "fc2.bias"
    [ ! -e "$T/x.mge" ]
}

@test "--weights with a wrong shape names the tensor" {
    need_numpy
    write_mlp
    py 'np.savez(sys.argv[1], **{"fc1.weight": np.zeros((8, 5), np.float32), "fc1.bias": np.zeros(8, np.float32),
    "fc2.weight": np.zeros((3, 8), np.float32), "fc2.bias": np.zeros(3, np.float32)})' "$T/bad.npz"
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/bad.npz" -o "$T/x.mge"
    assert_failure 1
    assert_output --partial "fc1.weight"
    [ ! -e "$T/x.mge" ]
}

@test "binary output to a terminal is refused unless -f" {
    write_mlp
    run script -qec "'$MGE_OPT' '$T/mlp.mgt'" /dev/null
    assert_failure 1
    assert_output --partial "terminal"
    run script -qec "'$MGE_OPT' -f '$T/mlp.mgt' > /dev/null" /dev/null
    assert_success
    # the text form may go to a terminal
    run script -qec "'$MGE_OPT' -S '$T/mlp.mgt'" /dev/null
    assert_success
    assert_output --partial "linear"
}

@test "a failing mge-opt leaves no output file and keeps an existing one" {
    printf 'input x : f32[N,4]\ny = nosuchop(x)\noutput y\n' > "$T/bad.mgt"
    run "$MGE_OPT" "$T/bad.mgt" -o "$T/out.mge"
    assert_failure 1
    [ ! -e "$T/out.mge" ]
    echo keep > "$T/old.mge"
    run "$MGE_OPT" "$T/bad.mgt" -o "$T/old.mge"
    assert_failure 1
    [ "$(cat "$T/old.mge")" = keep ]
    [ -z "$(ls -A "$T" | grep '^\.')" ]
}

@test "-v notes the initialized parameters, -q keeps quiet" {
    write_mlp
    run --separate-stderr "$MGE_OPT" -v "$T/mlp.mgt" -o "$T/a.mge"
    assert_success
    [[ "$stderr" == *"note:"* ]]
    run --separate-stderr "$MGE_OPT" -q "$T/mlp.mgt" -o "$T/a.mge"
    assert_success
    [ -z "$stderr" ]
}

@test "empty pass names are usage errors; a pass may run twice" {
    write_conv
    for bad in "" "dce," ",dce" "dce,,dce"; do
        run "$MGE_OPT" --passes="$bad" "$T/conv.mgt" -o "$T/x.mge"
        assert_failure 2
    done
    [ ! -e "$T/x.mge" ]
    "$MGE_OPT" -S --passes=dce,dce "$T/conv.mgt" > "$T/twice.mgt"
    "$MGE_OPT" -S --passes=dce "$T/conv.mgt" > "$T/once.mgt"
    cmp "$T/twice.mgt" "$T/once.mgt"
}

@test "-S warns when parameter values would be dropped, and not for a fresh text model" {
    write_mlp
    "$MGE_OPT" "$T/mlp.mgt" -o "$T/mlp.mge"
    run --separate-stderr "$MGE_OPT" -S "$T/mlp.mge"
    assert_success
    [[ "$stderr" == *"warning: the text form does not carry parameter values"* ]]
    run --separate-stderr "$MGE_OPT" -S "$T/mlp.mgt"
    assert_success
    [ -z "$stderr" ]
}

# ---------------------------------------------------------------- pass manager

@test "--verify passes on dce, says how close with -v and writes the output" {
    write_conv
    run --separate-stderr "$MGE_OPT" --verify -v --passes=dce "$T/conv.mgt" -o "$T/v.mge"
    assert_success
    [[ "$stderr" == *"--verify: 1 output (10 values, batch 2) match: max abs err 0, max rel err 0"* ]]
    [ -s "$T/v.mge" ]
    # --verify does not change what is written
    "$MGE_OPT" --passes=dce "$T/conv.mgt" -o "$T/plain.mge"
    cmp "$T/v.mge" "$T/plain.mge"
}

@test "--verify with -O0 compares the model with itself, exactly" {
    write_conv
    run --separate-stderr "$MGE_OPT" --verify -O0 --atol 0 --rtol 0 "$T/conv.mgt" -o "$T/v.mge"
    assert_success
    [ -z "$stderr" ]
    [ -s "$T/v.mge" ]
}

@test "--verify fails when a pass changes the numerics: names the output, element, values and errors" {
    write_conv
    run --separate-stderr "$MGE_OPT" --verify --passes=f16-weights --atol 0 --rtol 0 "$T/conv.mgt" -o "$T/v.mge"
    assert_failure 1
    [[ "$stderr" == *"error: --verify: output 'fc' element ["* ]]
    [[ "$stderr" == *"after the passes"*"before"* ]]
    [[ "$stderr" == *"--verify failed: max abs err "*", max rel err "* ]]
    [ ! -e "$T/v.mge" ]
    # generous tolerances accept f16 rounding
    run "$MGE_OPT" --verify --passes=f16-weights --atol 1e-2 --rtol 1e-2 "$T/conv.mgt" -o "$T/v.mge"
    assert_success
    [ -s "$T/v.mge" ]
}

@test "--verify keeps an existing output file when it fails" {
    write_conv
    echo keep > "$T/old.mge"
    run "$MGE_OPT" --verify --passes=f16-weights --atol 0 --rtol 0 "$T/conv.mgt" -o "$T/old.mge"
    assert_failure 1
    [ "$(cat "$T/old.mge")" = keep ]
}

@test "--verify feeds the optimized model only the inputs it still has" {
    write_conv
    run --separate-stderr "$MGE_OPT" --verify -v --passes=strip-training,dce -S "$T/conv.mgt"
    assert_success
    refute_output --partial "label"
    [[ "$stderr" == *"--verify: 1 output"*"match"* ]]
}

@test "--verify --input runs on the given records; a wrong record names the file" {
    write_conv
    npys "$T/x.npy" f32:3x1x8x8:rand
    run --separate-stderr "$MGE_OPT" --verify -v --input "$T/x.npy" --passes=dce "$T/conv.mgt" -o "$T/v.mge"
    assert_success
    [[ "$stderr" == *"(15 values, batch 3) match"* ]]
    npys "$T/bad.npy" f32:3x8x8:rand
    run "$MGE_OPT" --verify --input "$T/bad.npy" --passes=dce "$T/conv.mgt" -o "$T/v.mge"
    assert_failure 1
    assert_output --partial "bad.npy"
    assert_output --partial "'x'"
    run "$MGE_OPT" --verify --input "$T/nosuch.npy" --passes=dce "$T/conv.mgt" -o "$T/v.mge"
    assert_failure 1
    assert_output --partial "nosuch.npy"
}

@test "--verify --batch and --shape set the random inputs' batch" {
    write_conv
    run --separate-stderr "$MGE_OPT" --verify -v --batch 3 -O0 "$T/conv.mgt" -o "$T/v.mge"
    assert_success
    [[ "$stderr" == *"(15 values, batch 3)"* ]]
    run --separate-stderr "$MGE_OPT" --verify -v --shape x=4x1x8x8 -O0 "$T/conv.mgt" -o "$T/v.mge"
    assert_success
    [[ "$stderr" == *"(20 values, batch 4)"* ]]
    run "$MGE_OPT" --verify --shape x=4x1x9x9 -O0 "$T/conv.mgt" -o "$T/v.mge"
    assert_failure 1
    assert_output --partial "x=4x1x9x9"
    run "$MGE_OPT" --verify --shape nosuch=4 -O0 "$T/conv.mgt" -o "$T/v.mge"
    assert_failure 1
    assert_output --partial "no input named 'nosuch'"
}

@test "--verify options: bad values and use without --verify are usage errors" {
    write_conv
    for args in "--verify --atol x" "--verify --atol -1" "--verify --rtol nan" "--verify --batch 0" \
                "--atol 1e-3" "--rtol 1e-3" "--batch 2" "--input $T/x.npy" \
                "--verify --shape x=2x1x8x8 --input $T/x.npy" "--verify --shape x"; do
        run "$MGE_OPT" $args "$T/conv.mgt" -o "$T/x.mge"
        assert_failure 2
        assert_output --partial "Try 'mge-opt --help'."
    done
    run "$MGE_OPT" --verify --input - < "$T/conv.mgt"
    assert_failure 2
    [ ! -e "$T/x.mge" ]
}

@test "--time-passes prints one row per pass and the totals on stderr" {
    write_conv
    run --separate-stderr "$MGE_OPT" --time-passes --passes=dce,dce "$T/conv.mgt" -o "$T/t.mge"
    assert_success
    [ -z "$output" ]
    mapfile -t lines <<< "$stderr"
    [ "${#lines[@]}" -eq 4 ]
    [[ "${lines[0]}" =~ ^pass\ +ms\ +changed\ +nodes\ before\ +nodes\ after$ ]]
    [[ "${lines[1]}" =~ ^dce\ +[0-9]+\.[0-9]{3}\ +yes\ +7\ +6$ ]]
    [[ "${lines[2]}" =~ ^dce\ +[0-9]+\.[0-9]{3}\ +no\ +6\ +6$ ]]
    [[ "${lines[3]}" =~ ^total\ +[0-9]+\.[0-9]{3}\ +7\ +6$ ]]
    # the timing does not change the output
    "$MGE_OPT" --passes=dce,dce "$T/conv.mgt" -o "$T/p.mge"
    cmp "$T/t.mge" "$T/p.mge"
}

@test "--print-after-all prints a header and the text form after each pass" {
    write_conv
    run --separate-stderr "$MGE_OPT" --print-after-all -S --passes=dce,dce "$T/conv.mgt"
    assert_success
    [ "$(grep -c '^; after ' <<< "$stderr")" -eq 2 ]
    [ "$(grep '^; after ' <<< "$stderr" | head -1)" = "; after dce (changed)" ]
    [ "$(grep '^; after ' <<< "$stderr" | tail -1)" = "; after dce (unchanged)" ]
    # each dump is the text form of the graph at that point: here what -S writes
    "$MGE_OPT" -S --passes=dce "$T/conv.mgt" > "$T/once.mgt"
    awk '/^; after /{n++; next} n==1' <<< "$stderr" > "$T/first.mgt"
    cmp "$T/first.mgt" "$T/once.mgt"
    [[ "$output" == "$(cat "$T/once.mgt")" ]]
}

@test "-v says when a pass changes nothing; without -v it is quiet" {
    write_mlp
    run --separate-stderr "$MGE_OPT" -v --passes=dce "$T/mlp.mgt" -o "$T/m.mge"
    assert_success
    [[ "$stderr" == *"dce: no change (does not apply)"* ]]
    run --separate-stderr "$MGE_OPT" --passes=dce "$T/mlp.mgt" -o "$T/m.mge"
    assert_success
    [ -z "$stderr" ]
    write_conv
    run --separate-stderr "$MGE_OPT" -v --passes=dce "$T/conv.mgt" -o "$T/c.mge"
    assert_success
    [[ "$stderr" != *"does not apply"* ]]
}

@test "--list-passes shows every registered pass" {
    run --separate-stderr "$MGE_OPT" --list-passes
    assert_success
    for p in dce cse fold-constants strip-training fold-bn fold-scale f16-weights; do
        assert_line --regexp "^$p +[a-z]"
    done
}

@test "-O2 on the sample nets: batchnorm and dropout folded away, --verify passes" {
    for net in lenet resnet18 mobilenet_v2; do
        run --separate-stderr "$MGE_OPT" "$SAMPLES/$net.mgt" --seed 1 -O2 --verify --batch 1 -o "$T/$net.mge"
        assert_success
        run "$MGE_DUMP" "$T/$net.mge" --json
        assert_success
        [[ "$output" != *'"op":"batchnorm"'* ]]
        [[ "$output" != *'"op":"dropout"'* ]]
        # the convolutions are fused (and blocked or Winograd where it pays)
        [[ "$output" == *'"op":"fused_conv2d"'* || "$output" == *'"op":"conv2d_nchwc"'* ||
           "$output" == *'"op":"conv2d_winograd"'* ]]
        [[ "$output" != *'"op":"relu"'* ]]
    done
}

@test "each pass through mge-opt: cse, fold-constants, fold-scale change the graph and verify" {
    cat > "$T/p.mgt" <<'NET'
input x : f32[N,2,6,6]
conv = conv2d(x, out=3, kernel=3, pad=1)
a = relu(conv)
b = relu(conv)
s = add(a, b)
output s
NET
    run --separate-stderr "$MGE_OPT" "$T/p.mgt" --passes=cse --verify --time-passes -o "$T/c.mge"
    assert_success
    [[ "$stderr" =~ cse\ +[0-9.]+\ +yes\ +4\ +3 ]]
    cat > "$T/s.mgt" <<'NET'
input x : f32[N,4]
fc = linear(x, out=3)
const k : f32[] = 2.5
y = mul(fc, k)
output y
NET
    run --separate-stderr "$MGE_OPT" "$T/s.mgt" --passes=fold-scale,dce --verify --time-passes -o "$T/s.mge"
    assert_success
    [[ "$stderr" =~ fold-scale\ +[0-9.]+\ +yes\ +2\ +1 ]]
    # nothing to fold: the no-op is said with -v and the output is byte-identical
    "$MGE_OPT" "$T/p.mgt" -o "$T/plain.mge"
    run --separate-stderr "$MGE_OPT" "$T/p.mgt" --passes=fold-constants -v -o "$T/fc.mge"
    assert_success
    [[ "$stderr" == *"fold-constants: no change (does not apply)"* ]]
    cmp "$T/plain.mge" "$T/fc.mge"
}

@test "every registered pass leaves a model it does not apply to byte-identical, and says so with -v" {
    printf 'input x : f32[N,4]\ny = softmax(x, axis=1)\noutput y\n' > "$T/plain.mgt"
    "$MGE_OPT" "$T/plain.mgt" -o "$T/plain.mge"
    passes=$("$MGE_OPT" --list-passes | awk '$1 !~ /^-O/ {print $1}')
    [ -n "$passes" ]
    for p in $passes; do
        run --separate-stderr "$MGE_OPT" -v --passes="$p" "$T/plain.mge" -o "$T/p.mge"
        assert_success
        [[ "$stderr" == *"$p: no change"* ]] || { echo "$p: $stderr"; return 1; }
        cmp "$T/plain.mge" "$T/p.mge" || { echo "$p changed the bytes"; return 1; }
    done
}

@test "every op in ops.def is documented in mge-ops(7)" {
    page="$BATS_TEST_DIRNAME/../../man/man7/mge-ops.7"
    ops=$(grep -oE '^MGE_OP\([A-Z0-9_]+, [a-z0-9_]+' "$BATS_TEST_DIRNAME/../../lib/ops.def" | sed 's/.*, //')
    [ -n "$ops" ]
    for op in $ops; do
        grep -qE "(^|[ \"(])$(sed 's/_/\\\\?_/g' <<< "$op")([ \"(,]|$)" "$page" || { echo "$op missing from mge-ops(7)"; return 1; }
    done
}
