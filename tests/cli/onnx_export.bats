#!/usr/bin/env bats
# mge-opt --emit onnx: the flag and its spellings, the unsupported-op
# listing, nothing written on error, the same bytes twice. The numbers
# (onnxruntime against mge-run) are tests/oracle/test_onnx_export.py's.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# An ONNX ModelProto starts with field 1 (ir_version) = 8: bytes 08 08.
is_onnx() {
    [ "$(head -c 2 "$1" | od -An -tx1 | tr -d ' ')" = "0808" ]
}

@test "--emit onnx writes an ONNX model; -o FILE.onnx implies it" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" --emit onnx -o "$T/a.bin"
    is_onnx "$T/a.bin"
    "$MGE_OPT" "$T/conv.mgt" -o "$T/b.onnx"
    is_onnx "$T/b.onnx"
    cmp "$T/a.bin" "$T/b.onnx"
    "$MGE_OPT" "$T/conv.mgt" -o "$T/C.ONNX"
    cmp "$T/a.bin" "$T/C.ONNX"
    # to stdout (binary: refused on a terminal, fine in a pipe)
    "$MGE_OPT" "$T/conv.mgt" --emit onnx > "$T/c.onnx"
    cmp "$T/a.bin" "$T/c.onnx"
}

@test "--emit mge and --emit text are the default and -S" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/d.mge"
    "$MGE_OPT" "$T/conv.mgt" --emit mge -o "$T/e.mge"
    cmp "$T/d.mge" "$T/e.mge"
    # --emit says what to write whatever the name
    "$MGE_OPT" "$T/conv.mgt" --emit mge -o "$T/f.onnx"
    cmp "$T/d.mge" "$T/f.onnx"
    "$MGE_OPT" -S "$T/conv.mgt" > "$T/s.mgt"
    "$MGE_OPT" --emit text "$T/conv.mgt" > "$T/t.mgt"
    cmp "$T/s.mgt" "$T/t.mgt"
}

@test "--emit usage errors" {
    write_conv
    run --separate-stderr "$MGE_OPT" "$T/conv.mgt" --emit tflite -o "$T/x"
    assert_failure 2
    [[ "$stderr" == *"--emit tflite: expected mge, text or onnx"* ]]
    run --separate-stderr "$MGE_OPT" -S --emit onnx "$T/conv.mgt"
    assert_failure 2
    [[ "$stderr" == *"-S and --emit onnx cannot be combined"* ]]
    [ ! -e "$T/x" ]
}

@test "the ONNX file is the same bytes twice, also after -O2 and from the .mge" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/1.onnx"
    "$MGE_OPT" "$T/conv.mgt" -o "$T/2.onnx"
    cmp "$T/1.onnx" "$T/2.onnx"
    "$MGE_OPT" "$T/conv.mgt" -o "$T/conv.mge"
    "$MGE_OPT" "$T/conv.mge" -o "$T/3.onnx"
    cmp "$T/1.onnx" "$T/3.onnx"
    "$MGE_OPT" -O2 "$T/conv.mge" -o "$T/4.onnx"
    "$MGE_OPT" -O2 "$T/conv.mge" -o "$T/5.onnx"
    cmp "$T/4.onnx" "$T/5.onnx"
    is_onnx "$T/4.onnx"
}

@test "a model with a loss exports its inference part: the label input goes" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/conv.onnx"
    run "${PYTHON:-/usr/bin/python3}" -c '
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m)
print([i.name for i in m.graph.input], [o.name for o in m.graph.output], m.opset_import[0].version, m.ir_version,
      m.producer_name, [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim])
' "$T/conv.onnx"
    if [[ "$output" == *"No module named"* ]]; then
        skip "the onnx Python package is not installed"
    fi
    assert_success
    assert_output "['x'] ['fc'] 17 8 mge ['N', 1, 8, 8]"
}

@test "ops without an ONNX form are listed at once, exit 1, nothing written" {
    cat > "$T/bad.mgt" <<'NET'
input x : f32[N,3,8,8]
input t : f32[N,3,3,3]
b = adaptive_avgpool2d(x, output_size=3)
l = mse(b, t)
c = relu(b)
output c, l
NET
    echo keep > "$T/out.onnx"
    run --separate-stderr "$MGE_OPT" "$T/bad.mgt" -o "$T/out.onnx"
    assert_failure 1
    [[ "$stderr" == *"2 nodes cannot be written as ONNX (nothing written):"* ]]
    [[ "$stderr" == *"node 'b' (adaptive_avgpool2d): output size 3 does not divide the input's 8"* ]]
    [[ "$stderr" == *"node 'l' (mse): a loss (export the model's outputs, not its loss)"* ]]
    [ "$(cat "$T/out.onnx")" = keep ]
    run --separate-stderr "$MGE_OPT" "$T/bad.mgt" -o "$T/new.onnx"
    assert_failure 1
    [ ! -e "$T/new.onnx" ]
    [ -z "$(ls -A "$T" | grep '^\.new\.onnx\.' || true)" ]
}

@test "the exported model reads back into mge and gives the same outputs" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/conv.mge"
    "$MGE_OPT" "$T/conv.mge" -o "$T/conv.onnx"
    "${PYTHON:-/usr/bin/python3}" -c 'import numpy as np; np.save("'"$T"'/x.npy", np.random.default_rng(1).standard_normal((2, 1, 8, 8), dtype=np.float32))'
    "$MGE_RUN" "$T/conv.mge" < "$T/x.npy" > "$T/a.npy"
    "$MGE_RUN" "$T/conv.onnx" < "$T/x.npy" > "$T/b.npy"
    "${PYTHON:-/usr/bin/python3}" -c 'import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); assert a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6), (a, b)' "$T/a.npy" "$T/b.npy"
}
