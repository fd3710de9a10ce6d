"""Each sample net against PyTorch: random weights in PyTorch (eval mode,
non-trivial BatchNorm statistics), exported as a state_dict .npz, assembled
with mge-opt --weights, run with mge-run; outputs equal within 1e-4 relative."""
import os

import numpy as np

from common import ROOT, need_torch, npy_stream, read_stream, rel_err, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
from nets import MLP, LeNet, randomize_bn  # noqa: E402
import torchvision  # noqa: E402

torch.set_num_threads(2)


def check_net(name, model, shape, batches=(1, 3), opt=()):
    gen = torch.Generator().manual_seed(1234)
    torch.manual_seed(1234)
    with torch.no_grad():
        randomize_bn(model, gen)
    model.eval()
    d = tmpdir()
    weights = os.path.join(d, "w.npz")
    np.savez(weights, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    mge = os.path.join(d, name + ".mge")
    run([tool("mge-opt"), os.path.join(ROOT, "samples", "nets", name + ".mgt"), "--weights", weights, *opt, "-o", mge])
    xs = [torch.randn(b, *shape, generator=gen) for b in batches]
    with torch.no_grad():
        refs = [model(x).numpy() for x in xs]
    _, out, _ = run([tool("mge-run"), mge, "--threads", "2"], stdin=npy_stream(*[x.numpy() for x in xs]))
    got = read_stream(out)
    assert len(got) == len(refs), f"{len(got)} outputs for {len(refs)} steps"
    for g, r in zip(got, refs):
        assert g.shape == r.shape, f"shape {g.shape} != {r.shape}"
        e = rel_err(g, r)
        assert e < 1e-4, f"{name} {' '.join(opt)}: relative error {e:.3g} >= 1e-4"
    return mge


def test_mlp():
    check_net("mlp", MLP(), (1, 28, 28))


def test_lenet():
    check_net("lenet", LeNet(), (1, 28, 28))


def test_resnet18():
    check_net("resnet18", torchvision.models.resnet18(), (3, 224, 224), batches=(1, 2))


def test_mobilenet_v2():
    check_net("mobilenet_v2", torchvision.models.mobilenet_v2(), (3, 224, 224), batches=(1, 2))


def test_state_dict_names():
    """Exported parameter names are exactly torchvision's state_dict keys."""
    for name, model in (("resnet18", torchvision.models.resnet18()),
                        ("mobilenet_v2", torchvision.models.mobilenet_v2())):
        d = tmpdir()
        mge = os.path.join(d, "m.mge")
        params = os.path.join(d, "p.npz")
        run([tool("mge-opt"), os.path.join(ROOT, "samples", "nets", name + ".mgt"), "-o", mge])
        run([tool("mge-dump"), mge, "--params", params])
        keys = set(np.load(params).keys())
        want = set(model.state_dict().keys())
        assert keys == want, f"{name}: extra {sorted(keys - want)[:5]}, missing {sorted(want - keys)[:5]}"
        # and PyTorch accepts them strictly
        sd = {k: torch.from_numpy(np.array(v)) for k, v in np.load(params).items()}
        model.load_state_dict(sd, strict=True)


def check_O2(name, model, shape, isa=None):
    """-O2 on PyTorch weights: no batchnorm or dropout node is left and the
    outputs still match PyTorch's within 1e-4 relative. isa sets
    MGE_CPU_ISA for mge-opt and mge-run: with "avx2" the layout pass blocks
    by 8 only regions with a depthwise conv, so in resnet18 winograd takes
    the 3x3 convolutions instead of the blocked kernels.
    Returns the ops of the optimized model."""
    import json
    old = os.environ.get("MGE_CPU_ISA")
    if isa:
        os.environ["MGE_CPU_ISA"] = isa
    try:
        mge = check_net(name, model, shape, batches=(1, 2), opt=("-O2",))
    finally:
        if isa:
            if old is None:
                del os.environ["MGE_CPU_ISA"]
            else:
                os.environ["MGE_CPU_ISA"] = old
    _, out, _ = run([tool("mge-dump"), mge, "--json"])
    ops = [n["op"] for n in json.loads(out)["nodes"]]
    left = sorted(set(ops) & {"batchnorm", "dropout"})
    assert not left, f"{name} -O2 still has {left}"
    assert set(ops) & {"conv2d", "fused_conv2d", "conv2d_nchwc", "conv2d_winograd"}
    return ops


def test_resnet18_O2():
    check_O2("resnet18", torchvision.models.resnet18(), (3, 224, 224))


def test_mobilenet_v2_O2():
    check_O2("mobilenet_v2", torchvision.models.mobilenet_v2(), (3, 224, 224))


def test_resnet18_O2_avx2():
    """The AVX2 path of -O2: winograd (F(4,3) and F(2,3)) instead of NCHWc."""
    ops = check_O2("resnet18", torchvision.models.resnet18(), (3, 224, 224), isa="avx2")
    assert "conv2d_winograd" in ops and "conv2d_nchwc" not in ops, sorted(set(ops))


def test_mobilenet_v2_O2_avx2():
    """The AVX2 path of -O2 on a net with depthwise convs: blocks of 8."""
    ops = check_O2("mobilenet_v2", torchvision.models.mobilenet_v2(), (3, 224, 224), isa="avx2")
    assert "conv2d_nchwc" in ops and "conv2d" not in ops, sorted(set(ops))
