#!/usr/bin/env bats
# onnx_errors.bats — bad ONNX models of every kind. Each is refused by every
# tool that reads a model with one "TOOL: FILE: error: ..." message, exit 1,
# no crash and no output file (-o): damaged protobuf (truncated, wrong wire
# types, sizes past the end), graphs that break SSA (cycles, use before
# definition, duplicate names, undefined names, no outputs), tensors mge
# cannot hold (raw_data of the wrong size, negative dims, rank > 8, strings),
# external data outside the model's folder or short, an opset newer than mge
# knows, and unsupported ops (all listed at once). A declared output shape
# that disagrees with inference is a warning and the model runs; external
# data that stays inside the folder works. The models are built here with
# python3's onnx.helper (skipped, saying so, without it).
bats_require_minimum_version 1.5.0

setup() {
    load helper
    "$PY" -c 'import onnx' 2>/dev/null || skip "python3 lacks the onnx module ($PY; scripts/deps installs it)"
}

# mk FILE 'python: set m (helpers: model, vi, h, T, nh, np, onnx)' — writes
# m serialized to FILE; the code may instead set raw (bytes) to write those.
mk() {
    local out=$1 code=$2
    "$PY" -c "import sys, os, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
vi = h.make_tensor_value_info
def model(nodes, ins, outs, inits=(), opset=13):
    m = h.make_model(h.make_graph(nodes, 'g', ins, outs, list(inits)),
                     opset_imports=[h.make_opsetid('', opset)], producer_name='onnx_errors.bats')
    m.ir_version = 8
    return m
# the good model: y = relu(x + b), x f32[2,3]
def good():
    return model([h.make_node('Add', ['x', 'b'], ['s']), h.make_node('Relu', ['s'], ['y'])],
                 [vi('x', T.FLOAT, [2, 3])], [vi('y', T.FLOAT, [2, 3])],
                 [nh.from_array(np.array([1, -2, 3], np.float32), 'b')])
def ext(name, dims, loc, offset=None, length=None):
    t = onnx.TensorProto(name=name, data_type=T.FLOAT, dims=dims, data_location=T.EXTERNAL)
    kv = [('location', loc)] + ([('offset', str(offset))] if offset is not None else []) + \
         ([('length', str(length))] if length is not None else [])
    for k, v in kv:
        t.external_data.add(key=k, value=v)
    return t
out = sys.argv[1]
raw = None
$code
open(out, 'wb').write(raw if raw is not None else m.SerializeToString())" "$out"
}

# rejects FILE 'text the message must hold' — every model reader refuses it
rejects() {
    local f=$1 want=$2 tool
    for tool in mge-dump mge-opt mge-run mge-prof mge-bench; do
        rm -f "$T/out"
        local o=(-o "$T/out")
        [ $tool = mge-prof ] && o=()
        run --separate-stderr "$MGE_BIN/$tool" "$f" "${o[@]}" < /dev/null
        [ "$status" = 1 ] || { echo "$tool: exit $status: $stderr"; return 1; }
        [[ "$stderr" == "$tool: $f: error: "*"$want"* ]] || { echo "$tool: stderr: $stderr"; return 1; }
        [ ! -e "$T/out" ] || { echo "$tool left $T/out"; return 1; }
    done
    # mge-train and mge-quant need more arguments; the model is read first
    run --separate-stderr "$MGE_BIN/mge-train" "$f" --data "$T/none.npz" -o "$T/out"
    [ "$status" = 1 ] && [[ "$stderr" == "mge-train: $f: error: "*"$want"* ]] || { echo "mge-train: $stderr"; return 1; }
    [ ! -e "$T/out" ]
    run --separate-stderr "$MGE_BIN/mge-quant" "$f" --calib "$T/none.npy" -o "$T/out"
    [ "$status" = 1 ] && [[ "$stderr" == "mge-quant: $f: error: "*"$want"* ]] || { echo "mge-quant: $stderr"; return 1; }
    [ ! -e "$T/out" ]
}

@test "the good model the damaged ones start from runs" {
    mk "$T/good.onnx" 'm = good()'
    py 'np.save(sys.argv[1], np.array([[1, 2, 3], [-4, -5, -6]], np.float32))' "$T/x.npy"
    run --separate-stderr "$MGE_RUN" "$T/good.onnx" -i "$T/x.npy" -o "$T/y.npy"
    assert_success
    [ "$stderr" = "" ]
    py 'y = np.load(sys.argv[1]); assert (y == [[2, 0, 6], [0, 0, 0]]).all(), y' "$T/y.npy"
}

@test "a truncated protobuf is refused, at every length" {
    mk "$T/good.onnx" 'm = good()'
    size=$(stat -c %s "$T/good.onnx")
    for n in $((size / 2)) $((size - 1)) 10; do
        head -c "$n" "$T/good.onnx" > "$T/cut.onnx"
        rejects "$T/cut.onnx" "not a valid ONNX model: the protobuf is truncated or corrupted"
    done
    # cut where a field ends: the graph is missing
    head -c 20 "$T/good.onnx" > "$T/cut.onnx"
    rejects "$T/cut.onnx" "the model has no graph (is the file cut short?)"
}

@test "wrong wire types are refused" {
    # ModelProto.graph (field 7) as a varint, then as a fixed32, instead of
    # bytes (after ir_version and producer_name, so it is still taken for ONNX)
    mk "$T/wt.onnx" 'g = good().graph.SerializeToString()
raw = bytes([0x08, 8, 0x12, 1, 0x61, 0x38, 0x05, 0x3a, len(g)]) + g'
    rejects "$T/wt.onnx" "not a valid ONNX model"
    mk "$T/wt2.onnx" 'raw = bytes([0x08, 8, 0x12, 1, 0x61, 0x3d, 1, 2, 3, 4])'
    rejects "$T/wt2.onnx" "not a valid ONNX model"
    # a NodeProto's input (a string) given as a varint, deep in the graph
    mk "$T/wt3.onnx" 'm = good()
raw = bytearray(m.SerializeToString())
i = raw.index(b"\x0a\x01x\x0a\x01b")   # the Add node: input "x", input "b"
raw[i] = 0x08
raw = bytes(raw)'
    rejects "$T/wt3.onnx" "not a valid ONNX model"
}

@test "declared sizes larger than the file are refused" {
    # the graph's length prefix says 2^21 bytes; the file ends long before
    mk "$T/big.onnx" 'g = good().graph.SerializeToString()
raw = bytes([0x08, 8, 0x3a, 0x80, 0x80, 0x80, 0x01]) + g'
    rejects "$T/big.onnx" "not a valid ONNX model"
    # an initializer whose raw_data length runs past the end of the graph
    mk "$T/big2.onnx" 'm = good()
raw = bytearray(m.SerializeToString())
i = raw.index(b"\x4a\x0c")   # raw_data (field 9) of 12 bytes
raw[i + 1] = 0x7f
raw = bytes(raw)'
    rejects "$T/big2.onnx" "not a valid ONNX model"
}

@test "If nodes nested 20000 deep are refused, not a stack overflow" {
    # each level: GraphProto.node -> NodeProto.attribute -> AttributeProto.g;
    # built from the inside out (lengths only), then written outside in
    mk "$T/deep.onnx" 'def varint(n):
    out = b""
    while True:
        b, n = n & 0x7f, n >> 7
        out += bytes([b | 0x80 if n else b])
        if not n:
            return out
tagl = lambda f, n: varint(f << 3 | 2) + varint(n)
L, pre = 0, []
for i in range(20000):
    a = tagl(1, 4) + b"then" + tagl(6, L)
    nd = tagl(4, 2) + b"If" + tagl(5, len(a) + L)
    gr = tagl(1, len(nd) + len(a) + L)
    L += len(gr) + len(nd) + len(a)
    pre.append(gr + nd + a)
raw = b"\x08\x08" + tagl(2, 1) + b"x" + tagl(7, L) + b"".join(reversed(pre)) + tagl(8, 2) + b"\x10\x0d"'
    rejects "$T/deep.onnx" "not a valid ONNX model: messages nested more than 100 deep"
}

@test "a graph with a cycle is refused" {
    mk "$T/cyc.onnx" 'm = model([h.make_node("Add", ["x", "b2"], ["a"]), h.make_node("Relu", ["a"], ["b2"])],
              [vi("x", T.FLOAT, [2])], [vi("b2", T.FLOAT, [2])])'
    rejects "$T/cyc.onnx" "reads 'b2' before it is defined (the nodes are not in topological order, or the graph has a cycle)"
}

@test "an input used before its node is refused, naming both" {
    mk "$T/order.onnx" 'm = model([h.make_node("Relu", ["s"], ["y"], name="second"), h.make_node("Neg", ["x"], ["s"], name="first")],
              [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])'
    rejects "$T/order.onnx" "node 'second' (Relu) reads 's' before it is defined"
}

@test "duplicate names are refused: two nodes, a node and an initializer, two inputs" {
    mk "$T/d1.onnx" 'm = model([h.make_node("Relu", ["x"], ["y"], name="r1"), h.make_node("Neg", ["x"], ["y"], name="r2")],
              [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])'
    rejects "$T/d1.onnx" "'y' is defined twice (by node 'r2' (Neg) and another node)"
    mk "$T/d2.onnx" 'm = model([h.make_node("Relu", ["x"], ["b"], name="r1")], [vi("x", T.FLOAT, [2])], [vi("b", T.FLOAT, [2])],
              [nh.from_array(np.ones(2, np.float32), "b")])'
    rejects "$T/d2.onnx" "'b' is defined twice (by node 'r1' (Relu) and as an initializer)"
    mk "$T/d3.onnx" 'm = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2]), vi("x", T.FLOAT, [2])],
              [vi("y", T.FLOAT, [2])])'
    rejects "$T/d3.onnx" "graph input 'x' is listed twice"
    mk "$T/d4.onnx" 'm = model([h.make_node("Relu", ["x"], ["x"], name="r")], [vi("x", T.FLOAT, [2])], [vi("x", T.FLOAT, [2])])'
    rejects "$T/d4.onnx" "'x' is defined twice (by node 'r' (Relu) and as an input)"
    mk "$T/d5.onnx" 'm = good(); m.graph.initializer.append(nh.from_array(np.ones(3, np.float32), "b"))'
    rejects "$T/d5.onnx" "initializer 'b' is given twice"
}

@test "a name nothing defines (a missing initializer) is refused" {
    mk "$T/miss.onnx" 'm = good(); del m.graph.initializer[:]'
    rejects "$T/miss.onnx" "node Add -> 's' reads 'b', which nothing defines"
}

@test "external data outside the model's folder is refused: ../x, /abs, a symlink out" {
    mkdir -p "$T/m" "$T/outside"
    py 'np.arange(3, dtype=np.float32).tofile(sys.argv[1])' "$T/outside/w.bin"
    cp "$T/outside/w.bin" "$T/m/inside.bin"
    mk "$T/m/up.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "../outside/w.bin"))'
    rejects "$T/m/up.onnx" "external data '../outside/w.bin' leaves the model's folder"
    mk "$T/m/abs.onnx" "m = good(); m.graph.initializer[0].CopyFrom(ext('b', [3], '$T/outside/w.bin'))"
    rejects "$T/m/abs.onnx" "an absolute path"
    ln -s ../outside/w.bin "$T/m/link.bin"
    mk "$T/m/link.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "link.bin"))'
    rejects "$T/m/link.onnx" "external data 'link.bin' leaves the model's folder (it resolves to"
    # the same bytes inside the folder are fine
    mk "$T/m/in.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "inside.bin"))'
    run --separate-stderr "$MGE_DUMP" "$T/m/in.onnx"
    assert_success
}

@test "external data shorter than declared, or of the wrong length, is refused" {
    mkdir -p "$T/m"
    py 'np.arange(2, dtype=np.float32).tofile(sys.argv[1])' "$T/m/short.bin"
    mk "$T/m/short.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "short.bin"))'
    rejects "$T/m/short.onnx" "external data 'short.bin' is shorter than declared: 8 bytes, needs 12 at offset 0"
    py 'np.arange(3, dtype=np.float32).tofile(sys.argv[1])' "$T/m/w.bin"
    mk "$T/m/off.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "w.bin", offset=4))'
    rejects "$T/m/off.onnx" "is shorter than declared: 12 bytes, needs 12 at offset 4"
    mk "$T/m/len.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "w.bin", length=8))'
    rejects "$T/m/len.onnx" "external data 'w.bin': length 8, but the shape needs 12 bytes"
    mk "$T/m/none.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "nowhere.bin"))'
    rejects "$T/m/none.onnx" "external data"
    mk "$T/m/neg.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "w.bin", offset=-4))'
    rejects "$T/m/neg.onnx" "external data: bad offset '-4'"
}

@test "external data that is a FIFO or a folder is refused, without hanging" {
    mkdir -p "$T/m/dir.bin"
    mkfifo "$T/m/fifo.bin"
    mk "$T/m/fifo.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "fifo.bin"))'
    run --separate-stderr timeout 20 "$MGE_DUMP" "$T/m/fifo.onnx"
    assert_failure 1
    [[ "$stderr" == *"error: initializer 'b': external data '$T/m/fifo.bin': not a regular file" ]] || { echo "$stderr"; return 1; }
    mk "$T/m/dir.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "dir.bin"))'
    rejects "$T/m/dir.onnx" "not a regular file"
}

@test "a model from stdin with external data is refused: it has no folder" {
    mkdir -p "$T/m"
    py 'np.arange(3, dtype=np.float32).tofile(sys.argv[1])' "$T/m/w.bin"
    mk "$T/m/e.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(ext("b", [3], "w.bin"))'
    for tool in mge-dump mge-opt; do
        run --separate-stderr "$MGE_BIN/$tool" - -o "$T/out" < "$T/m/e.onnx"
        assert_failure 1
        [[ "$stderr" == "$tool: "*"error: "*"external data 'w.bin' cannot be resolved here (the model came from a stream: give its path)"* ]] ||
            { echo "$stderr"; return 1; }
        [ ! -e "$T/out" ]
    done
    py 'np.save(sys.argv[1], np.ones((2, 3), np.float32))' "$T/x.npy"
    run --separate-stderr "$MGE_RUN" - -i "$T/x.npy" -o "$T/out" < "$T/m/e.onnx"
    assert_failure 1
    [[ "$stderr" == "mge-run: <stdin>: error: "*"the model came from a stream: give its path"* ]] || { echo "$stderr"; return 1; }
    [ ! -e "$T/out" ]
    # the same model by its path reads the weights beside it
    run --separate-stderr "$MGE_RUN" "$T/m/e.onnx" -i "$T/x.npy" -o "$T/out"
    assert_success
}

@test "external data saved by onnx.save_model loads and runs" {
    mkdir -p "$T/ext"
    "$PY" -c "import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
b = np.array([1, -1, 0.5], np.float32)
g = h.make_graph([h.make_node('MatMul', ['x', 'w'], ['t']), h.make_node('Add', ['t', 'b'], ['y'])], 'g',
                 [h.make_tensor_value_info('x', T.FLOAT, ['N', 4])], [h.make_tensor_value_info('y', T.FLOAT, ['N', 3])],
                 [nh.from_array(w, 'w'), nh.from_array(b, 'b')])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
m.ir_version = 8
onnx.save_model(m, sys.argv[1], save_as_external_data=True, all_tensors_to_one_file=True, location='weights.bin',
                size_threshold=0)
x = np.arange(8, dtype=np.float32).reshape(2, 4)
np.save(sys.argv[2], x)
np.save(sys.argv[3], x @ w + b)" "$T/ext/model.onnx" "$T/x.npy" "$T/want.npy"
    [ -f "$T/ext/weights.bin" ]
    run --separate-stderr "$MGE_RUN" "$T/ext/model.onnx" -i "$T/x.npy" --check "$T/want.npy"
    echo "$stderr"
    assert_success
    # from another working directory, through a relative path
    cd "$T"
    run --separate-stderr "$MGE_RUN" ext/model.onnx -i x.npy -o y.npy
    assert_success
    py 'assert np.allclose(np.load(sys.argv[1]), np.load(sys.argv[2]), atol=1e-5)' y.npy want.npy
}

@test "an opset newer than mge knows is refused clearly" {
    mk "$T/new.onnx" 'm = good(); m.opset_import[0].version = 22'
    rejects "$T/new.onnx" "opset 22 is newer than mge knows (1 to 21)"
    mk "$T/new2.onnx" 'm = good(); m.opset_import[0].version = 1000000'
    rejects "$T/new2.onnx" "opset 1000000 is newer than mge knows"
}

@test "a declared output shape that disagrees with inference is a warning; the inferred one is used" {
    mk "$T/shape.onnx" 'm = good(); m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 5'
    py 'np.save(sys.argv[1], np.ones((2, 3), np.float32))' "$T/x.npy"
    run --separate-stderr "$MGE_RUN" "$T/shape.onnx" -i "$T/x.npy" -o "$T/y.npy"
    assert_success
    [[ "$stderr" == "mge-run: $T/shape.onnx: warning: output 'y' is declared [2,5], but mge infers f32[2,3]; using the inferred shape" ]] || { echo "$stderr"; return 1; }
    py 'assert np.load(sys.argv[1]).shape == (2, 3)' "$T/y.npy"
    run --separate-stderr "$MGE_OPT" "$T/shape.onnx" -o "$T/s.mge"
    assert_success
    [[ "$stderr" == "mge-opt: $T/shape.onnx: warning: "* ]]
    [ -f "$T/s.mge" ]
}

@test "unsupported ops are listed all at once, by node name and opset, and nothing is written" {
    # StringNormalizer and TfIdfVectorizer: ops mge has no converter for (update when one lands)
    mk "$T/uns.onnx" 'm = model([h.make_node("StringNormalizer", ["x"], ["d"], name="det1"), h.make_node("Relu", ["x"], ["r"], name="ok"),
               h.make_node("TfIdfVectorizer", ["x3"], ["f"], name="dft1"), h.make_node("Neg", ["d"], ["nd"], name="after_det")],
              [vi("x", T.FLOAT, [2, 2]), vi("x3", T.FLOAT, [1, 4, 1])],
              [vi("nd", T.FLOAT, []), vi("r", T.FLOAT, [2, 2]), vi("f", T.FLOAT, [1, 4, 2])], opset=17)'
    for tool in mge-dump mge-opt mge-run; do
        run --separate-stderr "$MGE_BIN/$tool" "$T/uns.onnx" -o "$T/out" < /dev/null
        assert_failure 1
        [[ "$stderr" == "$tool: $T/uns.onnx: error: 2 unsupported nodes"* ]] || { echo "$stderr"; return 1; }
        [[ "$stderr" == *"'det1' (StringNormalizer), opset 17: "* ]]
        [[ "$stderr" == *"'dft1' (TfIdfVectorizer), opset 17: "* ]]
        # what reads an unsupported node's output is not listed again
        [[ "$stderr" != *"after_det"* ]]
        [ ! -e "$T/out" ]
    done
}

@test "an op of another domain is listed as unsupported, naming the domain" {
    mk "$T/dom.onnx" 'm = model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Binarizer", ["r"], ["y"], name="bin", domain="ai.onnx.ml")],
              [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])
m.opset_import.append(h.make_opsetid("ai.onnx.ml", 3))'
    rejects "$T/dom.onnx" "'bin' (Binarizer), domain ai.onnx.ml: the domain is not supported"
    # a model that imports no opset of the default domain but uses it
    mk "$T/nodom.onnx" 'm = good(); m.opset_import[0].domain = "ai.onnx.ml"'
    rejects "$T/nodom.onnx" "is of the default ONNX domain, but the model imports no opset of it"
}

@test "raw_data of the wrong size is refused" {
    mk "$T/raw.onnx" 'm = good(); m.graph.initializer[0].raw_data = bytes(8)'
    rejects "$T/raw.onnx" "initializer 'b': raw_data holds 8 bytes, but f32[3] needs 12"
    mk "$T/typed.onnx" 'm = good(); t = m.graph.initializer[0]; t.ClearField("raw_data"); t.float_data.extend([1, 2])'
    rejects "$T/typed.onnx" "initializer 'b': tensor holds 2 elements, but its shape has 3"
}

@test "negative dims are refused, in a tensor and in a graph input" {
    mk "$T/neg.onnx" 'm = good(); t = m.graph.initializer[0]; t.dims[0] = -3'
    rejects "$T/neg.onnx" "initializer 'b': tensor dim 0 is negative (-3)"
    mk "$T/neg2.onnx" 'm = good(); m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -2'
    rejects "$T/neg2.onnx" "input 'x': dim 0 is negative (-2)"
}

@test "a tensor of rank 9 is refused: mge has 8 dims at most" {
    mk "$T/rank.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(nh.from_array(np.ones([1] * 8 + [3], np.float32), "b"))'
    rejects "$T/rank.onnx" "initializer 'b': tensor of rank 9 (mge has at most 8)"
    mk "$T/rank2.onnx" 'm = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [1] * 9)], [vi("y", T.FLOAT, [1] * 9)])'
    rejects "$T/rank2.onnx" "rank 9"
}

@test "string tensors are refused: mge has no string dtype" {
    mk "$T/str.onnx" 'm = good(); m.graph.initializer[0].CopyFrom(h.make_tensor("b", T.STRING, [3], [b"a", b"b", b"c"]))'
    rejects "$T/str.onnx" "initializer 'b': tensor of type string (mge has no such dtype)"
    mk "$T/str2.onnx" 'm = model([h.make_node("Identity", ["x"], ["y"])], [vi("x", T.STRING, [2])], [vi("y", T.STRING, [2])])'
    rejects "$T/str2.onnx" "string"
}

@test "a graph with no outputs, or an output nothing defines, is refused" {
    mk "$T/noout.onnx" 'm = good(); del m.graph.output[:]'
    rejects "$T/noout.onnx" "the graph has no outputs"
    mk "$T/undef.onnx" 'm = good(); m.graph.output.append(vi("ghost", T.FLOAT, [2]))'
    rejects "$T/undef.onnx" "output 'ghost' is not defined by any node, input or initializer"
    mk "$T/twice.onnx" 'm = good(); m.graph.output.append(vi("y", T.FLOAT, [2, 3]))'
    rejects "$T/twice.onnx" "graph output 'y' is listed twice"
    mk "$T/nodeout.onnx" 'm = good(); del m.graph.node[1].output[:]'
    rejects "$T/nodeout.onnx" "node Relu has no outputs"
}

@test "absent names (a branch output, a graph input, a node's op_type) are refused, not a crash" {
    # protobuf leaves them NULL: the fuzzer found If reading a branch output's
    mk "$T/if.onnx" 'nameless = onnx.ValueInfoProto(type=vi("t", T.FLOAT, [2]).type)
then_g = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [], [nameless])
m = model([h.make_node("Constant", [], ["c"], value=nh.from_array(np.array(True))),
           h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=then_g)],
          [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])'
    rejects "$T/if.onnx" "If -> 'y'"
    mk "$T/in.onnx" 'm = good(); m.graph.input[0].ClearField("name")'
    rejects "$T/in.onnx" "graph input 0 has no name"
    mk "$T/op.onnx" 'm = good(); m.graph.node[1].ClearField("op_type")'
    rejects "$T/op.onnx" "node making 'y' has no op_type"
    mk "$T/init.onnx" 'm = good(); m.graph.initializer[0].ClearField("name")'
    rejects "$T/init.onnx" "initializer 0 has no name"
}

@test "an output that is an input, an initializer or another output gets a copy under its own name" {
    mk "$T/alias.onnx" 'm = model([h.make_node("Identity", ["x"], ["y"]), h.make_node("Identity", ["x"], ["z"]),
               h.make_node("Relu", ["x"], ["r"]), h.make_node("Identity", ["r"], ["r2"])],
              [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2]), vi("z", T.FLOAT, [2]), vi("r", T.FLOAT, [2]), vi("r2", T.FLOAT, [2]),
               vi("x", T.FLOAT, [2]), vi("b", T.FLOAT, [2])], [nh.from_array(np.array([7, 8], np.float32), "b")])'
    py 'np.save(sys.argv[1], np.array([-1, 2], np.float32))' "$T/x.npy"
    run --separate-stderr "$MGE_RUN" "$T/alias.onnx" -i "$T/x.npy" -o "$T/o.npz"
    echo "$stderr"
    assert_success
    py 'o = np.load(sys.argv[1])
assert sorted(o.files) == ["b", "r", "r2", "x", "y", "z"], o.files
for k in "xyz": assert (o[k] == [-1, 2]).all(), k
assert (o["r"] == [0, 2]).all() and (o["r2"] == [0, 2]).all() and (o["b"] == [7, 8]).all()' "$T/o.npz"
}

@test "an optional output mge does not compute is unsupported when something reads it" {
    # opset 13's training outputs (running mean, var, saved ones) stay undefined
    mk "$T/bn.onnx" 'ins = [nh.from_array(np.ones(2, np.float32), n) for n in ["s", "bb", "mm", "vv"]]
m = model([h.make_node("BatchNormalization", ["x", "s", "bb", "mm", "vv"], ["y", "rm", "rv"], name="bn")],
          [vi("x", T.FLOAT, [2, 2])], [vi("y", T.FLOAT, [2, 2]), vi("rm", T.FLOAT, [2])], ins, opset=13)'
    run --separate-stderr "$MGE_DUMP" "$T/bn.onnx"
    assert_failure 1
    [[ "$stderr" == *"unsupported node"*"'bn' (BatchNormalization), opset 13"* ]] || { echo "$stderr"; return 1; }
}
