"""Real models exported to ONNX by torch.onnx.export, for the ONNX import
oracle test (test_onnx_models.py) and scripts/bench-compare --onnx.

Each entry of MODELS builds a module with a fixed seed (torchvision's
random init, weights=None; BatchNorm statistics moved away from 0/1 so a
wrong BatchNorm shows), in eval mode, and says which axes of its one input
are dynamic in the export: the batch always, H/W where the model allows
(everything with adaptive pooling; not vit_b_16, whose position embedding
fixes 224x224; its zero-initialized head and class token get random
values), the sequence length for the LSTM and the Transformer.

export(name, opset) writes the .onnx once into ~/.cache/mge/onnx-models
(MGE_ONNX_MODELS_CACHE overrides), keyed by name, opset and EXPORT_VERSION
(bump it when a model definition or the export arguments change), and
returns its path. Never in the repository."""
import os
import tempfile
import warnings

EXPORT_VERSION = 3
SEED = 1234
CACHE = os.environ.get("MGE_ONNX_MODELS_CACHE",
                       os.path.join(os.path.expanduser("~"), ".cache", "mge", "onnx-models"))


class Spec:
    """kind: image (x: [N,C,H,W]) or seq (x: [N,T,F]); shapes: the input
    shapes the test feeds (the first is the export's example); dyn: the
    dynamic axes of the input, by index; keep_bn: export BatchNormalization
    nodes (the exporter's eval mode folds them into the convolutions)."""

    def __init__(self, name, make, kind, shapes, dyn, keep_bn=False):
        self.name, self.make, self.kind, self.shapes, self.dyn = name, make, kind, shapes, dyn
        self.keep_bn = keep_bn


def _tv(name, **kw):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw)
    return make


def _unet():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class UNetLike(nn.Module):
        """Two encoder levels; up by conv_transpose and by bilinear
        interpolate; skips joined by cat."""

        def __init__(self):
            super().__init__()
            self.e1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
            self.e2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
            self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
            self.up2 = nn.ConvTranspose2d(16, 16, 2, stride=2)
            self.d2 = nn.Sequential(nn.Conv2d(32, 8, 3, padding=1), nn.ReLU())
            self.d1 = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU())
            self.head = nn.Conv2d(8, 3, 1)

        def forward(self, x):
            e1 = self.e1(x)
            e2 = self.e2(F.max_pool2d(e1, 2))
            m = self.mid(F.max_pool2d(e2, 2))
            d2 = self.d2(torch.cat([self.up2(m), e2], 1))
            u1 = F.interpolate(d2, scale_factor=2.0, mode="bilinear", align_corners=False)
            return self.head(self.d1(torch.cat([u1, e1], 1)))

    return UNetLike()


def _lstm():
    import torch.nn as nn

    class LSTM2(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
            self.fc = nn.Linear(32, 5)

        def forward(self, x):
            y, (h, c) = self.lstm(x)
            return self.fc(y), h, c

    return LSTM2()


def _transformer():
    import torch.nn as nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                               batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2)

        def forward(self, x):
            return self.enc(x)

    return Encoder()


NHW = {0: "N", 2: "H", 3: "W"}
N_ONLY = {0: "N"}
NT = {0: "N", 1: "T"}
# two batch sizes, and a second H/W where dynamic; small images keep the
# quick subset quick (the CNNs end in adaptive pooling, any size >= 32 works)
IMG = [(1, 3, 64, 64), (2, 3, 64, 64), (1, 3, 96, 80)]
MODELS = {s.name: s for s in [
    Spec("resnet18", _tv("resnet18"), "image", IMG, NHW),
    Spec("resnet50", _tv("resnet50"), "image", IMG, NHW),
    Spec("mobilenet_v2", _tv("mobilenet_v2"), "image", IMG, NHW),
    Spec("mobilenet_v3_small", _tv("mobilenet_v3_small"), "image", IMG, NHW),
    Spec("efficientnet_b0", _tv("efficientnet_b0"), "image", IMG, NHW),
    Spec("squeezenet1_1", _tv("squeezenet1_1"), "image", IMG, NHW),
    Spec("densenet121", _tv("densenet121"), "image", IMG, NHW),
    Spec("googlenet", _tv("googlenet", aux_logits=False, init_weights=True), "image", IMG, NHW),
    Spec("regnet_y_400mf", _tv("regnet_y_400mf"), "image", IMG, NHW),
    Spec("shufflenet_v2_x1_0", _tv("shufflenet_v2_x1_0"), "image", IMG, NHW),
    Spec("mnasnet0_5", _tv("mnasnet0_5"), "image", IMG, NHW),
    Spec("convnext_tiny", _tv("convnext_tiny"), "image", IMG, NHW),
    Spec("vit_b_16", _tv("vit_b_16"), "image", [(1, 3, 224, 224), (2, 3, 224, 224)], N_ONLY),
    Spec("unet", _unet, "image", [(1, 3, 32, 32), (2, 3, 32, 32), (1, 3, 48, 40)], NHW, keep_bn=True),
    Spec("lstm", _lstm, "seq", [(1, 7, 16), (3, 7, 16), (2, 11, 16)], NT),
    Spec("transformer_encoder", _transformer, "seq", [(1, 6, 32), (2, 6, 32), (2, 9, 32)], NT),
]}
OPSETS = (13, 17)


def build(name):
    """The eval-mode module of MODELS[name], seeded."""
    import torch
    import torch.nn as nn
    torch.manual_seed(SEED)
    model = MODELS[name].make()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d) and m.running_mean is not None:
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                if m.affine:
                    m.weight.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                    m.bias.copy_(torch.randn(c, generator=gen) * 0.1)
        # parameters left all zero by the init (vit_b_16's class token and
        # head: its output would be exactly 0 for any input) get small
        # random values, so the output depends on the whole network
        for _, p in model.named_parameters():
            if p.dim() >= 2 and not p.abs().max() > 0:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model.eval()


def inputs(name, seed=SEED):
    """The test inputs of MODELS[name]: float32 arrays, one per shape."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in MODELS[name].shapes]


def path(name, opset):
    return os.path.join(CACHE, f"{name}-opset{opset}-v{EXPORT_VERSION}.onnx")


def export(name, opset):
    """The cached export of MODELS[name] at opset; exported on first use
    (to a temporary file then renamed: parallel runs never see half a file)."""
    p = path(name, opset)
    if os.path.exists(p):
        return p
    import torch
    spec = MODELS[name]
    model = build(name)
    x = torch.from_numpy(inputs(name)[0])
    with torch.no_grad():
        y = model(x)
    n_out = len(y) if isinstance(y, tuple) else 1
    outs = ["y"] if n_out == 1 else [f"y{i}" for i in range(n_out)]
    dyn = {"x": spec.dyn}
    for o in outs:
        # outputs are batch-first except the LSTM's h/c ([layers, N, H])
        dyn[o] = {1: "N"} if name == "lstm" and o != "y0" else {0: "N"}
    os.makedirs(CACHE, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".onnx", dir=CACHE)
    os.close(fd)
    try:
        # not under no_grad: with gradients on, TransformerEncoderLayer
        # keeps off its fused fast path, which has no ONNX export
        with warnings.catch_warnings():
            # the exporter's tracer warnings (shape arithmetic seen as
            # constants where the graph keeps it dynamic) would flood make check
            warnings.simplefilter("ignore")
            # PRESERVE (the module is in eval mode) skips the exporter's
            # eval peephole pass, the one that folds BatchNormalization
            mode = torch.onnx.TrainingMode.PRESERVE if spec.keep_bn else torch.onnx.TrainingMode.EVAL
            torch.onnx.export(model, x, tmp, input_names=["x"], output_names=outs, dynamic_axes=dyn,
                              opset_version=opset, do_constant_folding=True, training=mode)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return p


if __name__ == "__main__":
    # export every model at every opset into the cache (or the ones named)
    import sys
    import time
    for n in sys.argv[1:] or list(MODELS):
        for o in OPSETS:
            t0 = time.time()
            print(f"{n} opset {o}: {export(n, o)} ({time.time() - t0:.1f}s)", flush=True)
