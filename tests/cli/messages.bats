#!/usr/bin/env bats
# Files of the wrong kind are named by every tool in the same words
# (formats/sniff.c), text-form names the grammar cannot spell get a message
# that says what is wrong, and weights by name are strict unless
# --allow-unused.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# The head of an ONNX ModelProto, cut short: ir_version 7, producer "pytorch"
# 2.0, and a graph field that declares more bytes than follow.
write_onnx() {
    printf '\x08\x07\x12\x07pytorch\x1a\x032.0:\x10\x0a\x04relu' > "${1:-$T/sq.onnx}"
}

# A zip laid out as torch.save writes one (ARCHIVE/data.pkl first), made
# with zipfile so no torch is needed.
write_torch_zip() {
    pyq 'import zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("sd/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("sd/data/0", b"\0" * 16)
    z.writestr("sd/version", b"3\n")' "${1:-$T/sd.pt}"
}

# A PNG signature and IHDR chunk: enough for any reader to give up on.
write_png() {
    printf '\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x04\x00\x00\x00\x04\x08\x02\x00\x00\x00' > "$1"
}

# TOOL FILE WANT...: the tool fails with exit 1, names FILE and says each WANT.
says() {
    local f=$1
    shift
    [ "$status" -eq 1 ] || { echo "status $status: $output"; return 1; }
    [[ "$output" == *"$f"*"error: "* ]] || { echo "no '$f: error:' in: $output"; return 1; }
    for w in "$@"; do
        [[ "$output" == *"$w"* ]] || { echo "no '$w' in: $output"; return 1; }
    done
}

@test "a truncated ONNX model: every tool that reads a model reads it as ONNX and says it is cut short" {
    write_onnx
    write_mlp
    for cmd in "$MGE_OPT $T/sq.onnx -o $T/out" "$MGE_DUMP $T/sq.onnx" "$MGE_RUN $T/sq.onnx -o $T/out" \
        "$MGE_BIN/mge-quant $T/sq.onnx --dtype f16 -o $T/out" "$MGE_BIN/mge-bench $T/sq.onnx" \
        "$MGE_BIN/mge-prof $T/sq.onnx" "$MGE_BIN/mge-train $T/sq.onnx --data $T/none.npz -o $T/out"; do
        run $cmd < /dev/null
        says "$T/sq.onnx" "not a valid ONNX model" "truncated or corrupted"
        refute_output --partial "unexpected byte"
        [ ! -e "$T/out" ]
    done
    # given as weights, it is the same file with the recipe for its initializers
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/sq.onnx" -o "$T/out"
    says "$T/sq.onnx" "looks like an ONNX model, not an .npz" "every mge tool reads .onnx" "numpy_helper" \
        "onnx.load('$T/sq.onnx')"
    # and on stdin
    run "$MGE_OPT" -o "$T/out" < "$T/sq.onnx"
    says "<stdin>" "not a valid ONNX model"
}

@test "a PNG image given as a model, as weights, as data or as input says it is an image" {
    write_png "$T/cat.png"
    write_mlp
    make_mlp_mge
    run "$MGE_OPT" "$T/cat.png" -o "$T/out"
    says "$T/cat.png" "this is a PNG image, not a model" "np.save"
    refute_output --partial "0x89"
    run "$MGE_DUMP" "$T/cat.png"
    says "$T/cat.png" "PNG image"
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/cat.png" -o "$T/out"
    says "$T/cat.png" "this is a PNG image, not an .npz"
    write_small
    run "$MGE_BIN/mge-train" "$T/small.mgt" --data "$T/cat.png" -o "$T/out"
    says "$T/cat.png" "this is a PNG image, not NPY data"
    run "$MGE_RUN" "$T/mlp.mge" -o "$T/out" < "$T/cat.png"
    says "<stdin>" "not an NPY record" "this is a PNG image"
    [ ! -e "$T/out" ]
}

@test "a torch.save file is called a PyTorch file, with the numpy export, not an .npz archive" {
    write_torch_zip "$T/sd.pt"
    write_mlp
    run "$MGE_OPT" "$T/sd.pt" -o "$T/out"
    says "$T/sd.pt" "PyTorch file (torch.save), not a model" "np.savez('w.npz', **{k: v.numpy() for k, v in sd.items()})"
    refute_output --partial ".npz archive"
    run "$MGE_RUN" "$T/sd.pt" -o "$T/out" < /dev/null
    says "$T/sd.pt" "PyTorch file"
    # as weights: by path, and in a pipe (where only the members show it)
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/sd.pt" -o "$T/out"
    says "$T/sd.pt" "PyTorch file (torch.save), not an .npz" "torch.load('$T/sd.pt'" "np.savez("
    refute_output --partial "not an .npy array"
    run "$MGE_OPT" "$T/mlp.mgt" --weights - -o "$T/out" < "$T/sd.pt"
    says "<stdin>" "PyTorch file (torch.save), not an .npz" "np.savez("
    run "$MGE_DUMP" "$T/sd.pt"
    says "$T/sd.pt" "PyTorch file" "np.savez("
    write_small
    run "$MGE_BIN/mge-train" "$T/small.mgt" --data "$T/sd.pt" -o "$T/out"
    says "$T/sd.pt" "PyTorch file"
    [ ! -e "$T/out" ]
}

@test "files torch.save really writes (zip and legacy) are recognised" {
    "$PY" -c 'import torch' 2> /dev/null || skip "torch not installed ($PY)"
    write_mlp
    "$PY" -c 'import sys, torch
sd = {"fc1.weight": torch.ones(8, 4)}
torch.save(sd, sys.argv[1])
torch.save(sd, sys.argv[2], _use_new_zipfile_serialization=False)' "$T/new.pt" "$T/old.pt"
    for f in new.pt old.pt; do
        run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/$f" -o "$T/out"
        says "$T/$f" "PyTorch file (torch.save)" "np.savez("
        run "$MGE_OPT" "$T/$f" -o "$T/out"
        says "$T/$f" "PyTorch file (torch.save), not a model"
    done
    # and the recipe in the message works: the .npz it writes binds
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/new.pt" -o "$T/out"
    recipe=$(sed -n 's/.*instead: python3 -c "\(.*\)"$/\1/p' <<< "$output")
    [ -n "$recipe" ]
    (cd "$T" && "$PY" -c "$recipe")
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/w.npz" -o "$T/out"
    # strict: the other three parameters are missing, and that is what it says now
    says "$T/w.npz" "3 parameters without a value"
}

@test "a model given where weights or inputs belong says what it is" {
    make_mlp_mge
    write_mlp
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/mlp.mge" -o "$T/out"
    says "$T/mlp.mge" "this is an mge model, not an .npz" "mge-dump $T/mlp.mge --params w.npz"
    run "$MGE_RUN" "$T/mlp.mge" -o "$T/out" < "$T/mlp.mge"
    says "<stdin>" "not an NPY record" "this is an mge model"
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/mlp.mgt" -o "$T/out"
    says "$T/mlp.mgt" "not an .npz archive"
    [ ! -e "$T/out" ]
}

@test "a '-' inside a name says names cannot hold it, not 'malformed number'" {
    printf 'input x : f32[N,4]\ny = relu(x.a-b)\noutput y\n' > "$T/minus.mgt"
    run "$MGE_OPT" "$T/minus.mgt" -o "$T/out"
    says "$T/minus.mgt:2:13" "'x.a-b' is not a name" "not '-'" "e.g. x.a_b" "sub(a, b)"
    refute_output --partial "malformed number"
    # a regnet-style state_dict key as a declared name
    printf 'input x : f32[N,4]\nparam block1-0.weight : f32[3,4]\ny = linear(x, block1-0.weight, out=3, bias=false)\n' > "$T/regnet.mgt"
    run "$MGE_OPT" "$T/regnet.mgt" -o "$T/out"
    says "$T/regnet.mgt:2:13" "'block1-0.weight' is not a name" "block1_0.weight"
    # an operator the text form does not have, and a name starting with a digit
    printf 'input x : f32[N,4]\ny = relu(-x)\n' > "$T/neg.mgt"
    run "$MGE_OPT" "$T/neg.mgt" -o "$T/out"
    says "$T/neg.mgt:2:10" "no operators" "neg(x)"
    printf 'input x : f32[N,4]\ny = relu(0.weight)\n' > "$T/digit.mgt"
    run "$MGE_OPT" "$T/digit.mgt" -o "$T/out"
    says "$T/digit.mgt:2:10" "cannot start with a digit" "_0.weight"
    [ ! -e "$T/out" ]
}

@test "state_dict keys the text form cannot spell get an error that says so and how to rename them" {
    need_numpy
    printf 'input x : f32[N,4]\nblock1_0 = linear(x, out=3)\noutput block1_0\n' > "$T/r.mgt"
    py 'np.savez(sys.argv[1], **{"block1-0.weight": np.ones((3, 4), np.float32), "block1-0.bias": np.zeros(3, np.float32)})' "$T/r.npz"
    run "$MGE_OPT" "$T/r.mgt" --weights "$T/r.npz" -o "$T/out"
    says "$T/r.npz" "'block1-0.weight' cannot be a name in the text form" "k.replace('-', '_')"
    [ ! -e "$T/out" ]
    # the advice works: renamed keys bind
    py 'd = np.load(sys.argv[1]); np.savez(sys.argv[2], **{k.replace("-", "_"): d[k] for k in d.files})' "$T/r.npz" "$T/r2.npz"
    run "$MGE_OPT" "$T/r.mgt" --weights "$T/r2.npz" -o "$T/out"
    assert_success
    # nn.Sequential keys start with a digit
    printf 'input x : f32[N,4]\n_0 = linear(x, out=3)\noutput _0\n' > "$T/s.mgt"
    py 'np.savez(sys.argv[1], **{"0.weight": np.ones((3, 4), np.float32), "0.bias": np.zeros(3, np.float32)})' "$T/s.npz"
    run "$MGE_OPT" "$T/s.mgt" --weights "$T/s.npz" -o "$T/out2"
    says "$T/s.npz" "'0.weight' cannot be a name" "('_' + k if k[:1].isdigit() else k)"
}

@test "--allow-unused binds what matches and lists the rest as a warning" {
    need_numpy
    make_mlp_mge
    "$MGE_DUMP" "$T/mlp.mge" --params "$T/w.npz" > /dev/null
    py 'd = dict(np.load(sys.argv[1])); d["head.weight"] = np.zeros((2, 3), np.float32)
d["fc1.weight"] = np.full(d["fc1.weight"].shape, 0.5, np.float32); np.savez(sys.argv[2], **d)' "$T/w.npz" "$T/extra.npz"
    # strict by default
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/extra.npz" -o "$T/m.mge"
    assert_failure 1
    assert_output --partial "1 unknown name"
    [ ! -e "$T/m.mge" ]
    run --separate-stderr "$MGE_OPT" "$T/mlp.mgt" --weights "$T/extra.npz" --allow-unused -o "$T/m.mge"
    assert_success
    [[ "$stderr" == *"mge-opt: $T/extra.npz: warning: 1 unused entry"*"head.weight"* ]] || { echo "$stderr"; false; }
    "$MGE_DUMP" "$T/m.mge" --params "$T/back.npz" > /dev/null
    run py 'b = np.load(sys.argv[1]); print(sorted(b.files), float(b["fc1.weight"].min()), float(b["fc1.weight"].max()))' "$T/back.npz"
    assert_output "['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight'] 0.5 0.5"
    # -q keeps it quiet; a missing parameter is still an error
    py 'd = dict(np.load(sys.argv[1])); del d["fc2.bias"]; np.savez(sys.argv[2], **d)' "$T/extra.npz" "$T/missing.npz"
    run "$MGE_OPT" "$T/mlp.mgt" --weights "$T/missing.npz" --allow-unused -o "$T/m2.mge"
    assert_failure 1
    assert_output --partial "fc2.bias"
    run --separate-stderr "$MGE_OPT" -q "$T/mlp.mgt" --weights "$T/extra.npz" --allow-unused -o "$T/m3.mge"
    assert_success
    [ -z "$stderr" ]
    # mge-train takes it too; without --weights it is a usage error
    run "$MGE_BIN/mge-train" "$T/mlp.mgt" --data "$T/none" --allow-unused -o "$T/t.mge"
    assert_failure 2
    run "$MGE_OPT" "$T/mlp.mgt" --allow-unused -o "$T/m4.mge"
    assert_failure 2
    assert_output --partial "--allow-unused only applies to --weights"
}

@test "mge-train --allow-unused starts from the matching weights" {
    need_numpy
    write_small
    py 'rng = np.random.default_rng(0)
np.savez(sys.argv[1], x=rng.standard_normal((32, 4)).astype(np.float32), label=rng.integers(0, 3, 32).astype(np.int32))
np.savez(sys.argv[2], **{"fc1.bias": np.ones(8, np.float32), "old_head.weight": np.ones((5, 8), np.float32)})' "$T/d.npz" "$T/w.npz"
    run "$MGE_BIN/mge-train" "$T/small.mgt" --data "$T/d.npz" --weights "$T/w.npz" --steps 1 -o "$T/t.mge"
    assert_failure 1
    assert_output --partial "old_head.weight"
    run "$MGE_BIN/mge-train" "$T/small.mgt" --data "$T/d.npz" --weights "$T/w.npz" --allow-unused --steps 1 -o "$T/t.mge"
    assert_success
    assert_output --partial "warning: 1 unused entry"
    assert_output --partial "old_head.weight"
}
