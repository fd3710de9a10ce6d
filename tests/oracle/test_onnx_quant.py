"""ONNX Runtime-quantized models through mge's ONNX import, against ONNX Runtime.

A small f32 net (Conv+Relu, a strided Conv+Relu, Flatten, MatMul+Add;
seeded random weights) is written with onnx.helper at opset 13, then
quantized at test time by onnxruntime.quantization:
  quantize_static, QDQ format: QuantizeLinear/DequantizeLinear pairs
      (u8 activations with per-channel i8 weights; i8 activations and
      weights per tensor),
  quantize_static, QOperator format: QLinearConv and QLinearMatMul (u8
      weights per tensor; i8 weights per channel),
  quantize_dynamic: DynamicQuantizeLinear, ConvInteger, MatMulInteger
      (u8 and i8 weights).
`mge-run MODEL.onnx` and `mge-run` of `mge-opt -O2 MODEL.onnx` must give
ONNX Runtime's outputs on the same inputs, and so must ONNX Runtime on the
model mge writes back (`mge-opt MODEL.onnx -o BACK.onnx`). Both follow ONNX's integer
semantics, so nearly every output is bit-identical; the checks allow a
stray tie rounded the other way in one intermediate (ORT requantizes in
f32, mge in double as ONNX's reference does): at least 98% of the outputs
equal and none off by more than 2% of the output range. Skipped, visibly,
without onnx or onnxruntime (and its quantization tool's ml_dtypes)."""
import os

import numpy as np

from common import Skip, npy_stream, read_stream, run, tmpdir, tool

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, \
        quantize_static
except ImportError as e:
    raise Skip(f"onnx / onnxruntime.quantization not importable ({e}); pip install onnxruntime ml_dtypes")


def _f32_model(path):
    rng = np.random.default_rng(0)

    def init(name, *shape, sd):
        return numpy_helper.from_array(rng.normal(0, sd, shape).astype(np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Flatten", ["r2"], ["f"]),
             helper.make_node("MatMul", ["f", "w3"], ["m"]),
             helper.make_node("Add", ["m", "b3"], ["y"])]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
                          [init("w1", 8, 3, 3, 3, sd=0.3), init("b1", 8, sd=0.1), init("w2", 8, 8, 3, 3, sd=0.2),
                           init("b2", 8, sd=0.1), init("w3", 128, 10, sd=0.1), init("b3", 10, sd=0.1)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


class _Calib(CalibrationDataReader):
    def __init__(self):
        rng = np.random.default_rng(7)
        self.it = iter([{"x": rng.normal(0, 1, (2, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.it, None)


_MODELS = None


def _models():
    """name -> (quantized .onnx path, the op types it must hold), made once."""
    global _MODELS
    if _MODELS is None:
        d = tmpdir()
        f32 = os.path.join(d, "f32.onnx")
        _f32_model(f32)
        U8, S8 = QuantType.QUInt8, QuantType.QInt8
        specs = {
            "qdq_u8_perchannel": (dict(quant_format=QuantFormat.QDQ, per_channel=True, activation_type=U8,
                                       weight_type=S8), {"QuantizeLinear", "DequantizeLinear"}),
            "qdq_s8": (dict(quant_format=QuantFormat.QDQ, per_channel=False, activation_type=S8, weight_type=S8),
                       {"QuantizeLinear", "DequantizeLinear"}),
            "qop_u8": (dict(quant_format=QuantFormat.QOperator, per_channel=False, activation_type=U8,
                            weight_type=U8), {"QLinearConv", "QLinearMatMul"}),
            "qop_s8w_perchannel": (dict(quant_format=QuantFormat.QOperator, per_channel=True, activation_type=U8,
                                        weight_type=S8), {"QLinearConv", "QLinearMatMul"}),
        }
        _MODELS = {}
        for name, (kw, ops) in specs.items():
            p = os.path.join(d, name + ".onnx")
            # Add stays f32: ORT's QLinearAdd is a com.microsoft op, not ONNX's
            quantize_static(f32, p, _Calib(), op_types_to_quantize=["Conv", "MatMul"], **kw)
            _MODELS[name] = (p, ops)
        for name, wt in (("dynamic_u8", U8), ("dynamic_s8", S8)):
            p = os.path.join(d, name + ".onnx")
            quantize_dynamic(f32, p, weight_type=wt)
            _MODELS[name] = (p, {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"})
    return _MODELS


def _check(name, model, want, got):
    assert got.shape == want.shape and got.dtype == want.dtype, f"{name}: {got.shape} {got.dtype} vs " \
                                                                f"{want.shape} {want.dtype}"
    d = np.abs(got.astype(np.float64) - want)
    same = float(np.mean(d == 0))
    span = float(np.max(np.abs(want)))
    assert same >= 0.98 and d.max() <= 0.02 * span, \
        f"{name} ({os.path.basename(model)}): {same:.1%} of the outputs equal ORT's, max |diff| {d.max():g} " \
        f"of range {span:g}"


def _run_all(via_opt):
    rng = np.random.default_rng(1)
    xs = [rng.normal(0, 1, (n, 3, 8, 8)).astype(np.float32) for n in (3, 1)]
    for name, (path, ops) in _models().items():
        have = {n.op_type for n in onnx.load(path).graph.node}
        assert ops <= have, f"{name}: ORT's quantizer wrote {sorted(have)}, expected {sorted(ops)} among them"
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        want = [sess.run(None, {"x": x})[0] for x in xs]
        model = path
        if via_opt:
            model = path[:-5] + ".mge"
            run([tool("mge-opt"), "-O2", path, "-o", model])
        _, out, _ = run([tool("mge-run"), model, "--threads", "2"], npy_stream(*xs))
        got = read_stream(out)
        assert len(got) == len(xs), f"{name}: mge-run gave {len(got)} records for {len(xs)} inputs"
        for w, g in zip(want, got):
            _check(name, model, w, g)


def test_onnx_quantized_models_import():
    _run_all(False)


def test_onnx_quantized_models_opt():
    _run_all(True)


def test_onnx_quantized_models_export():
    """Imported and written back (mge-opt MODEL.onnx -o BACK.onnx: QuantizeLinear, DequantizeLinear,
    MatMulInteger, ConvInteger one to one, requantize as double arithmetic): ORT runs the result
    and gives the original's outputs."""
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (2, 3, 8, 8)).astype(np.float32)
    for name, (path, _) in _models().items():
        back = path[:-5] + "_back.onnx"
        run([tool("mge-opt"), path, "-o", back])
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        got = ort.InferenceSession(back, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        _check(name + " written back", back, want, got)


def test_mge_int8_export_reimport():
    """mge-quant's int8 LeNet written as ONNX QDQ (mge-opt --emit onnx: QuantizeLinear and
    DequantizeLinear around f32 Conv/Gemm, MaxPool on int8) and read back: ORT's outputs."""
    d = tmpdir()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    f32, q, onx = (os.path.join(d, n) for n in ("lenet.mge", "q.mge", "q.onnx"))
    run([tool("mge-opt"), os.path.join(root, "samples", "nets", "lenet.mgt"), "-o", f32])
    calib = os.path.join(d, "calib.npy")
    np.save(calib, np.random.default_rng(11).standard_normal((32, 1, 28, 28), dtype=np.float32))
    run([tool("mge-quant"), f32, "--calib", calib, "-q", "-o", q])
    run([tool("mge-opt"), q, "--emit", "onnx", "-o", onx])
    have = {n.op_type for n in onnx.load(onx).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "MaxPool"} <= have, sorted(have)
    x = np.random.default_rng(5).standard_normal((4, 1, 28, 28), dtype=np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(onx, so, providers=["CPUExecutionProvider"])
    want = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    _, out, _ = run([tool("mge-run"), onx, "--threads", "2"], npy_stream(x))
    _check("lenet int8 QDQ", onx, want, read_stream(out)[0])


def test_onnx_integer_conv_1d():
    """1-D QLinearConv (per-channel weight scales, bias, groups, pads, stride, dilation) and
    ConvInteger (run as 2-D over [N, C, 1, L]): ORT's outputs, bit for bit."""
    d = tmpdir()
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 4, 11)).astype(np.uint8)
    inits = [numpy_helper.from_array(rng.integers(-128, 128, (6, 2, 3)).astype(np.int8), "w"),
             numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(130, np.uint8), "xz"),
             numpy_helper.from_array((rng.random(6) * 0.01 + 0.001).astype(np.float32), "ws"),
             numpy_helper.from_array(np.zeros(6, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "ys"),
             numpy_helper.from_array(np.array(120, np.uint8), "yz"),
             numpy_helper.from_array(rng.integers(-500, 500, 6).astype(np.int32), "B")]
    nodes = {"qlinearconv": (helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"], ["y"],
                                              pads=[2, 1], strides=[2], dilations=[2], group=2), TensorProto.UINT8),
             "convinteger": (helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 2], group=2),
                             TensorProto.INT32)}
    for name, (node, yt) in nodes.items():
        used = [t for t in inits if t.name in node.input]
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 4, 11])],
                              [helper.make_tensor_value_info("y", yt, None)], used)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        p = os.path.join(d, name + ".onnx")
        onnx.save(m, p)
        want = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        _, out, _ = run([tool("mge-run"), p], npy_stream(x))
        got = read_stream(out)[0]
        assert got.dtype == want.dtype and got.shape == want.shape and (got == want).all(), \
            f"{name}: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}, " \
            f"{int(np.sum(got != want)) if got.shape == want.shape else '?'} differ"


def test_onnx_quantize_linear_errors():
    """A scale that fits no layout is refused by name, not read out of bounds."""
    d = tmpdir()
    p = os.path.join(d, "bad.onnx")
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    g = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3])],
                          [numpy_helper.from_array(np.ones(4, np.float32), "s"),
                           numpy_helper.from_array(np.zeros(4, np.uint8), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, p)
    rc, _, err = run([tool("mge-run"), p], npy_stream(np.zeros((2, 3), np.float32)), check=False)
    assert rc == 1 and "quantize_linear" in err and "[3] along axis 1" in err, (rc, err)
