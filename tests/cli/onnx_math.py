"""onnx_math.py - the ONNX math, activation, logic, cast and reduction
converters (formats/onnx_ops_math.c, formats/onnx_ops_reduce.c) against
ONNX Runtime, over the opset versions the node test suite does not cover
(attribute axes, 2-D coerced Softmax, TopK's k attribute, Clip's bounds as
attributes, legacy broadcast) and the lowerings (Mod, Celu, Selu with other
constants, HardSigmoid, PRelu broadcasts, Gelu tanh, Hardmax, ArgMax
select_last_index, ReduceLogSumExp, ...).

  onnx_math.py MGE_RUN [-k SUBSTRING] [-v]

Each case is one node in a model of its own: inputs go to `mge-run
model.onnx` as an NPY stream and its outputs are compared with ONNX
Runtime's (rtol 1e-4, atol 1e-5; integers and booleans exact). A second
list holds models mge must refuse as unsupported (exit 1 with the reason).
Exit 0 when all agree, 1 otherwise (each disagreement printed); 77 when
numpy, onnx or onnxruntime is missing.
"""
import io
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import helper, TensorProto, numpy_helper
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    print(f"onnx_math.py: skipped: python lacks {e.name}", file=sys.stderr)
    sys.exit(77)

rng = np.random.default_rng(7)
ort.set_default_logger_severity(3)


def f32(*shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def ints(*shape, lo=-9, hi=9, dt=np.int64):
    return rng.integers(lo, hi, shape).astype(dt)


CASES = []
REFUSED = []


def case(op, opset, inputs, attrs=None, consts=None, order=None, nout=1, tag="", want=None, sym=False):
    """inputs / consts: dicts name -> array (graph inputs fed at run time,
    initializers); order: the node's input names ('' for an absent one);
    want: the expected outputs where ONNX Runtime has no kernel (opset < 7);
    sym: dim 0 of the first input is the symbol N in the model."""
    CASES.append((op, opset, inputs, attrs or {}, consts or {}, order, nout, tag, want, sym))


def refused(op, opset, inputs, attrs=None, consts=None, order=None, nout=1, tag="", why=""):
    REFUSED.append(((op, opset, inputs, attrs or {}, consts or {}, order, nout, tag, None, False), why))


def model(op, opset, inputs, attrs, consts, order, nout, sym=False):
    names = order if order is not None else list(inputs) + list(consts)
    outs = [f"y{k}" for k in range(nout)]
    node = helper.make_node(op, names, outs, **attrs)
    gin = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         ["N"] + list(v.shape[1:]) if sym and i == 0 else v.shape)
           for i, (k, v) in enumerate(inputs.items())]
    init = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    g = helper.make_graph([node], "t", gin, [helper.make_empty_tensor_value_info(o) for o in outs], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset < 15 else 8
    inf = onnx.shape_inference.infer_shapes(m)
    types = {vi.name: vi for vi in inf.graph.value_info}
    for k, o in enumerate(outs):
        if o in types:
            m.graph.output[k].CopyFrom(types[o])
    return m


def run_mge(mge_run, path, inputs):
    buf = io.BytesIO()
    for v in inputs.values():
        np.save(buf, v)
    p = subprocess.run([mge_run, path], input=buf.getvalue(), capture_output=True, timeout=60)
    if p.returncode:
        return None, p.stderr.decode(errors="replace").strip()
    out, got = io.BytesIO(p.stdout), []
    while out.tell() < len(p.stdout):
        got.append(np.load(out))
    return got, None


def label(c):
    op, opset, inputs, attrs, consts, order, nout, tag, _, sym = c
    return f"{op} opset {opset} {tag or attrs}" + (" [N]" if sym else "")


def main():
    mge_run = sys.argv[1]
    pat = sys.argv[sys.argv.index("-k") + 1] if "-k" in sys.argv else None
    verbose = "-v" in sys.argv
    bad = 0
    done = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        for c in CASES:
            if pat and pat not in label(c):
                continue
            m = model(*c[:7], sym=c[9])
            onnx.save(m, path)
            try:
                if c[8]:
                    want = c[8](**c[2])
                else:
                    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                    want = s.run(None, dict(c[2]))
            except Exception as e:
                print(f"SKIP {label(c)}: onnxruntime: {str(e)[:200]}")
                continue
            got, err = run_mge(mge_run, path, c[2])
            done += 1
            if got is None:
                print(f"FAIL {label(c)}: {err[:400]}")
                bad += 1
                continue
            if len(got) != len(want):
                print(f"FAIL {label(c)}: {len(got)} outputs, expected {len(want)}")
                bad += 1
                continue
            for k, (g, w) in enumerate(zip(got, want)):
                why = None
                if g.shape != w.shape:
                    why = f"shape {g.shape}, expected {w.shape}"
                elif w.dtype.kind in "biu":
                    if g.dtype != w.dtype or not np.array_equal(g, w):
                        why = f"{g.dtype} {g.ravel()[:8]}, expected {w.dtype} {w.ravel()[:8]}"
                elif g.dtype != w.dtype:
                    why = f"dtype {g.dtype}, expected {w.dtype}"
                elif not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-4, atol=1e-5,
                                     equal_nan=True):
                    why = f"max abs diff {np.nanmax(np.abs(g.astype(np.float64) - w)):.3g}"
                if why:
                    print(f"FAIL {label(c)}: output {k}: {why}")
                    bad += 1
                    break
            else:
                if verbose:
                    print(f"ok   {label(c)}")
        for c, why in REFUSED:
            if pat and pat not in label(c):
                continue
            onnx.save(model(*c[:7], sym=c[9]), path)
            got, err = run_mge(mge_run, path, c[2])
            done += 1
            if got is not None or "unsupported" not in err or why not in err:
                print(f"FAIL {label(c)}: expected an unsupported node ({why}), got {err or 'a result'}")
                bad += 1
            elif verbose:
                print(f"ok   {label(c)}: refused: {why}")
    print(f"onnx_math.py: {done} cases, {bad} disagree")
    return 1 if bad else 0


# ---------------------------------------------------------------- the cases

x34 = f32(3, 4)
x234 = f32(2, 3, 4)
pos34 = f32(3, 4, lo=0.1, hi=4)

# unary, one to one
for op in ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Erf", "Sign", "Floor", "Ceil", "Sin", "Cos", "Tan",
           "Softsign", "Softplus"]:
    case(op, 13 if op not in ("Sin", "Cos", "Tan", "Softsign", "Softplus") else 7, {"x": x234})
for op in ["Log", "Sqrt", "Reciprocal"]:
    case(op, 13, {"x": pos34})
case("Round", 11, {"x": np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1.2, -2.7], np.float32)})
case("Relu", 14, {"x": ints(3, 4, dt=np.int32)}, tag="int32")
case("Abs", 13, {"x": ints(3, 4)}, tag="int64")
case("Neg", 13, {"x": ints(3, 4, dt=np.int8)}, tag="int8")
case("Sign", 13, {"x": ints(3, 4, dt=np.int32)}, tag="int32")
case("Relu", 6, {"x": x34})
case("Mish", 18, {"x": x34})
case("HardSwish", 14, {"x": x34})
case("IsNaN", 13, {"x": np.array([1, np.nan, -np.inf, 0], np.float32)})
xinf = np.array([1, np.nan, -np.inf, np.inf, 0], np.float32)
for dp, dn in [(1, 1), (1, 0), (0, 1), (0, 0)]:
    case("IsInf", 10, {"x": xinf}, {"detect_positive": dp, "detect_negative": dn})

# activations with parameters
case("LeakyRelu", 16, {"x": x34}, {"alpha": 0.3})
case("LeakyRelu", 6, {"x": x34})
case("Elu", 6, {"x": x34}, {"alpha": 0.7})
case("Selu", 6, {"x": x34})
case("Selu", 6, {"x": x34}, {"alpha": 2.0, "gamma": 3.0})
case("Celu", 12, {"x": x34})
case("Celu", 12, {"x": x34}, {"alpha": 2.5})
case("ThresholdedRelu", 10, {"x": x34}, {"alpha": 0.5})
case("HardSigmoid", 6, {"x": x34})
case("HardSigmoid", 6, {"x": x34}, {"alpha": 1.0 / 6, "beta": 0.5}, tag="mge hsigmoid")
case("HardSigmoid", 6, {"x": x34}, {"alpha": 0.5, "beta": 0.1})
case("Gelu", 20, {"x": x34})
case("Gelu", 20, {"x": x34}, {"approximate": "tanh"})
x4d = f32(2, 3, 4, 5)
case("PRelu", 9, {"x": x4d}, consts={"s": f32(3, 1, 1, lo=0, hi=1)}, tag="per channel")
case("PRelu", 9, {"x": x4d}, consts={"s": np.array([0.2], np.float32)}, tag="one slope")
case("PRelu", 9, {"x": x4d, "s": f32(5)}, tag="slope along the last dim")
case("PRelu", 9, {"x": x4d, "s": f32(4, 5)}, tag="slope 2-D")
case("PRelu", 9, {"x": f32(4, 3)}, consts={"s": f32(3)}, tag="2-D x, per channel")
case("PRelu", 16, {"x": ints(3, 4, dt=np.int32), "s": ints(4, dt=np.int32)}, tag="int32")

# binary, comparisons, logic
for op in ["Add", "Sub", "Mul", "Div"]:
    case(op, 14, {"a": x234, "b": f32(3, 1, lo=0.5)}, tag="broadcast")
    case(op, 14, {"a": ints(3, 4, dt=np.int32), "b": ints(4, lo=1, dt=np.int32)}, tag="int32")
    fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
    case(op, 6, {"a": x234, "b": f32(3, lo=0.5)}, {"broadcast": 1, "axis": 1}, tag="legacy axis",
         want=lambda a, b, fn=fn: [fn(a, b[:, None])])
    case(op, 6, {"a": x234, "b": f32(4, lo=0.5)}, {"broadcast": 1}, tag="legacy suffix",
         want=lambda a, b, fn=fn: [fn(a, b)])
case("Div", 14, {"a": np.array([7, -7, 7, -7], np.int64), "b": np.array([2, 2, -2, -2], np.int64)}, tag="trunc")
for op in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]:
    case(op, 16 if "Or" in op else 13, {"a": ints(3, 4), "b": ints(4)})
    case(op, 16 if "Or" in op else 13, {"a": x34, "b": np.array(0.5, np.float32)}, tag="float")
bools = {"a": rng.integers(0, 2, (3, 4)).astype(bool), "b": rng.integers(0, 2, (4,)).astype(bool)}
for op in ["And", "Or", "Xor"]:
    case(op, 7, dict(bools))
case("Not", 1, {"x": bools["a"]})
case("Equal", 13, dict(bools), tag="bool")
case("Greater", 13, {"a": ints(3, 4, lo=0, hi=9, dt=np.uint8), "b": ints(4, lo=0, hi=9, dt=np.uint8)}, tag="uint8")
case("Abs", 13, {"x": ints(3, 4, lo=0, hi=200, dt=np.uint8)}, tag="uint8")
case("Sign", 13, {"x": ints(3, 4, lo=0, hi=3, dt=np.uint8)}, tag="uint8")
case("Where", 16, {"c": bools["a"], "a": x34, "b": f32(4)})
case("Pow", 15, {"a": pos34, "b": f32(4)})
case("Pow", 15, {"a": pos34, "b": np.array(2, np.int64)}, tag="int exponent")
case("Pow", 15, {"a": ints(3, 4, lo=-4, hi=5, dt=np.int32), "b": ints(4, lo=0, hi=4, dt=np.int32)}, tag="int32")
case("Pow", 7, {"a": pos34, "b": f32(3, 4)})
case("Pow", 15, {"a": ints(3, 4, lo=0, hi=9, dt=np.int64), "b": np.array(0.5, np.float32)}, tag="int64 ^ float")
case("Pow", 15, {"a": pos34.astype(np.float16), "b": np.array(0.3, np.float32)}, tag="f16 ^ f32")
modf = {"a": np.array([-4.3, 7.2, 5.0, 4.3, -7.2, 8.0], np.float32),
        "b": np.array([2.1, -3.4, 8.0, -2.1, 3.4, 5.0], np.float32)}
case("Mod", 13, dict(modf), {"fmod": 1}, tag="float fmod")
modi = {"a": np.array([-4, 7, 5, 4, -7, 8, 0, -9], np.int32), "b": np.array([2, -3, 8, -2, 3, 5, 3, 3], np.int32)}
case("Mod", 13, dict(modi), tag="int32 python")
case("Mod", 13, dict(modi), {"fmod": 1}, tag="int32 fmod")
case("Mod", 13, {"a": modi["a"].astype(np.int64), "b": np.array(3, np.int64)}, tag="int64 broadcast")
case("Mod", 13, {"a": np.array([4, 7, 5, 200], np.uint8), "b": np.array([3, 3, 8, 7], np.uint8)}, tag="uint8")

# variadic
for op in ["Max", "Min", "Sum", "Mean"]:
    case(op, 13, {"a": x34, "b": f32(4), "c": f32(3, 1)}, tag="three, broadcast")
    case(op, 8, {"a": x34}, tag="one")
case("Max", 13, {"a": ints(3, 4, dt=np.int32), "b": ints(3, 4, dt=np.int32)}, tag="int32")
case("Min", 6, {"a": x34, "b": f32(3, 4)}, tag="opset 6")

# Clip
case("Clip", 6, {"x": x34}, {"min": -1.0, "max": 0.5})
case("Clip", 6, {"x": x34}, {"max": 0.5}, tag="max only")
case("Clip", 6, {"x": x34}, tag="no bounds")
case("Clip", 13, {"x": x34}, consts={"lo": np.array(-1, np.float32), "hi": np.array(1, np.float32)})
case("Clip", 13, {"x": x34}, consts={"hi": np.array(1, np.float32)}, order=["x", "", "hi"], tag="max input only")
case("Clip", 13, {"x": x34, "lo": np.array(-0.5, np.float32), "hi": np.array(2, np.float32)}, tag="run-time bounds")
case("Clip", 13, {"x": x34}, consts={"lo": np.array(1, np.float32), "hi": np.array(-1, np.float32)}, tag="min > max")
case("Clip", 13, {"x": ints(3, 4, dt=np.int32)}, consts={"lo": np.array(-2, np.int32), "hi": np.array(3, np.int32)},
     tag="int32")
case("Clip", 13, {"x": ints(3, 4, lo=0, hi=200, dt=np.uint8)}, consts={"lo": np.array(5, np.uint8)}, tag="uint8")

# Cast, CastLike
for to, dt in [(TensorProto.INT32, "i32"), (TensorProto.INT64, "i64"), (TensorProto.BOOL, "bool"),
               (TensorProto.FLOAT16, "f16"), (TensorProto.UINT8, "u8"), (TensorProto.INT8, "i8")]:
    case("Cast", 13, {"x": f32(3, 4, lo=0, hi=100)}, {"to": to}, tag=f"to {dt}")
case("Cast", 13, {"x": ints(3, 4)}, {"to": TensorProto.FLOAT}, tag="int64 to float")
case("Cast", 13, {"x": bools["a"]}, {"to": TensorProto.FLOAT}, tag="bool to float")
case("Cast", 13, {"x": x34}, {"to": TensorProto.FLOAT}, tag="to the same")
case("CastLike", 15, {"x": ints(3, 4)}, consts={"like": np.zeros(1, np.float32)})

# Softmax family
for op in ["Softmax", "LogSoftmax", "Hardmax"]:
    case(op, 13, {"x": x234}, tag="default axis")
    case(op, 13, {"x": x234}, {"axis": 1})
    case(op, 11, {"x": x234}, tag="default axis 1: 2-D coercion")
    case(op, 11, {"x": x234}, {"axis": 0}, tag="axis 0")
    case(op, 11, {"x": x234}, {"axis": -1}, tag="axis -1")
    case(op, 1, {"x": x34}, tag="opset 1")
case("Hardmax", 13, {"x": np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32)}, tag="ties")

# Reduce*, axes as attribute (opset 11/13) and as constant input (13/18)
reds = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
        "ReduceLogSumExp", "ReduceSumSquare"]
for op in reds:
    xin = {"x": pos34 if op == "ReduceLogSum" else x234[:, :2] if op == "ReduceProd" else x234}
    if op == "ReduceLogSum":
        xin = {"x": f32(2, 3, 4, lo=0.1, hi=3)}
    o_attr = 11 if op != "ReduceSum" else 11
    case(op, o_attr, dict(xin), {"axes": [1]}, tag="axes attr [1]")
    case(op, o_attr, dict(xin), {"axes": [0, -1], "keepdims": 0}, tag="axes attr [0,-1], keepdims 0")
    case(op, o_attr, dict(xin), tag="all axes")
    case(op, o_attr, dict(xin), {"keepdims": 0}, tag="all axes, keepdims 0")
    o_in = 13 if op == "ReduceSum" else 18
    case(op, o_in, dict(xin), consts={"axes": np.array([2], np.int64)}, tag="axes input")
    case(op, o_in, dict(xin), {"keepdims": 0}, consts={"axes": np.array([-1, 0], np.int64)}, tag="axes input, keepdims 0")
    case(op, o_in, dict(xin), order=["x"], tag="no axes input")
    case(op, o_in, dict(xin), {"noop_with_empty_axes": 1}, consts={"axes": np.array([], np.int64)}, tag="noop")
case("ReduceLogSumExp", 18, {"x": np.array([[1000, 1001, 999], [-5, 0, 5]], np.float32)},
     consts={"axes": np.array([1], np.int64)}, tag="large values")
case("ReduceSum", 13, {"x": ints(3, 4)}, consts={"axes": np.array([1], np.int64)}, tag="int64")
case("ReduceMax", 13, {"x": ints(3, 4, dt=np.int32)}, {"axes": [0]}, tag="int32")
u8 = ints(3, 4, lo=0, hi=15, dt=np.uint8)
for op in ["ReduceMin", "ReduceMax"]:
    case(op, 18, {"x": u8}, consts={"axes": np.array([1], np.int64)}, tag="uint8")
case("ReduceMax", 20, {"x": bools["a"]}, consts={"axes": np.array([1], np.int64)}, tag="bool")
xe = np.zeros((2, 0, 4), np.float32)
for op in reds:
    if op == "ReduceMean":
        continue  # undefined
    case(op, 18 if op != "ReduceSum" else 13, {"x": xe}, consts={"axes": np.array([1], np.int64)}, tag="empty set")
# a graph input: mge-run specializes the model on its value
case("ReduceSum", 13, {"x": x34, "axes": np.array([1], np.int64)}, tag="run-time axes")

# ArgMax/ArgMin
xt = np.array([[1, 5, 5, 2], [7, 7, 0, 7], [3, 1, 2, 3]], np.float32)
for op in ["ArgMax", "ArgMin"]:
    case(op, 13, {"x": xt}, tag="defaults (axis 0, keepdims)")
    case(op, 13, {"x": xt}, {"axis": -1, "keepdims": 0})
    case(op, 13, {"x": xt}, {"axis": 1, "select_last_index": 1}, tag="last index")
    case(op, 13, {"x": xt}, {"axis": 0, "keepdims": 0, "select_last_index": 1}, tag="last index axis 0")
    case(op, 11, {"x": ints(3, 4, dt=np.int32)}, {"axis": 1}, tag="int32")
    case(op, 1, {"x": x34}, {"axis": 1}, tag="opset 1")

# CumSum, TopK
for ex in (0, 1):
    for rv in (0, 1):
        case("CumSum", 14, {"x": x234}, {"exclusive": ex, "reverse": rv}, consts={"axis": np.array(1, np.int64)},
             tag=f"exclusive {ex} reverse {rv}")
case("CumSum", 11, {"x": ints(3, 4, dt=np.int32)}, consts={"axis": np.array([-1], np.int32)}, tag="int32, axis -1")
xk = np.array([[3, 1, 4, 1, 5, 9, 2, 6], [5, 3, 5, 8, 9, 7, 9, 3]], np.float32)
case("TopK", 1, {"x": xk}, {"k": 3}, nout=2, tag="k attribute")
case("TopK", 10, {"x": xk}, consts={"k": np.array([3], np.int64)}, nout=2, tag="k input")
case("TopK", 11, {"x": xk}, {"largest": 0}, consts={"k": np.array([4], np.int64)}, nout=2, tag="smallest")
case("TopK", 11, {"x": xk.T.copy()}, {"axis": 0}, consts={"k": np.array([2], np.int64)}, nout=2, tag="axis 0")
case("TopK", 11, {"x": xk, "k": np.array([3], np.int64)}, nout=2, tag="run-time k")

# double and the wider integers (f64 computes in double: values f32 cannot hold)
f64 = lambda *s: rng.uniform(-3, 3, s) * 1e-200 + rng.uniform(-3, 3, s)
xd, yd = f64(3, 4), f64(3, 4)
for op in ["Add", "Sub", "Mul", "Div", "Max", "Min", "Less", "Equal"]:
    case(op, 13, {"a": xd, "b": yd}, tag="double")
for op in ["Exp", "Tanh", "Sigmoid", "Abs", "Neg", "Floor", "Sqrt"]:
    case(op, 13, {"x": np.abs(xd) if op == "Sqrt" else xd}, tag="double")
case("Pow", 15, {"a": np.abs(xd) + 0.5, "b": yd}, tag="double")
case("Pow", 15, {"a": f32(3, 4, lo=0.5, hi=2), "b": yd}, tag="float base, double exponent")
case("Softmax", 13, {"x": xd * 100}, tag="double")
case("ReduceLogSumExp", 18, {"x": np.array([[700, 700 + 1e-9, 699], [-5, 0, 5]])},
     consts={"axes": np.array([1], np.int64)}, tag="double")
case("ReduceSum", 13, {"x": xd}, consts={"axes": np.array([0], np.int64)}, tag="double")
case("CumSum", 14, {"x": xd}, consts={"axis": np.array(1, np.int64)}, tag="double")
case("MatMul", 13, {"a": xd, "b": yd.T.copy()}, tag="double")
case("Gemm", 13, {"a": xd, "b": yd.T.copy(), "c": f64(3)}, {"alpha": 0.5, "beta": 2.0}, tag="double")
case("Gemm", 13, {"a": xd, "b": yd}, {"transB": 1, "alpha": 3.0}, tag="double, no C")
for dt in [np.int16, np.uint16, np.uint32, np.uint64]:
    lo = 0 if np.dtype(dt).kind == "u" else -900
    a, b = ints(3, 4, lo=lo, hi=900, dt=dt), ints(4, lo=1, hi=60, dt=dt)
    name = np.dtype(dt).name
    for op in ["Max", "Min", "Mod"]:
        # ONNX Runtime has no 16-bit Max/Min: numpy's are the reference
        ref = {"Max": np.maximum, "Min": np.minimum}.get(op) if np.dtype(dt).itemsize == 2 else None
        case(op, 13, {"a": a, "b": b}, tag=name, want=(lambda f: lambda a, b: [f(a, b)])(ref) if ref else None)
    case("Cast", 13, {"x": a}, {"to": TensorProto.DOUBLE}, tag=f"{name} to double")
    case("Cast", 13, {"x": xd * 300}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dt))}, tag=f"double to {name}")
big = np.array([2**64 - 1, 2**63, 5, 0], np.uint64)
case("Max", 13, {"a": big, "b": big[::-1].copy()}, tag="uint64 beyond 2^63")
case("Cast", 13, {"x": big}, {"to": TensorProto.DOUBLE}, tag="uint64 beyond 2^63 to double")
# rounded once, as numpy's astype (and ONNX's reference): ONNX Runtime goes
# through float, which rounds 1 + 2^-11 + 2^-40 to the tie, then down
case("Cast", 13, {"x": np.array([1 + 2.0**-11 + 2.0**-40, 65519.0, -1e-8])}, {"to": TensorProto.FLOAT16},
     tag="double to float16, rounded once", want=lambda x: [x.astype(np.float16)])
case("Cast", 13, {"x": np.array([0.1, 1 + 2.0**-30, 3.5e38, 1e300])}, {"to": TensorProto.FLOAT}, tag="double to float")

# the same with a symbolic batch dim (the shape arithmetic of the lowerings)
for c in list(CASES):
    op, tag = c[0], c[7]
    if not (c[2] and list(c[2].values())[0].ndim >= 2 and c[8] is None and "empty" not in tag and (
            op in ("Softmax", "LogSoftmax", "Hardmax", "PRelu", "ArgMax", "ArgMin", "TopK", "CumSum", "Mod", "Clip")
            or op.startswith("Reduce"))):
        continue
    if (op == "Hardmax" and "axis 0" in tag) or "last index axis 0" in tag:  # along N: its length is needed
        REFUSED.append((c[:9] + (True,), "along a dim not known at import"))
    else:
        CASES.append(c[:9] + (True,))

if __name__ == "__main__":
    sys.exit(main())
