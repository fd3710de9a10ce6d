"""onnx_extra_math.py - the converters of formats/onnx_ops_extra_math.c
(inverse and hyperbolic trigonometric functions, Shrink, the bitwise ops
and BitShift, Det, LRN, DFT, the windows) against ONNX Runtime,
and the float functions against numpy in double as a second oracle.

  onnx_extra_math.py MGE_RUN [-k SUBSTRING] [-v]

The model building, running and comparison are onnx_math.py's (rtol 1e-4,
atol 1e-5; integers exact); only the cases are this file's. Exit 0 when
all agree, 1 otherwise, 77 when numpy, onnx or onnxruntime is missing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_math as base  # noqa: E402  (exits 77 itself when a module is missing)

np = base.np
base.CASES.clear()
base.REFUSED.clear()
case, refused, f32, rng = base.case, base.refused, base.f32, base.rng

# the float functions inside their domains (and past them: NaN), opset 7/9 and 22's predecessors
dom = {"Acos": (-1, 1), "Asin": (-1, 1), "Atanh": (-0.99, 0.99), "Acosh": (1, 6), "Atan": (-6, 6),
       "Asinh": (-6, 6), "Cosh": (-5, 5), "Sinh": (-5, 5)}
npf = {"Acos": np.arccos, "Asin": np.arcsin, "Atanh": np.arctanh, "Acosh": np.arccosh, "Atan": np.arctan,
       "Asinh": np.arcsinh, "Cosh": np.cosh, "Sinh": np.sinh}
for op, (lo, hi) in dom.items():
    x = f32(2, 3, 5, lo=lo, hi=hi)
    opset = 7 if op in ("Acos", "Asin", "Atan") else 9
    case(op, opset, {"x": x})
    case(op, 13, {"x": x.astype(np.float16)}, tag="f16")
    # numpy in double, rounded to f32, as the second oracle
    case(op, opset, {"x": x}, tag="numpy", want=lambda x, f=npf[op]: [f(x.astype(np.float64)).astype(np.float32)])
case("Acos", 7, {"x": np.array([2, -1.5, np.nan], np.float32)}, tag="outside the domain",
     want=lambda x: [np.full(3, np.nan, np.float32)])

xs = f32(3, 7, lo=-3, hi=3)
case("Shrink", 9, {"x": xs})
case("Shrink", 9, {"x": xs}, {"lambd": 1.5, "bias": 1.5}, tag="soft")
case("Shrink", 9, {"x": xs}, {"lambd": 0.2, "bias": -0.7}, tag="other bias")
refused("Shrink", 9, {"x": base.ints(3, 4)}, why="Shrink over i64")

# bitwise, broadcast both ways
for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
    for dt in (np.uint8, np.int8, np.int32, np.int64):
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, (2, 3, 4), endpoint=True).astype(dt)
        b = rng.integers(info.min, info.max, (3, 1), endpoint=True).astype(dt)
        case(op, 18, {"a": a, "b": b}, tag=np.dtype(dt).name)
        case(op, 18, {"b": b, "a": a}, tag=np.dtype(dt).name + " swapped")
for dt in (np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
    info = np.iinfo(dt)
    case("BitwiseNot", 18, {"x": rng.integers(info.min, info.max, (4, 5), endpoint=True, dtype=dt)},
         tag=np.dtype(dt).name)
u = rng.integers(0, 255, (3, 6), endpoint=True).astype(np.uint8)
cnt = np.array([0, 1, 3, 7, 2, 5], np.uint8)
for d in ("LEFT", "RIGHT"):
    case("BitShift", 11, {"x": u, "y": cnt}, {"direction": d}, tag=d)
    for dt in (np.uint16, np.uint32, np.uint64):   # counts past the width shift every bit out
        w = np.iinfo(dt)
        case("BitShift", 11, {"x": rng.integers(0, w.max, (3, 6), endpoint=True, dtype=dt),
                              "y": np.array([0, 1, 5, 9, 3, 12], dt)}, {"direction": d},
             tag=f"{d} {np.dtype(dt).name}")
refused("BitShift", 11, {"x": base.ints(3, 2, dt=np.int32), "y": base.ints(3, 2, lo=0, hi=3, dt=np.int32)},
        {"direction": "LEFT"}, why="unsigned")

# det: batched, singular, 1x1; numpy's as a second oracle
m = f32(4, 3, 3)
m[1, 2] = m[1, 0]
case("Det", 11, {"x": m})
case("Det", 11, {"x": m}, tag="numpy", want=lambda x: [np.linalg.det(x.astype(np.float64)).astype(np.float32)])
case("Det", 11, {"x": f32(5, 5)}, tag="one 5x5")
case("Det", 11, {"x": f32(2, 2, 1, 1)}, tag="1x1")

def np_lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """The ONNX LRN formula in double (ONNX Runtime takes odd sizes and rank 4 only)."""
    x64, C = x.astype(np.float64), x.shape[1]
    sq = np.zeros_like(x64)
    for c in range(C):
        lo, hi = max(0, c - (size - 1) // 2), min(C, c + -(-(size - 1) // 2) + 1)
        sq[:, c] = (x64[:, lo:hi] ** 2).sum(axis=1)
    return [(x64 / (bias + alpha / size * sq) ** beta).astype(np.float32)]


for size in (1, 3, 5):
    case("LRN", 13, {"x": f32(2, 6, 3, 4)}, {"size": size, "alpha": 0.01, "beta": 0.6, "bias": 1.5}, tag=f"size {size}")
for size in (2, 4):
    case("LRN", 13, {"x": f32(2, 6, 3, 4)}, {"size": size, "alpha": 0.01, "beta": 0.6, "bias": 1.5},
         tag=f"even size {size}", want=lambda x, s=size: np_lrn(x, s, 0.01, 0.6, 1.5))
case("LRN", 1, {"x": f32(1, 4, 5)}, {"size": 3}, tag="rank 3", want=lambda x: np_lrn(x, 3))

# DFT: opset 17 (axis attribute) and 20 (axis input), real and complex, dft_length, onesided, inverse
sig_r, sig_c = f32(2, 8, 3, 1), f32(2, 8, 3, 2)
for sig, kind in ((sig_r, "real"), (sig_c, "complex")):
    for axis in (1, 2):
        case("DFT", 17, {"x": sig}, {"axis": axis}, tag=f"{kind} axis {axis}")
        case("DFT", 20, {"x": sig}, consts={"dft_length": np.array(6, np.int64), "axis": np.array(axis, np.int64)},
             order=["x", "dft_length", "axis"], tag=f"{kind} axis {axis} length 6")
    case("DFT", 17, {"x": sig}, {"inverse": 1}, tag=f"{kind} inverse")
    case("DFT", 17, {"x": sig}, consts={"dft_length": np.array(11, np.int64)}, order=["x", "dft_length"],
         tag=f"{kind} padded to 11")
case("DFT", 17, {"x": sig_r}, {"onesided": 1}, tag="real onesided")
case("DFT", 20, {"x": sig_r}, {"onesided": 1}, consts={"axis": np.array(-2, np.int64)}, order=["x", "", "axis"],
     tag="real onesided axis -2")
case("DFT", 17, {"x": sig_c}, tag="numpy", want=lambda x: [np.stack(
    [np.real(np.fft.fft(x[..., 0] + 1j * x[..., 1], axis=1)), np.imag(np.fft.fft(x[..., 0] + 1j * x[..., 1], axis=1))],
    -1).astype(np.float32)])
# a run-time length: mge-run specializes the import on its value
case("DFT", 17, {"x": sig_r, "n": np.array(6, np.int64)}, order=["x", "n"], tag="run-time length")

# STFT: frames gathered, windowed, and a dft along each
sig = f32(2, 32, 1)
win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(np.float32)
case("STFT", 17, {"x": sig}, consts={"step": np.array(4, np.int64), "w": win}, order=["x", "step", "w"],
     tag="hann window")
case("STFT", 17, {"x": sig, "w": win}, consts={"step": np.array(5, np.int64)}, order=["x", "step", "w"],
     tag="run-time window")


def np_stft(x, step, n):
    """Frames of n every step, their two-sided DFT in double (ONNX Runtime's
    float FFT is 1e-5 off near zero here)."""
    fr = np.stack([x[:, f:f + n, 0] for f in range(0, x.shape[1] - n + 1, step)], 1).astype(np.float64)
    y = np.fft.fft(fr, axis=2)
    return [np.stack([y.real, y.imag], -1).astype(np.float32)]


case("STFT", 17, {"x": sig}, {"onesided": 0}, consts={"step": np.array(3, np.int64), "n": np.array(10, np.int64)},
     order=["x", "step", "", "n"], tag="frame_length, two-sided", want=lambda x: np_stft(x, 3, 10))
case("STFT", 17, {"x": f32(1, 20, 2)}, {"onesided": 0}, consts={"step": np.array(6, np.int64),
     "n": np.array(8, np.int64)}, order=["x", "step", "", "n"], tag="complex")
case("STFT", 17, {"x": sig, "step": np.array(4, np.int64)}, order=["x", "step"], tag="run-time step")

# MelWeightMatrix: a constant from constant inputs
for nmel, dftl, rate, lo, hi in ((8, 16, 8192, 0.0, 4096.0), (5, 64, 16000, 20.0, 7000.0), (20, 512, 16000, 0.0, 8000.0)):
    consts = {"m": np.array(nmel, np.int64), "d": np.array(dftl, np.int64), "r": np.array(rate, np.int64),
              "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
    case("MelWeightMatrix", 17, {}, consts=consts, order=list(consts), tag=f"{nmel} bins of {dftl}")
case("MelWeightMatrix", 17, {"m": np.array(8, np.int64)},
     consts={"d": np.array(16, np.int64), "r": np.array(8192, np.int64), "lo": np.array(0, np.float32),
             "hi": np.array(4096, np.float32)}, order=["m", "d", "r", "lo", "hi"], tag="run-time bins")

# windows: constant sizes fold; a run-time size is bound by mge-run
for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    for periodic in (0, 1):
        case(op, 17, {}, {"periodic": periodic}, consts={"size": np.array(10, np.int64)}, tag=f"periodic {periodic}")
    case(op, 17, {}, {"output_datatype": base.TensorProto.FLOAT16}, consts={"size": np.array(7, np.int32)},
         tag="f16")
    case(op, 17, {"size": np.array(10, np.int64)}, tag="run-time size")

# the same with a symbolic batch dim N (the ops' shape inference over templates)
for c in list(base.CASES):
    op, tag = c[0], c[7]
    if c[2] and list(c[2].values())[0].ndim >= 3 and c[8] is None and op in ("DFT", "LRN", "Det", "STFT", "Shrink",
                                                                             "Acos", "BitwiseAnd", "BitShift"):
        base.CASES.append(c[:9] + (True,))

if __name__ == "__main__":
    sys.exit(base.main())
