"""ONNX shape and indexing ops against ONNX Runtime: modules exported by
torch.onnx.export (opset 13 and 17, dynamic batch and H/W) whose shape glue
is Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Slice, Split, Expand,
...; and small hand-made graphs for the lowerings of formats/onnx_ops_shape.c
(GatherND, ScatterND add, Split past 4 outputs, Trilu over symbolic dims,
opset-1..12 attribute forms). mge-run and onnxruntime run the same .onnx on
two input shapes each; outputs agree within 1e-5. Skipped, visibly, without
onnxruntime (and the export tests without PyTorch)."""
import io
import os
import re

import numpy as np

from common import Skip, need_torch, npy_stream, read_stream, run, tmpdir, tool

# the ops onnx_ops_shape.c converts: a model that fails on another op skips
# (that converter is someone else's) instead of failing here
MINE = {"Shape", "Size", "Gather", "GatherElements", "GatherND", "ScatterElements", "Scatter", "ScatterND",
        "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Transpose", "Expand", "Tile", "Range",
        "ConstantOfShape", "OneHot", "Trilu", "EyeLike", "Compress", "Reshape", "Flatten", "Constant",
        "Identity"}


def _ort():
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as e:
        raise Skip(f"onnx/onnxruntime not installed ({e}); scripts/deps installs them")
    return onnxruntime


def _check(path, inputs_list, tol=1e-5):
    """mge-run and onnxruntime on path for each tuple of inputs."""
    ort = _ort()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for inputs in inputs_list:
        want = sess.run(None, dict(zip(names, inputs)))
        rc, out, err = run([tool("mge-run"), path], stdin=npy_stream(*inputs), check=False)
        if rc != 0:
            other = [op for op in re.findall(r"^\s+(\w+) .*: no such op in mge", err, re.M) if op not in MINE]
            if other:
                raise Skip(f"{os.path.basename(path)} needs {', '.join(sorted(set(other)))} (not converted yet)")
            raise AssertionError(f"mge-run {path} exited {rc}: {err}")
        got = read_stream(out)
        assert len(got) == len(want), (path, len(got), len(want))
        for g, w in zip(got, want):
            assert g.shape == w.shape, (path, g.shape, w.shape)
            if w.dtype.kind in "biu":
                assert np.array_equal(g.astype(w.dtype), w), (path, g, w)
            else:
                err_ = float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
                assert err_ <= tol * max(1.0, float(np.max(np.abs(w))) if w.size else 1.0), (path, err_)


# ---------------------------------------------------------------- torch exports

def _modules():
    import torch

    class View(torch.nn.Module):
        def forward(self, x):
            return x.view(x.size(0), -1) * 2

    class Flat(torch.nn.Module):
        def forward(self, x):
            return torch.flatten(x, 1) + 1

    class Permute(torch.nn.Module):
        def forward(self, x):
            return x.permute(0, 2, 3, 1).contiguous()

    class Cat(torch.nn.Module):
        def forward(self, x):
            return torch.cat([x, x * 2], dim=1)

    class SliceMod(torch.nn.Module):
        def forward(self, x):
            return x[:, 1:3] + x[:, -2:]

    class Step(torch.nn.Module):
        def forward(self, x):
            return x[:, :, ::2, 1::2]

    class Chunk(torch.nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            return a * b

    class SplitMod(torch.nn.Module):
        def forward(self, x):
            a, b, c = torch.split(x, [1, 2, 1], dim=1)
            return torch.cat([c, b, a], 1)

    class ExpandMod(torch.nn.Module):
        def forward(self, x):
            return x[:, :1].expand(-1, 4, -1, -1) + x

    class Glue(torch.nn.Module):
        def forward(self, x):
            n, c, h, w = x.shape
            return x.reshape(n, c, h * w).transpose(1, 2).reshape(n, -1, c)

    class Repeat(torch.nn.Module):
        def forward(self, x):
            return x.repeat(1, 2, 1, 1)

    class IndexSelect(torch.nn.Module):
        def forward(self, x):
            return torch.index_select(x, 1, torch.tensor([3, 0, 1]))

    class Zeros(torch.nn.Module):
        def forward(self, x):
            return x + torch.zeros(x.shape[2:], dtype=torch.float32)

    return [View, Flat, Permute, Cat, SliceMod, Step, Chunk, SplitMod, ExpandMod, Glue, Repeat, IndexSelect, Zeros]


def _export(mod, opset, d):
    import torch
    path = os.path.join(d, f"{type(mod).__name__}_{opset}.onnx")
    torch.onnx.export(mod, (torch.randn(2, 4, 5, 6),), path, opset_version=opset, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}, "y": {0: "N"}})
    return path


def _torch_exports(opset):
    _ort()
    need_torch()
    import warnings
    warnings.filterwarnings("ignore")
    d = tmpdir()
    rng = np.random.default_rng(opset)
    xs = [(rng.standard_normal((2, 4, 5, 6)).astype(np.float32),),
          (rng.standard_normal((3, 4, 7, 4)).astype(np.float32),)]
    skipped = []
    for cls in _modules():
        try:
            _check(_export(cls().eval(), opset, d), xs)
        except Skip as e:
            skipped.append(str(e))
    if skipped:
        print("   (" + "; ".join(skipped) + ")")


def test_torch_exports_opset13():
    _torch_exports(13)


def test_torch_exports_opset17():
    _torch_exports(17)


def test_torch_trilu_symbolic_dims():
    _ort()
    need_torch()
    import torch

    class Tri(torch.nn.Module):
        def forward(self, x):
            return torch.tril(x, diagonal=1) + torch.triu(x, -1)

    d = tmpdir()
    rng = np.random.default_rng(3)
    _check(_export(Tri().eval(), 17, d), [(rng.standard_normal((2, 4, 5, 6)).astype(np.float32),),
                                          (rng.standard_normal((1, 4, 3, 8)).astype(np.float32),)])


# ---------------------------------------------------------------- hand-made graphs

def _model(nodes, inputs, outputs, opset, inits=()):
    import onnx
    from onnx import helper
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="mge-test")
    m.ir_version = 8 if opset >= 15 else 7
    path = os.path.join(tmpdir(), "m.onnx")
    onnx.save(m, path)
    return path


def _vi(name, elem, shape):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem, shape)


def test_gathernd_and_scatternd_add():
    _ort()
    from onnx import TensorProto as T, helper, numpy_helper
    idx = np.array([[[1, -1]], [[0, 2]]], dtype=np.int64)          # [2,1,2] into dims [2,3]
    path = _model([helper.make_node("GatherND", ["x", "i"], ["y"])],
                  [_vi("x", T.FLOAT, [2, 3, "S"])], [_vi("y", T.FLOAT, None)], 13,
                  [numpy_helper.from_array(idx, "i")])
    rng = np.random.default_rng(0)
    _check(path, [(rng.standard_normal((2, 3, 4)).astype(np.float32),),
                  (rng.standard_normal((2, 3, 1)).astype(np.float32),)])
    bidx = np.array([[1], [0], [2]], dtype=np.int64)                # batch_dims 1
    path = _model([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
                  [_vi("x", T.FLOAT, [3, 4, 2])], [_vi("y", T.FLOAT, None)], 13,
                  [numpy_helper.from_array(bidx, "i")])
    _check(path, [(rng.standard_normal((3, 4, 2)).astype(np.float32),)])
    sidx = np.array([[0], [2], [0]], dtype=np.int64)                # duplicates add up
    path = _model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")],
                  [_vi("x", T.FLOAT, [4, 3]), _vi("u", T.FLOAT, [3, 3])], [_vi("y", T.FLOAT, None)], 16,
                  [numpy_helper.from_array(sidx, "i")])
    _check(path, [(rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32))])
    path = _model([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")],
                  [_vi("x", T.FLOAT, [2, 4]), _vi("u", T.FLOAT, [2, 2])], [_vi("y", T.FLOAT, None)], 16,
                  [numpy_helper.from_array(np.array([[1, 1], [-1, 0]], dtype=np.int64), "i")])
    _check(path, [(rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32))])


def test_split_many_outputs_and_old_attribute_forms():
    _ort()
    from onnx import TensorProto as T, helper
    rng = np.random.default_rng(1)
    outs = [f"o{k}" for k in range(6)]
    # six outputs (mge split has four): one slice each; opset 18 num_outputs, uneven last
    path = _model([helper.make_node("Split", ["x"], outs, axis=1, num_outputs=6)],
                  [_vi("x", T.FLOAT, ["N", 11])], [_vi(o, T.FLOAT, None) for o in outs], 18)
    _check(path, [(rng.standard_normal((2, 11)).astype(np.float32),),
                  (rng.standard_normal((5, 11)).astype(np.float32),)])
    # opset 11: split, axes, starts/ends as attributes; Concat, Unsqueeze, Squeeze
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c", "d", "e"], axis=-1, split=[1, 2, 3, 4, 1]),
             helper.make_node("Unsqueeze", ["b"], ["bu"], axes=[0, -1]),
             helper.make_node("Squeeze", ["bu"], ["bs"], axes=[0, 3]),
             helper.make_node("Concat", ["e", "d", "a"], ["cat"], axis=1),
             helper.make_node("Squeeze", ["a"], ["sq"])]
    path = _model(nodes, [_vi("x", T.FLOAT, [3, 11])],
                  [_vi(v, T.FLOAT, None) for v in ["bs", "cat", "c", "sq"]], 11)
    _check(path, [(rng.standard_normal((3, 11)).astype(np.float32),)])
    # opset 9: Slice by attributes with negative bounds and INT64 extremes
    nodes = [helper.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[2 ** 63 - 1, -1], axes=[0, 1])]
    path = _model(nodes, [_vi("x", T.FLOAT, [4, 6])], [_vi("y", T.FLOAT, None)], 9)
    _check(path, [(rng.standard_normal((4, 6)).astype(np.float32),)])


def test_slice_steps_and_computed_bounds():
    _ort()
    from onnx import TensorProto as T, helper, numpy_helper
    rng = np.random.default_rng(2)
    c = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)  # noqa: E731
    # steps without axes, a negative step over the whole dim; ends from Shape
    nodes = [helper.make_node("Slice", ["x", "s", "e", "", "st"], ["y"]),
             helper.make_node("Shape", ["x"], ["sh"], start=1),
             helper.make_node("Slice", ["x", "z", "sh", "ax"], ["y2"])]
    path = _model(nodes, [_vi("x", T.FLOAT, ["N", 5, "W"])], [_vi("y", T.FLOAT, None), _vi("y2", T.FLOAT, None)], 15,
                  [c("s", [-1, 4, 0]), c("e", [-(2 ** 63), -(2 ** 63), 2 ** 63 - 1]), c("st", [-1, -2, 2]),
                   c("z", [0, 1]), c("ax", [1, 2])])
    _check(path, [(rng.standard_normal((2, 5, 7)).astype(np.float32),),
                  (rng.standard_normal((3, 5, 2)).astype(np.float32),)])


def test_trilu_eyelike_onehot_compress():
    _ort()
    from onnx import TensorProto as T, helper, numpy_helper
    rng = np.random.default_rng(4)
    # Trilu over symbolic dims with k a run-time input
    path = _model([helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)],
                  [_vi("x", T.FLOAT, ["N", "H", "W"]), _vi("k", T.INT64, [])], [_vi("y", T.FLOAT, None)], 14)
    _check(path, [(rng.standard_normal((2, 3, 5)).astype(np.float32), np.array(1, dtype=np.int64)),
                  (rng.standard_normal((1, 6, 2)).astype(np.float32), np.array(-2, dtype=np.int64))])
    # EyeLike and Compress with a constant condition (opset 9), OneHot with a constant float depth
    # (opset 11: negative indices count from the end; opset 9-10 make them all off, which
    # onnxruntime does not do, so that is not compared here)
    nodes = [helper.make_node("EyeLike", ["x"], ["eye"], k=-1),
             helper.make_node("Compress", ["x", "cond"], ["cp"], axis=1)]
    inits = [numpy_helper.from_array(np.array([True, False, True, True]), "cond")]
    path = _model(nodes, [_vi("x", T.FLOAT, [3, 4])], [_vi("eye", T.FLOAT, None), _vi("cp", T.FLOAT, None)], 9,
                  inits)
    _check(path, [(rng.standard_normal((3, 4)).astype(np.float32),)])
    nodes = [helper.make_node("OneHot", ["i", "depth", "vals"], ["oh"], axis=0)]
    inits = [numpy_helper.from_array(np.array(4.0, dtype=np.float32), "depth"),
             numpy_helper.from_array(np.array([-1, 2], dtype=np.float32), "vals")]
    path = _model(nodes, [_vi("i", T.INT64, ["N"])], [_vi("oh", T.FLOAT, None)], 11, inits)
    _check(path, [(np.array([0, 3, -1, 2, 7, -4, -5], dtype=np.int64),), (np.array([1], dtype=np.int64),)])


def test_gather_negative_and_shape_glue():
    _ort()
    from onnx import TensorProto as T, helper, numpy_helper
    rng = np.random.default_rng(5)
    c = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)  # noqa: E731
    # the export glue by hand: Shape -> Gather(0) -> Unsqueeze -> Concat -> Reshape; Size; Expand; Tile
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "m1"], ["shp"], axis=0),
             helper.make_node("Reshape", ["x", "shp"], ["flat"]),
             helper.make_node("Gather", ["x", "neg"], ["g"], axis=-1),
             helper.make_node("Size", ["x"], ["sz"]),
             helper.make_node("Expand", ["col", "s"], ["ex"]),
             helper.make_node("Tile", ["x", "rep"], ["t"])]
    inits = [c("zero", 0), c("ax0", [0]), c("m1", [-1]), c("neg", [[-1, 0], [1, -2]]), c("rep", [1, 2, 1]),
             numpy_helper.from_array(np.arange(3, dtype=np.float32).reshape(3, 1), "col")]
    path = _model(nodes, [_vi("x", T.FLOAT, ["N", 3, "W"])],
                  [_vi("flat", T.FLOAT, None), _vi("g", T.FLOAT, None), _vi("sz", T.INT64, None),
                   _vi("ex", T.FLOAT, None), _vi("t", T.FLOAT, None)], 13, inits)
    _check(path, [(rng.standard_normal((2, 3, 4)).astype(np.float32),),
                  (rng.standard_normal((5, 3, 2)).astype(np.float32),)])


def test_reverse_sequence_and_symbolic_eyelike():
    _ort()
    from onnx import TensorProto as T, helper
    rng = np.random.default_rng(6)
    for ba, ta in ((1, 0), (0, 1)):
        path = _model([helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=ba, time_axis=ta)],
                      [_vi("x", T.FLOAT, ["A", "B", 3]), _vi("lens", T.INT64, ["AB"[ba]])], [_vi("y", T.FLOAT, None)], 10)
        for shp in ((4, 5, 3), (2, 6, 3)):
            tlen, blen = shp[ta], shp[ba]
            lens = rng.integers(1, tlen + 1, size=blen).astype(np.int64)
            _check(path, [(rng.standard_normal(shp).astype(np.float32), lens)])
    path = _model([helper.make_node("EyeLike", ["x"], ["y"], k=1)], [_vi("x", T.FLOAT, ["N", "W"])],
                  [_vi("y", T.FLOAT, None)], 9)
    _check(path, [(np.zeros((3, 5), np.float32),), (np.zeros((4, 2), np.float32),)])
