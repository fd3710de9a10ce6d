"""ONNX spatial converters (formats/onnx_ops_spatial.c, Resize's cubic
mode in onnx_ops_nn.c) against onnxruntime: single-node models whose
shape arguments are initializers (as exported models have them; the ONNX
node suite feeds them as inputs, which mge refuses: it needs them at
import) and whose data operands (grid, rois, offsets) are graph inputs.

Resize cubic (opsets 11, 13, 19; half_pixel, align_corners,
cubic_coeff_a, exclude_outside; asymmetric and antialias refused);
GridSample 16 and 20 (every mode and padding mode, align_corners, 5-D);
RoiAlign 10 (output_half_pixel) and 16 (half_pixel by default), avg and
max; DeformConv 19 (groups, offset groups, bias, mask); CenterCropPad 18
(crop, pad, axes); AffineGrid 20 (2-D and 3-D); Col2Im 18 (strides,
dilations, pads); and the export (mge-opt --emit onnx) of grid_sample,
bicubic resize and roi_align, run by onnxruntime. Skips visibly without
onnxruntime."""
import os

import numpy as np

from common import Skip, npy_stream, read_stream, rel_err, run, tmpdir, tool

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    raise Skip(f"onnxruntime/onnx not installed ({e}); scripts/deps installs them")

TOL = 2e-5
ort.set_default_logger_severity(3)
TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}


def check(op, opset, ins, inits, attrs, label, bad=False, tol=TOL):
    """ins: [(name, array)] graph inputs; inits: [(name, array or None)]
    initializers, None for an empty input name; inputs in that order,
    graph inputs first."""
    names = [k for k, _ in ins] + [(k if v is not None else "") for k, v in inits]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, ["Y"], **attrs)
    g = helper.make_graph([node], "t",
                          [helper.make_tensor_value_info(k, TYPES[v.dtype], list(v.shape)) for k, v in ins],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits if v is not None])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(tmpdir(), "m.onnx")
    onnx.save(m, path)
    rc, out, err = run([tool("mge-run"), path], stdin=npy_stream(*[v for _, v in ins]), check=False)
    if bad:
        assert rc == 1 and "unsupported" in err, f"{label}: expected unsupported, got exit {rc}: {err}"
        return
    assert rc == 0, f"{label}: mge-run exited {rc}: {err}"
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, dict(ins))[0]
    got = read_stream(out)[0]
    assert got.shape == ref.shape, f"{label}: shape {got.shape} != {ref.shape}"
    e = rel_err(got, ref)
    assert e < tol, f"{label}: rel error {e:.3g}"


def f32(*a):
    return np.array(a, dtype=np.float32)


def i64(*a):
    return np.array(a, dtype=np.int64)


def test_resize_cubic():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    for opset in [11, 13, 19]:
        for ctm in ["half_pixel", "align_corners", "pytorch_half_pixel"]:
            for a, ex in [(-0.75, 0), (-0.5, 1), (-0.5, 0)]:
                attrs = {"mode": "cubic", "coordinate_transformation_mode": ctm, "cubic_coeff_a": a,
                         "exclude_outside": ex}
                roi = [("roi", f32() if opset == 11 else None)]
                for j, sc in enumerate([f32(1, 1, 2, 3), f32(1, 1, 0.6, 1.5)]):
                    # 7*1.5 is not whole: align_corners then maps by the unrounded size, refused
                    check("Resize", opset, [("X", x)], roi + [("scales", sc)], attrs, f"{opset} {attrs} {sc}",
                          bad=ctm == "align_corners" and j == 1)
                check("Resize", opset, [("X", x)], roi + [("scales", f32() if opset == 11 else None),
                                                           ("sizes", i64(2, 3, 9, 4))], attrs, f"{opset} {attrs} sizes")
    attrs = {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}
    check("Resize", 19, [("X", x)], [("roi", None), ("scales", f32(1, 1, 2, 2))], attrs, "asymmetric", bad=True)
    attrs = {"mode": "cubic", "antialias": 1}
    check("Resize", 19, [("X", x)], [("roi", None), ("scales", f32(1, 1, 0.5, 0.5))], attrs, "antialias", bad=True)


def test_grid_sample():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    g = rng.uniform(-1.2, 1.2, (2, 4, 3, 2)).astype(np.float32)
    for opset, modes in [(16, ["bilinear", "nearest", "bicubic"]), (20, ["linear", "nearest", "cubic"])]:
        for mode in modes:
            for pad in ["zeros", "border", "reflection"]:
                for al in [0, 1]:
                    attrs = {"mode": mode, "padding_mode": pad, "align_corners": al}
                    check("GridSample", opset, [("X", x), ("G", g)], [], attrs, f"{opset} {attrs}")
    x5 = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    g5 = rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(np.float32)
    for mode in ["linear", "nearest"]:
        check("GridSample", 20, [("X", x5), ("G", g5)], [], {"mode": mode}, f"5-D {mode}")
    check("GridSample", 20, [("X", x5), ("G", g5)], [], {"mode": "cubic"}, "5-D cubic", bad=True)


def test_roi_align():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 10, 9)).astype(np.float32)
    xy = rng.uniform(-2, 11, (6, 2, 2)).astype(np.float32)
    rois = np.concatenate([xy.min(1), xy.max(1)], 1).astype(np.float32)
    bi = rng.integers(0, 2, 6).astype(np.int64)
    for opset in [10, 16]:
        for mode in ["avg", "max"]:
            for sr in [0, 2]:
                attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": sr,
                         "spatial_scale": 0.8}
                ctms = [None] if opset == 10 else [None, "half_pixel", "output_half_pixel"]
                for ctm in ctms:
                    a = dict(attrs)
                    if ctm:
                        a["coordinate_transformation_mode"] = ctm
                    check("RoiAlign", opset, [("X", x), ("rois", rois), ("bi", bi)], [], a, f"{opset} {a}")


def test_deform_conv():
    rng = np.random.default_rng(4)
    for C, O, k, s, p, d, g, og, bias, mask in [(4, 6, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, True, False),
                                                (4, 4, (2, 3), (2, 1), (0, 2), (1, 2), 2, 2, False, True),
                                                (6, 3, (3, 2), (1, 2), (2, 0), (2, 1), 3, 3, True, True)]:
        H, W = 8, 7
        x = rng.standard_normal((2, C, H, W)).astype(np.float32)
        w = rng.standard_normal((O, C // g, *k)).astype(np.float32)
        OH = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
        OW = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
        off = (rng.standard_normal((2, 2 * og * k[0] * k[1], OH, OW)) * 2).astype(np.float32)
        ins = [("X", x), ("W", w), ("off", off)]
        inits = [("B", rng.standard_normal(O).astype(np.float32) if bias else None)]
        if mask:
            ins.append(("mask", rng.uniform(0, 1, (2, og * k[0] * k[1], OH, OW)).astype(np.float32)))
            # the mask follows B: B an initializer (or empty) comes before it
            names = ins[:3] + [("B", inits[0][1])] + ins[3:]
            ins = [(n, v) for n, v in names if v is not None and n != "B"]
        attrs = {"kernel_shape": list(k), "strides": list(s), "pads": [p[0], p[1], p[0], p[1]],
                 "dilations": list(d), "group": g, "offset_group": og}
        label = f"DeformConv {attrs} bias={bias} mask={mask}"
        if mask:
            # graph inputs X, W, off, then B (initializer or ""), then mask: build by hand
            nb = "B" if bias else ""
            node = helper.make_node("DeformConv", ["X", "W", "off", nb, "mask"], ["Y"], **attrs)
            gr = helper.make_graph([node], "t",
                                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape)) for n, v in ins],
                                   [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                                   [numpy_helper.from_array(inits[0][1], "B")] if bias else [])
            m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 19)])
            path = os.path.join(tmpdir(), "m.onnx")
            onnx.save(m, path)
            rc, out, err = run([tool("mge-run"), path], stdin=npy_stream(*[v for _, v in ins]), check=False)
            assert rc == 0, f"{label}: {err}"
            ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, dict(ins))[0]
            got = read_stream(out)[0]
            assert got.shape == ref.shape and rel_err(got, ref) < TOL, (label, rel_err(got, ref))
        else:
            check("DeformConv", 19, ins, inits, attrs, label)
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    w = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
    off = rng.standard_normal((1, 8, 4, 4)).astype(np.float32)
    check("DeformConv", 19, [("X", x), ("W", w), ("off", off)], [], {"pads": [1, 1, 0, 0]}, "asymmetric pads",
          bad=True)


def test_center_crop_pad():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 8, 3)).astype(np.float32)
    for shape, axes in [(i64(4, 5, 3), None), (i64(10, 3, 3), None), (i64(9, 11), [0, 1]), (i64(4, 9), [-3, -2]),
                        (i64(2,), [1]), (i64(7, 8, 3), None)]:
        attrs = {"axes": axes} if axes is not None else {}
        check("CenterCropPad", 18, [("X", x)], [("shape", shape)], attrs, f"CenterCropPad {shape} {axes}")


def test_affine_grid():
    rng = np.random.default_rng(6)
    for size, k in [(i64(2, 3, 5, 7), 2), (i64(2, 1, 1, 4), 2), (i64(2, 2, 3, 4, 5), 3)]:
        theta = rng.standard_normal((2, k, k + 1)).astype(np.float32)
        for al in [0, 1]:
            # a size-1 dim with align_corners is refused: PyTorch puts its
            # point at 0, ONNX's reference at -1, onnxruntime at 1
            check("AffineGrid", 20, [("X", theta)], [("size", size)], {"align_corners": al},
                  f"AffineGrid {size} align {al}", tol=1e-5, bad=al == 1 and 1 in size[2:])


def test_col2im():
    rng = np.random.default_rng(7)
    for img, blk, attrs in [((5, 6), (2, 3), {}), ((7, 5), (3, 2), {"strides": [2, 1]}),
                            ((6, 9), (2, 2), {"dilations": [2, 3]}), ((5, 5), (3, 3), {"pads": [1, 2, 1, 2]}),
                            ((8, 7), (3, 2), {"strides": [2, 3], "dilations": [1, 2], "pads": [1, 0, 1, 0]})]:
        s = attrs.get("strides", [1, 1])
        d = attrs.get("dilations", [1, 1])
        p = attrs.get("pads", [0, 0, 0, 0])
        L = 1
        for i in range(2):
            L *= (img[i] + p[i] + p[i + 2] - d[i] * (blk[i] - 1) - 1) // s[i] + 1
        x = rng.standard_normal((2, 3 * blk[0] * blk[1], L)).astype(np.float32)
        check("Col2Im", 18, [("X", x)], [("image_shape", i64(*img)), ("block_shape", i64(*blk))], attrs,
              f"Col2Im {img} {blk} {attrs}")


def exported(model_text, ins, label, bad=False):
    """mge-opt --emit onnx of the text model, run by onnxruntime, against
    mge-run of the text model."""
    d = tmpdir()
    src, onx = os.path.join(d, "m.mgt"), os.path.join(d, "m.onnx")
    with open(src, "w") as f:
        f.write(model_text)
    rc, _, err = run([tool("mge-opt"), src, "--emit", "onnx", "-o", onx], check=False)
    if bad:
        assert rc == 1 and "cannot be written as ONNX" in err, f"{label}: expected the export refused, got {rc}: {err}"
        return
    assert rc == 0, f"{label}: mge-opt exited {rc}: {err}"
    _, out, _ = run([tool("mge-run"), src], stdin=npy_stream(*[v for _, v in ins]))
    got = read_stream(out)[0]
    sess = ort.InferenceSession(onx, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {i.name: v for i, (_, v) in zip(sess.get_inputs(), ins)})[0]
    assert got.shape == ref.shape, f"{label}: shape {got.shape} != {ref.shape}"
    e = rel_err(got, ref)
    assert e < TOL, f"{label}: rel error {e:.3g}"


def test_export():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    g = rng.uniform(-1.2, 1.2, (2, 4, 3, 2)).astype(np.float32)
    for mode in ["bilinear", "nearest", "bicubic"]:
        for pad in ["zeros", "border", "reflection"]:
            for al in ["false", "true"]:
                exported(f"input x : f32[2,3,5,6]\ninput g : f32[2,4,3,2]\n"
                         f"y = grid_sample(x, g, mode={mode}, padding_mode={pad}, align_corners={al})\noutput y\n",
                         [("x", x), ("g", g)], f"grid_sample {mode} {pad} {al}")
    for attrs in ["align_corners=false, scales=[2, 1.5]", "align_corners=true, size=[9, 4]",
                  "cubic_a=-0.5, exclude_outside=true, scales=[0.6, 2]"]:
        exported(f"input x : f32[2,3,5,6]\ny = resize(x, mode=bicubic, {attrs})\noutput y\n", [("x", x)],
                 f"resize bicubic {attrs}")
    xy = rng.uniform(-2, 7, (4, 2, 2)).astype(np.float32)
    rois = np.concatenate([xy.min(1), xy.max(1)], 1).astype(np.float32)
    bi = rng.integers(0, 2, 4).astype(np.int64)
    for attrs in ["output_size=[2, 3]", "output_size=[3, 3], pooling=max, sampling_ratio=2, aligned=true",
                  "output_size=[1, 2], spatial_scale=0.5, aligned=true"]:
        exported(f"input x : f32[2,3,5,6]\ninput r : f32[4,4]\ninput b : i64[4]\n"
                 f"y = roi_align(x, r, b, {attrs})\noutput y\n", [("x", x), ("r", rois), ("b", bi)],
                 f"roi_align {attrs}")
    exported("input x : f32[1,2,3,4,5]\ninput g : f32[1,2,2,2,3]\ny = grid_sample(x, g)\noutput y\n",
             [("x", rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)),
              ("g", rng.uniform(-1, 1, (1, 2, 2, 2, 3)).astype(np.float32))], "5-D grid_sample", bad=True)
