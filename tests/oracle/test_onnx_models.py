"""Real models through mge's ONNX import, against ONNX Runtime.

Each model of onnx_models.py (torchvision's classifiers, a U-Net-like net,
a 2-layer LSTM, a TransformerEncoder; random init, seeded, eval mode) is
exported by torch.onnx.export at opset 13 or 17 with a dynamic batch (and
dynamic H/W, or sequence length, where the model allows) and cached in
~/.cache/mge/onnx-models. `mge-run MODEL.onnx` then runs one stream of
inputs of every shape the model is fed (two batch sizes; a second H/W or
length where dynamic), so one process plans several bindings of the
symbols; each output must equal ONNX Runtime's on the same input within
1e-4 relative (max |mge - ort| / max |ort|). The same again for
`mge-opt -O2 MODEL.onnx` (the optimized .mge).

Default (make check): a quick subset, small inputs, about a minute on two
cores once the exports are cached. MGE_ONNX_MODELS=all runs every model at
both opsets; MGE_ONNX_MODELS=resnet50,vit_b_16 runs the ones named (both
opsets). Skipped, visibly, without PyTorch or onnxruntime.

`/usr/bin/python3 tests/oracle/test_onnx_models.py [NAME...]` prints one
line per model and opset instead (ok, or mge's first complaint): every
model when none is named."""
import os

import numpy as np

from common import Skip, need_torch, npy_stream, read_stream, rel_err, run, tmpdir, tool

need_torch()
try:
    import onnxruntime as ort
except ImportError as e:
    raise Skip(f"onnxruntime not installed ({e}); pip install onnxruntime")
import onnx_models as M  # noqa: E402

TOL = 1e-4
# the quick subset: each op family once (concat, clip, channel shuffle,
# squeeze-excite, hard-swish, reduce-mean, pads, conv_transpose + resize,
# LSTM, attention), both opsets where the export differs most (the
# U-Net's Resize, LayerNormalization); about 10 s once exported. Left to
# MGE_ONNX_MODELS=all: resnet50, convnext_tiny and vit_b_16 (the slow ones)
QUICK = [("resnet18", 13), ("mobilenet_v2", 17), ("squeezenet1_1", 13), ("shufflenet_v2_x1_0", 17),
         ("efficientnet_b0", 17), ("mobilenet_v3_small", 17), ("mnasnet0_5", 13), ("googlenet", 17),
         ("densenet121", 13), ("regnet_y_400mf", 17), ("unet", 13), ("unet", 17), ("lstm", 13), ("lstm", 17),
         ("transformer_encoder", 13), ("transformer_encoder", 17)]


def _ort_outputs(path, xs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return [sess.run(None, {"x": x}) for x in xs]


def _mge_outputs(model, xs, n_out):
    rc, out, err = run([tool("mge-run"), model, "--threads", "2"], npy_stream(*xs), check=False)
    if rc != 0:
        raise AssertionError(f"mge-run {os.path.basename(model)} exited {rc}: {err.strip()}")
    got = read_stream(out)
    if len(got) != n_out * len(xs):
        raise AssertionError(f"mge-run gave {len(got)} records for {len(xs)} steps x {n_out} outputs")
    return [got[i * n_out:(i + 1) * n_out] for i in range(len(xs))]


def _compare(what, refs, gots, xs):
    for x, ref, got in zip(xs, refs, gots):
        for k, (r, g) in enumerate(zip(ref, got)):
            if r.shape != g.shape:
                raise AssertionError(f"{what}: input {list(x.shape)} output {k}: shape {list(g.shape)}, "
                                     f"ONNX Runtime {list(r.shape)}")
            if not np.abs(r).max() > 0:
                raise AssertionError(f"{what}: input {list(x.shape)} output {k}: ONNX Runtime's output is all "
                                     "zero (a degenerate model: the comparison would prove nothing)")
            e = rel_err(g, r)
            if not e < TOL:
                raise AssertionError(f"{what}: input {list(x.shape)} output {k}: rel err {e:.3g} > {TOL}")


def check_model(name, opset):
    path = M.export(name, opset)
    xs = M.inputs(name)
    refs = _ort_outputs(path, xs)
    n_out = len(refs[0])
    _compare(f"{name} opset {opset}", refs, _mge_outputs(path, xs, n_out), xs)
    opt = os.path.join(tmpdir(), f"{name}-{opset}-O2.mge")
    rc, _, err = run([tool("mge-opt"), path, "-O2", "-o", opt], check=False)
    if rc != 0:
        raise AssertionError(f"mge-opt -O2 {name} opset {opset} exited {rc}: {err.strip()}")
    _compare(f"{name} opset {opset} after mge-opt -O2", refs, _mge_outputs(opt, xs, n_out), xs)


def _selected():
    sel = os.environ.get("MGE_ONNX_MODELS", "")
    if not sel:
        return QUICK
    names = list(M.MODELS) if sel == "all" else [s for s in sel.split(",") if s]
    for n in names:
        if n not in M.MODELS:
            raise AssertionError(f"MGE_ONNX_MODELS: unknown model {n!r} (known: {', '.join(M.MODELS)})")
    return [(n, o) for n in names for o in M.OPSETS]


def _make_test(name, opset):
    def test():
        check_model(name, opset)
    return test


for _n, _o in _selected():
    globals()[f"test_{_n}_opset{_o}"] = _make_test(_n, _o)

if not os.environ.get("MGE_ONNX_MODELS"):
    def test_zz_full_list():
        rest = sorted(set(M.MODELS) - {n for n, _ in QUICK})
        raise Skip(f"quick subset only; MGE_ONNX_MODELS=all adds {', '.join(rest)} and every model at "
                   f"opsets {' and '.join(map(str, M.OPSETS))}")


if __name__ == "__main__":
    import sys
    import time
    for _n in sys.argv[1:] or list(M.MODELS):
        for _o in M.OPSETS:
            t0 = time.time()
            try:
                check_model(_n, _o)
                r = "ok"
            except AssertionError as e:
                r = str(e).replace(os.path.expanduser("~"), "~")
            print(f"{_n} opset {_o} ({time.time() - t0:.1f}s): {r}", flush=True)
