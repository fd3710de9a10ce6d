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
    assert_line --regexp '^-O1 +dce'
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
