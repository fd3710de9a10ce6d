"""The nn converters the ONNX node tests cover only in part, against
onnxruntime on one-node models built here: RNN (Tanh and Relu, forward,
reverse, bidirectional, layout 1 checked transposed; the layers also
written back by mge-opt and rerun), GRU with
linear_before_reset 0 and 1, LSTM with peephole weights P (an initializer
and a graph input), 3-D MaxPool with Indices (both storage orders) and
AveragePool with asymmetric pads and dilations, 1-D and 2-D MaxPool with
Indices and 1-D dilated and asymmetric AveragePool, 3-D ConvTranspose,
ScatterElements/ScatterND reductions. mge-run on cpu. Skips visibly when
onnxruntime or onnx is absent."""
import os

import numpy as np

from common import Skip, npy_stream, read_stream, rel_err, run, tmpdir, tool

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    raise Skip(f"onnxruntime/onnx not installed ({e}); scripts/deps installs them")

TOL = 1e-5


def _model(node, feeds, inits, outs, opset, out_types=None):
    gin = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in feeds.items()]
    out_types = out_types or [TensorProto.FLOAT] * len(outs)
    gout = [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types)]
    tensors = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    m = helper.make_model(helper.make_graph([node], "t", gin, gout, tensors),
                          opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(tmpdir(), "m.onnx")
    onnx.save(m, path)
    return path


def _compare(path, feeds, what, mine_feeds=None, fix=None):
    refs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    if fix:
        refs = fix(refs)
    _, out, _ = run([tool("mge-run"), path], stdin=npy_stream(*(mine_feeds or feeds).values()))
    got = read_stream(out)
    assert len(got) == len(refs), (what, len(got), len(refs))
    for i, (g, r) in enumerate(zip(got, refs)):
        assert g.shape == r.shape, f"{what}: output {i} shape {g.shape} != {r.shape}"
        if r.dtype.kind in "iu":
            assert np.array_equal(g, r), f"{what}: output {i} differs"
        else:
            e = rel_err(g, r)
            assert e < TOL, f"{what}: output {i} rel error {e:.3g}"


def _round_trip(path, feeds, what):
    """mge-opt's export of the imported model, run by onnxruntime, against the original."""
    back = os.path.join(tmpdir(), "back.onnx")
    run([tool("mge-opt"), path, "-q", "-o", back])
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(back, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert len(got) == len(want), (what, len(got), len(want))
    for i, (g, r) in enumerate(zip(got, want)):
        assert g.shape == r.shape and rel_err(g, r) < TOL, f"{what}: exported output {i}"


def _rnn_node(op, rng, S, N, I, H, direction, G, attrs, extra=None, layout=0):
    D = 2 if direction == "bidirectional" else 1
    inits = {"W": (rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32),
             "R": (rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32),
             "B": (rng.standard_normal((D, 2 * G * H)) * 0.3).astype(np.float32)}
    feeds = {"X": rng.standard_normal((S, N, I)).astype(np.float32),
             "H0": rng.standard_normal((D, N, H)).astype(np.float32)}
    ins = ["X", "W", "R", "B", "", "H0"]
    if op == "LSTM":
        feeds["C0"] = rng.standard_normal((D, N, H)).astype(np.float32)
        ins.append("C0")
    if extra:
        ins, feeds, inits = extra(ins, feeds, inits, D)
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, outs, hidden_size=H, direction=direction, **attrs)
    return node, feeds, inits, outs


def _rnn_case(op, seed, direction, G, attrs, extra=None, layout=0):
    rng = np.random.default_rng(seed)
    S, N, I, H = 4, 3, 5, 6
    node, feeds, inits, outs = _rnn_node(op, rng, S, N, I, H, direction, G, attrs, extra)
    ref_path = _model(node, feeds, inits, outs, 14)
    what = f"{op} {attrs} {direction} layout={layout}"
    if not layout:
        _compare(ref_path, feeds, what)
        _round_trip(ref_path, feeds, what)
        return
    # onnxruntime runs layout 0: the layout-1 model is checked against it transposed
    refs = ort.InferenceSession(ref_path, providers=["CPUExecutionProvider"]).run(None, feeds)
    want = [r.transpose(2, 0, 1, 3) if i == 0 else r.swapaxes(0, 1) for i, r in enumerate(refs)]
    node.attribute.append(helper.make_attribute("layout", 1))
    mine = {k: v.swapaxes(0, 1).copy() for k, v in feeds.items()}
    path = _model(node, mine, inits, outs, 14)
    _, out, _ = run([tool("mge-run"), path], stdin=npy_stream(*mine.values()))
    got = read_stream(out)
    for i, (g, r) in enumerate(zip(got, want)):
        assert g.shape == r.shape, (what, i, g.shape, r.shape)
        assert rel_err(g, r) < TOL, f"{what}: output {i}"


def test_onnx_rnn():
    for seed, (act, direction, layout) in enumerate([("Tanh", "forward", 0), ("Relu", "reverse", 0),
                                                     ("Tanh", "bidirectional", 0), ("Relu", "bidirectional", 1)]):
        D = 2 if direction == "bidirectional" else 1
        _rnn_case("RNN", seed, direction, 1, {"activations": [act] * D}, layout=layout)


def test_onnx_gru_linear_before_reset():
    for seed, (lbr, direction) in enumerate([(0, "forward"), (0, "bidirectional"), (1, "reverse")]):
        _rnn_case("GRU", 10 + seed, direction, 3, {"linear_before_reset": lbr})


def test_onnx_lstm_peepholes():
    def with_p(as_input):
        def extra(ins, feeds, inits, D):
            p = (np.random.default_rng(5).standard_normal((D, 3 * 6)) * 0.5).astype(np.float32)
            if as_input:
                feeds["P"] = p
            else:
                inits["P"] = p
            return ins + ["P"], feeds, inits
        return extra
    for seed, (direction, as_input) in enumerate([("forward", False), ("bidirectional", False),
                                                  ("reverse", True)]):
        _rnn_case("LSTM", 20 + seed, direction, 4, {}, extra=with_p(as_input))


def test_onnx_pools_3d_and_indices():
    rng = np.random.default_rng(40)
    x5 = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    x4 = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    x3 = rng.standard_normal((2, 3, 9)).astype(np.float32)
    cases = [
        ("MaxPool", x3, dict(kernel_shape=[3], strides=[2], pads=[1, 0]), 2, 0),
        ("AveragePool", x3, dict(kernel_shape=[3], dilations=[2], pads=[0, 2]), 1, 0),
        ("AveragePool", x3, dict(kernel_shape=[2], pads=[1, 0], count_include_pad=0), 1, 0),
        ("MaxPool", x5, dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 1, 0]), 2, 0),
        ("MaxPool", x5, dict(kernel_shape=[2, 2, 2], strides=[2, 1, 2], storage_order=1), 2, 0),
        ("MaxPool", x4, dict(kernel_shape=[3, 2], strides=[2, 1], dilations=[2, 1], pads=[1, 0, 2, 1]), 2, 0),
        ("MaxPool", x4, dict(kernel_shape=[2, 2], storage_order=1), 2, 0),
        ("AveragePool", x5, dict(kernel_shape=[2, 3, 2], strides=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1]), 1, 0),
        ("AveragePool", x5, dict(kernel_shape=[2, 2, 3], pads=[1, 1, 0, 0, 1, 2], count_include_pad=1), 1, 0),
        ("AveragePool", x5, dict(kernel_shape=[3, 2, 2], dilations=[2, 1, 2], strides=[1, 1, 2]), 1, 0),
        ("AveragePool", x5, dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], ceil_mode=1), 1, 0),
    ]
    for op, x, attrs, nout, _ in cases:
        outs = ["Y", "I"][:nout]
        node = helper.make_node(op, ["X"], outs, **attrs)
        feeds = {"X": x}
        path = _model(node, feeds, {}, outs, 19, [TensorProto.FLOAT, TensorProto.INT64][:nout])
        _compare(path, feeds, f"{op} {x.shape} {attrs}")


def test_onnx_scatter_reductions():
    rng = np.random.default_rng(41)
    for red in ("add", "mul", "max", "min"):
        data = rng.standard_normal((4, 5)).astype(np.float32)
        idx = rng.integers(-4, 4, size=(3, 5)).astype(np.int64)
        upd = rng.standard_normal((3, 5)).astype(np.float32)
        node = helper.make_node("ScatterElements", ["D", "I", "U"], ["Y"], axis=0, reduction=red)
        feeds = {"D": data, "I": idx, "U": upd}
        _compare(_model(node, feeds, {}, ["Y"], 18), feeds, f"ScatterElements {red}")
        ind = rng.integers(0, 4, size=(6, 1)).astype(np.int64)
        upd2 = rng.standard_normal((6, 5)).astype(np.float32)
        node = helper.make_node("ScatterND", ["D", "I", "U"], ["Y"], reduction=red)
        feeds = {"D": data, "I": ind, "U": upd2}
        _compare(_model(node, feeds, {}, ["Y"], 18), feeds, f"ScatterND {red}")


def test_onnx_convtranspose_3d():
    rng = np.random.default_rng(42)
    cases = [  # C_in, C_out/g, group, kernel, strides, pads, dilations, output_padding, bias
        (2, 3, 1, [3, 3, 3], [1, 1, 1], [0] * 6, [1, 1, 1], [0, 0, 0], True),
        (4, 1, 2, [2, 3, 2], [2, 1, 3], [1, 1, 0, 1, 1, 0], [1, 2, 1], [1, 0, 2], True),
        (3, 2, 1, [1, 2, 3], [3, 2, 1], [0, 1, 1, 0, 1, 1], [2, 1, 1], [0, 1, 0], False),
    ]
    for cin, cog, g, k, s, p, dl, op, bias in cases:
        x = rng.standard_normal((2, cin, 3, 4, 5)).astype(np.float32)
        inits = {"W": rng.standard_normal((cin, cog, *k)).astype(np.float32)}
        ins = ["X", "W"]
        if bias:
            inits["B"] = rng.standard_normal(cog * g).astype(np.float32)
            ins.append("B")
        node = helper.make_node("ConvTranspose", ins, ["Y"], kernel_shape=k, strides=s, pads=p, dilations=dl,
                                output_padding=op, group=g)
        feeds = {"X": x}
        _compare(_model(node, feeds, inits, ["Y"], 11), feeds, f"ConvTranspose 3-D k{k} s{s} p{p} d{dl} op{op} g{g}")
