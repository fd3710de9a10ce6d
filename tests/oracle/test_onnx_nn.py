"""ONNX layer converters (formats/onnx_ops_nn.c) against onnxruntime:
single-node models whose shape arguments (Resize's scales/sizes, Pad's
pads) are initializers, as exported models have them (the ONNX node suite
feeds them as inputs, which mge refuses: it needs them at import).

Resize/Upsample in every mode combination mge maps (nearest asymmetric
floor, half_pixel rounding at whole scales, linear half_pixel /
pytorch_half_pixel / align_corners; opsets 10, 11, 13, 18, 19, axes), and
combinations it must refuse (exit 1, "unsupported", never a wrong
result); Pad (opset 2 attributes, 11 and 18 inputs, constant / reflect /
edge, negative pads); ConvTranspose (random strides, dilations, groups,
asymmetric pads, output_padding, output_shape, auto_pad, 1-D);
LayerNormalization with a broadcasting Scale; GroupNormalization 18 and
21; DepthToSpace / SpaceToDepth; LpPool, GlobalLpPool and 1-D MaxPool /
AveragePool. Skips visibly without onnxruntime."""
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
ort.set_default_logger_severity(3)


def model(op, opset, x_shape, inits, attrs, input_names=None, nout=1):
    """A one-node model: input X, then the named initializers (None for an
    empty input name)."""
    names = ["X"]
    tensors = []
    for k, v in inits:
        if v is None:
            names.append("")
        else:
            names.append(k)
            tensors.append(numpy_helper.from_array(v, k))
    outs = ["Y"] + [f"Y{i}" for i in range(1, nout)]
    node = helper.make_node(op, names, outs, **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], tensors)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check(m, x, label, expect_unsupported=False):
    d = tmpdir()
    path = os.path.join(d, "m.onnx")
    onnx.save(m, path)
    rc, out, err = run([tool("mge-run"), path], stdin=npy_stream(x), check=False)
    if expect_unsupported:
        assert rc == 1 and "unsupported" in err, f"{label}: expected unsupported, got exit {rc}: {err}"
        return
    assert rc == 0, f"{label}: mge-run exited {rc}: {err}"
    refs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"X": x})
    got = read_stream(out)
    assert len(got) == len(refs), f"{label}: {len(got)} outputs for {len(refs)}"
    for g, r in zip(got, refs):
        assert g.shape == r.shape, f"{label}: shape {g.shape} != {r.shape}"
        e = rel_err(g, r)
        assert e < TOL, f"{label}: rel error {e:.3g}"


def f32(*a):
    return np.array(a, dtype=np.float32)


def i64(*a):
    return np.array(a, dtype=np.int64)


def resize(opset, x, scales=None, sizes=None, mode="nearest", bad=False, **attrs):
    attrs["mode"] = mode
    if opset == 10:
        inits = [("scales", scales)]
    else:
        # roi is optional from 13; 11 takes an empty one; scales empty when sizes are given
        inits = [("roi", f32() if opset == 11 else None),
                 ("scales", f32() if opset == 11 and scales is None else scales), ("sizes", sizes)]
        while inits[-1][1] is None:
            inits.pop()
    label = f"Resize-{opset} {mode} {attrs} scales={scales} sizes={sizes} x={x.shape}"
    check(model("Resize", opset, list(x.shape), inits, attrs), x, label, expect_unsupported=bad)


def test_onnx_resize():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    asym = dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    for opset in (11, 13, 18, 19):
        # nearest as PyTorch exports it, fractional and whole scales, up and down
        for sc in ((1, 1, 2, 2), (1, 1, 1.5, 2.5), (1, 1, 0.6, 0.5), (1, 1, 3, 1)):
            resize(opset, x, scales=f32(*sc), **asym)
        resize(opset, x, sizes=i64(2, 3, 9, 4), **asym)
        # half_pixel rounding equals floor at whole scales only
        for nm in ("round_prefer_floor", "round_prefer_ceil"):
            resize(opset, x, scales=f32(1, 1, 2, 3), nearest_mode=nm)
            resize(opset, x, sizes=i64(2, 3, 10, 14), nearest_mode=nm)
            resize(opset, x, scales=f32(1, 1, 1.5, 2), nearest_mode=nm, bad=True)
        resize(opset, x, scales=f32(1, 1, 2, 2), coordinate_transformation_mode="asymmetric",
               nearest_mode="round_prefer_floor", bad=True)
        resize(opset, x, scales=f32(1, 1, 2, 2), nearest_mode="ceil", bad=True)
        # linear
        for ctm in ("half_pixel", "pytorch_half_pixel", "align_corners"):
            resize(opset, x, sizes=i64(2, 3, 8, 3), mode="linear", coordinate_transformation_mode=ctm)
            resize(opset, x, scales=f32(1, 1, 2, 3), mode="linear", coordinate_transformation_mode=ctm)
        resize(opset, x, scales=f32(1, 1, 0.6, 1.5), mode="linear")
        resize(opset, x, scales=f32(1, 1, 0.5, 0.5), mode="linear", coordinate_transformation_mode="align_corners",
               bad=True)
        resize(opset, x, sizes=i64(2, 3, 1, 3), mode="linear", coordinate_transformation_mode="pytorch_half_pixel",
               bad=True)
        resize(opset, x, scales=f32(1, 1, 2, 2), mode="linear", coordinate_transformation_mode="asymmetric", bad=True)
        # cubic (half_pixel, the default); mge's resize has no asymmetric cubic
        resize(opset, x, scales=f32(1, 1, 2, 2), mode="cubic")
        resize(opset, x, scales=f32(1, 1, 2, 2), mode="cubic", coordinate_transformation_mode="asymmetric", bad=True)
        resize(opset, x, scales=f32(1, 2, 2, 2), bad=True, **asym)
    # axes (18+): scales for H and W only, either order
    for opset in (18, 19):
        resize(opset, x, scales=f32(2, 3), axes=[2, 3], **asym)
        resize(opset, x, scales=f32(3, 2), axes=[3, 2], **asym)
        resize(opset, x, sizes=i64(4, 9), axes=[-2, -1], mode="linear")
        resize(opset, x, sizes=i64(4, 9), axes=[2, 3], keep_aspect_ratio_policy="not_larger", bad=True)
        resize(opset, x, scales=f32(0.5, 0.5), axes=[2, 3], mode="linear", antialias=1, bad=True)
    # opset 10: nearest enlarging only
    resize(10, x, scales=f32(1, 1, 2, 3))
    resize(10, x, scales=f32(1, 1, 0.5, 0.5), bad=True)
    resize(10, x, scales=f32(1, 1, 2, 2), mode="linear", bad=True)


def test_onnx_upsample():
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 4)).astype(np.float32)
    check(model("Upsample", 9, list(x.shape), [("scales", f32(1, 1, 2, 3))], dict(mode="nearest")), x, "Upsample-9")
    check(model("Upsample", 9, list(x.shape), [("scales", f32(1, 1, 2, 3))], dict(mode="linear")), x,
          "Upsample-9 linear", expect_unsupported=True)


def pad(opset, x, pads, mode="constant", value=None, axes=None, bad=False):
    if opset < 11:
        attrs = dict(pads=list(pads), mode=mode)
        if value is not None:
            attrs["value"] = value
        m = model("Pad", opset, list(x.shape), [], attrs)
    else:
        inits = [("pads", i64(*pads)), ("cv", None if value is None else f32(value).reshape(()))]
        if axes is not None:
            inits.append(("axes", i64(*axes)))
        while inits[-1][1] is None:
            inits.pop()
        m = model("Pad", opset, list(x.shape), inits, dict(mode=mode))
    check(m, x, f"Pad-{opset} {mode} pads={pads} axes={axes}", expect_unsupported=bad)


def test_onnx_pad():
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 5)).astype(np.float32)
    for opset in (2, 11, 13, 18, 19):
        pad(opset, x, (0, 0, 1, 2, 0, 0, 3, 1))
        pad(opset, x, (0, 1, 1, 2, 1, 0, 3, 1), value=1.5)
        pad(opset, x, (0, 0, -1, 2, 0, 0, 1, -2))
        pad(opset, x, (0, 0, 1, 2, 0, 0, 3, 1), mode="reflect")
        pad(opset, x, (0, 0, 1, 2, 0, 0, 3, 1), mode="edge")
        pad(opset, x, (0, 1, 1, 2, 0, 0, 3, 1), mode="edge")
        pad(opset, x, (1, 0, 0, 0, 0, 0, 0, 1), mode="reflect", bad=True)
        pad(opset, x, (0, 0, -1, 0, 0, 0, 0, 0), mode="edge", bad=True)
    for opset in (18, 19):
        pad(opset, x, (1, 2, 0, 3), axes=(1, 3))
        pad(opset, x, (2, 1, 1, 0), axes=(-1, 2), mode="reflect")
    pad(19, x, (0, 0, 1, 1, 0, 0, 1, 1), mode="wrap", bad=True)


def test_onnx_convtranspose():
    rng = np.random.default_rng(4)
    for t in range(40):
        nsp = 1 if t % 4 == 0 else 2
        g = int(rng.integers(1, 3))
        C = g * int(rng.integers(1, 3))
        M = g * int(rng.integers(1, 3))
        sp = [int(rng.integers(2, 6)) for _ in range(nsp)]
        k = [int(rng.integers(1, 4)) for _ in range(nsp)]
        s = [int(rng.integers(1, 4)) for _ in range(nsp)]
        d = [int(rng.integers(1, 3)) for _ in range(nsp)]
        attrs = dict(strides=s, dilations=d, group=g, kernel_shape=k)
        kind = t % 5
        if kind == 1:
            attrs["pads"] = [int(rng.integers(0, kk)) for kk in k] * 2
        elif kind == 2:
            attrs["pads"] = [int(rng.integers(0, kk)) for kk in k + k]
            attrs["output_padding"] = [int(rng.integers(0, ss)) for ss in s]  # onnxruntime: < stride
        elif kind == 3:
            full = [ss * (i - 1) + (kk - 1) * dd + 1 for ss, i, kk, dd in zip(s, sp, k, d)]
            attrs["output_shape"] = [max(1, f + int(rng.integers(-2, 1))) for f in full]  # onnxruntime: no larger
        elif kind == 4:
            attrs["auto_pad"] = "SAME_UPPER" if t % 2 else "SAME_LOWER"
        x = rng.standard_normal((2, C, *sp)).astype(np.float32)
        w = rng.standard_normal((C, M // g, *k)).astype(np.float32)
        inits = [("W", w)] + ([("B", rng.standard_normal(M).astype(np.float32))] if t % 3 else [])
        full = [ss * (i - 1) + (kk - 1) * dd + 1 for ss, i, kk, dd in zip(s, sp, k, d)]
        # SAME beyond the full output: onnxruntime adds nothing, the ONNX reference zeros; mge refuses
        bad = kind == 4 and any(i * ss > f for i, ss, f in zip(sp, s, full))
        check(model("ConvTranspose", 11, list(x.shape), inits, attrs), x, f"ConvTranspose {attrs} x={x.shape}",
              expect_unsupported=bad)


def test_onnx_norms():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    # LayerNormalization: exact, broadcasting Scale, no B, axis 1, Mean and InvStdDev
    for axis, sshape, with_b in ((-1, (5,), True), (2, (3, 5), False), (2, (1, 5), True), (1, (4, 3, 5), True)):
        inits = [("S", rng.standard_normal(sshape).astype(np.float32))]
        if with_b:
            inits.append(("B", rng.standard_normal(sshape).astype(np.float32)))
        check(model("LayerNormalization", 17, list(x.shape), inits, dict(axis=axis, epsilon=1e-3), nout=3), x,
              f"LayerNormalization axis={axis} scale {sshape}")
    for opset, per in ((18, 2), (21, 4)):
        inits = [("S", rng.standard_normal(per).astype(np.float32)), ("B", rng.standard_normal(per).astype(np.float32))]
        check(model("GroupNormalization", opset, list(x.shape), inits, dict(num_groups=2, epsilon=1e-4)), x,
              f"GroupNormalization-{opset}")
    inits = [("S", rng.standard_normal(4).astype(np.float32)), ("B", rng.standard_normal(4).astype(np.float32))]
    check(model("InstanceNormalization", 6, list(x.shape), inits, dict(epsilon=1e-4)), x, "InstanceNormalization")
    check(model("MeanVarianceNormalization", 13, list(x.shape), [], {}), x, "MeanVarianceNormalization")
    for p in (1, 2):
        check(model("LpNormalization", 1, list(x.shape), [], dict(axis=1, p=p)), x, f"LpNormalization p={p}")


def test_onnx_space_depth():
    x = np.random.default_rng(6).standard_normal((2, 8, 3, 4)).astype(np.float32)
    for mode in ("DCR", "CRD"):
        check(model("DepthToSpace", 13, list(x.shape), [], dict(blocksize=2, mode=mode)), x, f"DepthToSpace {mode}")
    check(model("SpaceToDepth", 13, [2, 8, 4, 6], [], dict(blocksize=2)),
          np.random.default_rng(7).standard_normal((2, 8, 4, 6)).astype(np.float32), "SpaceToDepth")


def test_onnx_pools():
    rng = np.random.default_rng(8)
    x4 = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    x3 = rng.standard_normal((2, 3, 9)).astype(np.float32)
    for p in (1, 2, 3):
        check(model("GlobalLpPool", 2, list(x4.shape), [], dict(p=p)), x4, f"GlobalLpPool p={p}")
        check(model("LpPool", 18, list(x4.shape), [], dict(p=p, kernel_shape=[2, 3], strides=[1, 2],
                                                           pads=[1, 1, 0, 1])), x4, f"LpPool p={p}")
        check(model("LpPool", 11, list(x3.shape), [], dict(p=p, kernel_shape=[3], strides=[2], pads=[1, 1])), x3,
              f"LpPool 1-D p={p}")
    # 1-D MaxPool / AveragePool: strides, dilations, symmetric and asymmetric pads, ceil_mode
    for op in ("MaxPool", "AveragePool"):
        for attrs in (dict(kernel_shape=[3]), dict(kernel_shape=[3], strides=[2], pads=[1, 1]),
                      dict(kernel_shape=[2], pads=[0, 1], count_include_pad=1), dict(kernel_shape=[3], strides=[2],
                                                                                   ceil_mode=1),
                      dict(kernel_shape=[4], auto_pad="SAME_UPPER", count_include_pad=1)):
            if op == "MaxPool":
                attrs.pop("count_include_pad", None)
            check(model(op, 19, list(x3.shape), [], attrs), x3, f"{op} 1-D {attrs}")
        check(model("MaxPool", 12, list(x3.shape), [], dict(kernel_shape=[2], dilations=[2], strides=[1])), x3,
              "MaxPool 1-D dilated")


def test_onnx_groupnorm18_runtime_scale():
    """opset 18's per-group scale and bias as graph inputs: expanded per channel at run time."""
    rng = np.random.default_rng(9)
    feeds = {"X": rng.standard_normal((2, 6, 3, 4)).astype(np.float32),
             "S": rng.standard_normal(3).astype(np.float32), "B": rng.standard_normal(3).astype(np.float32)}
    node = helper.make_node("GroupNormalization", ["X", "S", "B"], ["Y"], num_groups=3, epsilon=1e-3)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                                        for k, v in feeds.items()],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    path = os.path.join(tmpdir(), "gn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    _, out, _ = run([tool("mge-run"), path], stdin=npy_stream(*feeds.values()))
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    e = rel_err(read_stream(out)[0], ref)
    assert e < TOL, f"GroupNormalization-18 runtime scale: rel error {e:.3g}"


NODE_DATA = os.environ.get("MGE_ONNX_NODE_DATA", os.path.join(os.path.expanduser("~"), ".cache", "mge", "onnx-1.16.2",
                                                              "onnx", "backend", "test", "data", "node"))
FOLDED_PASS = {
    "test_constant_pad", "test_constant_pad_axes", "test_constant_pad_negative_axes", "test_edge_pad",
    "test_reflect_pad", "test_resize_downsample_scales_linear", "test_resize_upsample_scales_linear",
    "test_resize_upsample_scales_linear_align_corners", "test_resize_upsample_scales_nearest",
    "test_resize_upsample_scales_nearest_axes_2_3", "test_resize_upsample_scales_nearest_axes_3_2",
    "test_upsample_nearest",
    "test_resize_downsample_scales_cubic", "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
    "test_resize_downsample_sizes_cubic", "test_resize_upsample_scales_cubic",
    "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside", "test_resize_upsample_scales_cubic_align_corners",
    "test_resize_upsample_sizes_cubic",
}


def test_onnx_node_suite_folded():
    """The ONNX node suite's Pad, Resize and Upsample tests with their
    shape inputs made initializers, against the suite's expected outputs:
    FOLDED_PASS must pass, every other one must be refused, never wrong."""
    import glob
    if not os.path.isdir(NODE_DATA):
        raise Skip(f"no ONNX node test data in {NODE_DATA} (scripts/deps fetches it)")
    import re
    names = sorted(t for t in os.listdir(NODE_DATA)
                   if re.match(r"test_(resize|upsample|constant_pad|edge_pad|reflect_pad|wrap_pad)", t)
                   and not t.endswith("_expanded"))
    assert len(names) >= 40, f"only {len(names)} Pad/Resize/Upsample node tests in {NODE_DATA}"
    assert FOLDED_PASS <= set(names), f"missing node tests: {sorted(FOLDED_PASS - set(names))}"
    for t in names:
        m = onnx.load(os.path.join(NODE_DATA, t, "model.onnx"))
        ds = sorted(glob.glob(os.path.join(NODE_DATA, t, "test_data_set_*")))[0]
        ins = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(ds + "/input_*.pb"))]
        outs = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(ds + "/output_*.pb"))]
        g = m.graph
        for k in range(1, len(g.input)):
            g.initializer.append(numpy_helper.from_array(ins[k], g.input[k].name))
        del g.input[1:]
        path = os.path.join(tmpdir(), t + ".onnx")
        onnx.save(m, path)
        rc, out, err = run([tool("mge-run"), path], stdin=npy_stream(ins[0]), check=False)
        if t not in FOLDED_PASS:
            assert rc == 1 and "unsupported" in err, f"{t}: expected unsupported, got exit {rc}: {err}"
            continue
        assert rc == 0, f"{t}: mge-run exited {rc}: {err}"
        got = read_stream(out)
        assert len(got) == len(outs)
        for gv, r in zip(got, outs):
            assert gv.shape == r.shape, f"{t}: shape {gv.shape} != {r.shape}"
            assert np.allclose(gv, r, rtol=1e-3, atol=1e-5), f"{t}: max abs diff {np.max(np.abs(gv - r))}"
