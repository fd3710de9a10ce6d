"""mge-quant's acceptance checks: post-training int8 quantization.

resnet18 and mobilenet_v2 with PyTorch's random init (BatchNorm statistics
randomized as in test_nets.py), assembled with mge-opt --weights, calibrated
on random-normal images and quantized with each --method; the int8 model's
outputs on new random-normal inputs must have cosine similarity >= 0.99 with
the f32 model's, per row and overall (the issue's acceptance, asserted for
every method). The int8 model must really be
int8 (more than 10 qconv2d nodes). LeNet trained one epoch on the bundled
Fashion-MNIST sample keeps its test accuracy within 1 point after
quantization and shrinks to <= 0.3 of its size. Whole file: about a minute
on 2 cores."""
import json
import os
import re

import numpy as np

from common import ROOT, Skip, need_torch, npy_stream, read_stream, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torchvision  # noqa: E402
from nets import randomize_bn  # noqa: E402

torch.set_num_threads(2)

CALIB_IMAGES = 16      # 224x224 random-normal calibration images
EVAL_BATCH = 3         # new random-normal images the outputs are compared on
MIN_COSINE = 0.99
DATA = os.path.join(ROOT, "samples", "data", "fashion-mnist")


_NETS = {}


def prepared(name):
    """(dir, f32 .mge, calibration .npy, eval input stream, f32 outputs) for
    a torchvision net, built once per run."""
    if name in _NETS:
        return _NETS[name]
    torch.manual_seed(1234)   # before construction: the init draws from the global generator
    model = getattr(torchvision.models, name)()
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        randomize_bn(model, gen)
    model.eval()
    d = tmpdir()
    weights = os.path.join(d, "w.npz")
    np.savez(weights, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    f32 = os.path.join(d, "f32.mge")
    run([tool("mge-opt"), os.path.join(ROOT, "samples", "nets", name + ".mgt"), "--weights", weights, "-o", f32])
    rng = np.random.default_rng(7)
    calib = os.path.join(d, "calib.npy")
    np.save(calib, rng.standard_normal((CALIB_IMAGES, 3, 224, 224), dtype=np.float32))
    # new images, never seen by calibration
    x = np.random.default_rng(99).standard_normal((EVAL_BATCH, 3, 224, 224), dtype=np.float32)
    xs = npy_stream(x)
    ref = mge_run(f32, xs)
    _NETS[name] = (d, f32, calib, xs, ref)
    return _NETS[name]


def mge_run(model, stream):
    _, out, _ = run([tool("mge-run"), model, "--threads", "2"], stdin=stream)
    got = read_stream(out)
    assert len(got) == 1, f"{model}: {len(got)} outputs for one input record"
    return got[0].astype(np.float64)


def cosine(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))


def op_counts(model):
    _, out, _ = run([tool("mge-dump"), model, "--json"])
    counts = {}
    for n in json.loads(out)["nodes"]:
        counts[n["op"]] = counts.get(n["op"], 0) + 1
    return counts


def quantize(src, calib, out, *extra, stdin=None):
    args = [tool("mge-quant"), src, "--calib", calib, "--threads", "2", "-q", "-o", out, *extra]
    run(args, stdin=stdin)
    return out


def compare(name, q, ref, xs):
    """Overall and worst per-row cosine of q's outputs against ref."""
    got = mge_run(q, xs)
    assert got.shape == ref.shape, f"{name}: int8 output shape {got.shape} != f32 {ref.shape}"
    assert np.all(np.isfinite(got)), f"{name}: int8 output has NaN/inf"
    rows = [cosine(got[i], ref[i]) for i in range(ref.shape[0])]
    return cosine(got, ref), min(rows)


def check_methods(name):
    d, f32, calib, xs, ref = prepared(name)
    results = {}
    for method in ("percentile", "minmax", "entropy"):
        extra = () if method == "percentile" else ("--method", method)
        q = quantize(f32, calib, os.path.join(d, f"q-{method}.mge"), *extra)
        if method == "percentile":
            ops = op_counts(q)
            nq = ops.get("qconv2d", 0)
            assert nq > 10, f"{name}: only {nq} qconv2d nodes in the int8 model: {ops}"
            assert not ops.get("conv2d") and not ops.get("fused_conv2d"), f"{name}: f32 convs left: {ops}"
            ratio = os.path.getsize(q) / os.path.getsize(f32)
            print(f"  {name}: {nq} qconv2d, {ops.get('qlinear', 0)} qlinear, {ops.get('qadd', 0)} qadd; "
                  f".mge {os.path.getsize(f32)} -> {os.path.getsize(q)} bytes ({ratio:.3f}x)")
            assert ratio <= 0.3, f"{name}: int8 .mge is {ratio:.3f} of the f32 one"
        results[method] = compare(name, q, ref, xs)
    for method, (overall, worst) in results.items():
        verdict = "pass" if min(overall, worst) >= MIN_COSINE else "FAILS 0.99"
        print(f"  {name} --method {method:<10}: cosine {overall:.5f} overall, worst row {worst:.5f} ({verdict})")
    for method, (overall, worst) in results.items():
        assert overall >= MIN_COSINE and worst >= MIN_COSINE, \
            f"{name} --method {method}: cosine {overall:.5f} overall, {worst:.5f} worst row < {MIN_COSINE}"


def check_from_O2(name):
    """mge-opt -O2 f32.mge | mge-quant: the int8 model from the optimized one."""
    _, passes, _ = run([tool("mge-opt"), "--list-passes"])
    if b"unfuse" not in passes.split():
        raise Skip("mge-opt has no 'unfuse' pass: mge-quant cannot bring an -O2 model back to plain ops")
    d, f32, calib, xs, ref = prepared(name)
    _, o2, _ = run([tool("mge-opt"), "-O2", f32])
    q = quantize("-", calib, os.path.join(d, "q-from-O2.mge"), stdin=o2)
    nq = op_counts(q).get("qconv2d", 0)
    assert nq > 10, f"{name} from -O2: only {nq} qconv2d nodes"
    overall, worst = compare(name, q, ref, xs)
    print(f"  {name} -O2 | mge-quant: {nq} qconv2d, cosine {overall:.5f} overall, worst row {worst:.5f}")
    assert overall >= MIN_COSINE and worst >= MIN_COSINE, \
        f"{name} from -O2: cosine {overall:.5f} overall, {worst:.5f} worst row < {MIN_COSINE}"


def test_resnet18():
    check_methods("resnet18")


def test_mobilenet_v2():
    check_methods("mobilenet_v2")


def test_resnet18_from_O2():
    check_from_O2("resnet18")


def test_mobilenet_v2_from_O2():
    check_from_O2("mobilenet_v2")


def read_idx(path):
    import gzip
    raw = gzip.open(path).read()
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * nd).reshape(dims)


def cli_accuracy(model):
    """mge-run --accuracy on the 1000 sample test images, in percent."""
    _, out, err = run([tool("mge-run"), model, "--data", os.path.join(DATA, "t10k"), "--accuracy",
                       "--threads", "2"])
    text = out.decode() + err
    m = re.search(r"accuracy\s+[0-9.]+\s+\((\d+) of (\d+)\)", text)
    assert m, f"no 'accuracy F (K of N)' in mge-run's output: {text!r}"
    k, n = int(m.group(1)), int(m.group(2))
    assert n == 1000, f"{n} test images, expected the 1000 of the sample"
    return 100.0 * k / n


def stream_accuracy(model):
    """The same figure from the logits mge-run writes for the test images as
    an NPY stream (x / 255, as --data converts u8 without --normalize)."""
    x = read_idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"))
    x = (x.astype(np.float32) / 255).reshape(-1, 1, 28, 28)
    logits = mge_run(model, npy_stream(x))
    assert logits.shape == (len(y), 10), f"logits shape {logits.shape}"
    return 100.0 * float(np.mean(logits.argmax(1) == y))


_LENET = []


def lenet_models():
    """(trained f32 .mge, its inference-only form, int8 .mge): LeNet trained
    one epoch on the 4000 sample images (as scripts/demo, no normalization),
    int8 calibrated on 512 of them."""
    if _LENET:
        return _LENET[0]
    d = tmpdir()
    f32 = os.path.join(d, "lenet.mge")
    run([tool("mge-train"), os.path.join(ROOT, "samples", "nets", "lenet.mgt"), "--data",
         os.path.join(DATA, "train"), "--epochs", "1", "--optimizer", "adam", "--lr", "0.001", "--batch", "64",
         "--threads", "2", "--seed", "1", "-q", "-o", f32])
    q = quantize(f32, os.path.join(DATA, "train"), os.path.join(d, "q.mge"), "--batches", "16",
                 "--batch-size", "32")
    # the trained file also holds Adam's moments: sizes compare with the inference-only f32 model
    plain = os.path.join(d, "plain.mge")
    run([tool("mge-opt"), "--passes=strip-training", f32, "-o", plain])
    _LENET.append((f32, plain, q))
    return _LENET[0]


def test_lenet_accuracy():
    f32, plain, q = lenet_models()
    a32, a8 = stream_accuracy(f32), stream_accuracy(q)
    c32 = cli_accuracy(f32)
    assert abs(c32 - a32) < 1e-9, f"mge-run --accuracy says {c32}%, its logits {a32}%"
    s32, s8 = os.path.getsize(plain), os.path.getsize(q)
    print(f"  lenet: f32 {a32:.2f}%, int8 {a8:.2f}% ({a8 - a32:+.2f} points) on the 1000 sample test images; "
          f".mge {s32} -> {s8} bytes ({s8 / s32:.3f}x; the trained file with Adam state: {os.path.getsize(f32)})")
    assert a32 > 60, f"lenet trained to only {a32}%: the check below would mean little"
    assert abs(a8 - a32) <= 1.0, f"int8 accuracy {a8}% is more than 1 point from f32's {a32}%"
    assert s8 / s32 <= 0.3, f"int8 .mge is {s8 / s32:.3f} of the f32 one"


def test_lenet_accuracy_cli():
    """The acceptance command itself: mge-run --data t10k --accuracy on the
    int8 model agrees with its logits."""
    _, _, q = lenet_models()
    a8 = cli_accuracy(q)
    assert abs(a8 - stream_accuracy(q)) < 1e-9
