"""A U-Net-like segmentation net against PyTorch: two encoder levels, a
transposed-convolution up step and a bilinear-resize up step, skip
connections by concat, group_norm, and a per-pixel cross_entropy over
[N,C,H,W] logits with [N,H,W] labels (ignore_index on some pixels).

Forward: mge-run on records of two image sizes in one stream (H, W
symbolic) equals the PyTorch module within 1e-5. Training: one SGD step
with momentum by mge-train from PyTorch's initial weights equals
PyTorch's step within 1e-4 relative on every parameter, at 1 and 2
threads."""
import os

import numpy as np

from common import need_torch, npy_stream, read_stream, rel_err, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(2)
CLASSES = 3


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.Conv2d(3, 8, 3, padding=1)
        self.gn1 = nn.GroupNorm(2, 8)
        self.enc2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bott = nn.Conv2d(16, 16, 3, padding=1)
        self.up2 = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.dec2 = nn.Conv2d(32, 8, 3, padding=1)
        self.dec1 = nn.Conv2d(16, 8, 3, padding=1)
        self.head = nn.Conv2d(8, CLASSES, 1)

    def forward(self, x):
        e1 = F.relu(self.gn1(self.enc1(x)))                  # [N,8,H,W]
        e2 = F.relu(self.enc2(F.max_pool2d(e1, 2)))          # [N,16,H/2,W/2]
        b = F.relu(self.bott(F.max_pool2d(e2, 2)))           # [N,16,H/4,W/4]
        d2 = F.relu(self.dec2(torch.cat([self.up2(b), e2], 1)))
        u1 = F.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False)
        d1 = F.relu(self.dec1(torch.cat([u1, e1], 1)))
        return self.head(d1)


UNET_MGT = f"""input x : f32[N,3,H,W]
input label : i64[N,H,W]
enc1 = conv2d(x, out=8, kernel=3, pad=1)
gn1 = group_norm(enc1, num_groups=2)
r1 = relu(gn1)
p1 = maxpool2d(r1, kernel=2)
enc2 = conv2d(p1, out=16, kernel=3, pad=1)
r2 = relu(enc2)
p2 = maxpool2d(r2, kernel=2)
bott = conv2d(p2, out=16, kernel=3, pad=1)
rb = relu(bott)
up2 = conv_transpose2d(rb, out=16, kernel=2, stride=2)
c2 = concat(up2, r2, axis=1)
dec2 = conv2d(c2, out=8, kernel=3, pad=1)
rd2 = relu(dec2)
u1 = resize(rd2, mode=bilinear, align_corners=false, scales=[2,2])
c1 = concat(u1, r1, axis=1)
dec1 = conv2d(c1, out=8, kernel=3, pad=1)
rd1 = relu(dec1)
head = conv2d(rd1, out={CLASSES}, kernel=1)
loss = cross_entropy(head, label, ignore_index=-1)
output head
minimize loss
"""


def _write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_unet_forward_two_sizes():
    torch.manual_seed(3)
    model = UNet().eval()
    d = tmpdir()
    np.savez(os.path.join(d, "w.npz"), **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    path = _write(d, "unet.mgt", f'weights "{os.path.join(d, "w.npz")}"\n' + UNET_MGT)
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((2, 3, 8, 12)).astype(np.float32), rng.standard_normal((1, 3, 16, 8)).astype(np.float32)]
    stream = npy_stream(*xs)   # the label input feeds only the loss: mge-run reads x alone
    for t in (1, 2):
        _, out, _ = run([tool("mge-run"), path, "--threads", str(t)],
                        stdin=stream)
        got = read_stream(out)
        assert len(got) == 2, len(got)
        for x, g in zip(xs, got):
            want = model(torch.from_numpy(x)).detach().numpy()
            assert g.shape == want.shape, (g.shape, want.shape)
            e = rel_err(g, want)
            assert e < 1e-5, f"t{t} {x.shape}: relative error {e:.3g}"


def test_unet_training_step():
    torch.manual_seed(5)
    model = UNet()
    gen = torch.Generator().manual_seed(6)
    batch, h, w = 4, 8, 12
    x = torch.randn(batch, 3, h, w, generator=gen)
    label = torch.randint(0, CLASSES, (batch, h, w), generator=gen)
    label[0, :2, :3] = -1   # ignored pixels
    d = tmpdir()
    path = _write(d, "unet.mgt", UNET_MGT)
    np.savez(os.path.join(d, "init.npz"), **{k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    np.savez(os.path.join(d, "batch.npz"), x=x.numpy(), label=label.numpy())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.zero_grad()
    F.cross_entropy(model(x), label, ignore_index=-1).backward()
    opt.step()
    ref = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    for t in (1, 2):
        out, params = os.path.join(d, f"t{t}.mge"), os.path.join(d, f"t{t}.npz")
        run([tool("mge-train"), path, "--data", os.path.join(d, "batch.npz"), "--batch", str(batch), "--steps", "1",
             "--threads", str(t), "-q", "-o", out, "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9",
             "--no-shuffle", "--weights", os.path.join(d, "init.npz")])
        run([tool("mge-dump"), out, "--params", params])
        got = dict(np.load(params))
        assert set(got) == set(ref), (sorted(got), sorted(ref))
        for k, r in ref.items():
            e = rel_err(got[k], r)
            assert e < 1e-4, f"t{t}: {k} relative error {e:.3g}"
