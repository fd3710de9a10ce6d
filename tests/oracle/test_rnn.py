"""lstm and gru against PyTorch's nn.LSTM and nn.GRU: PyTorch's weights
saved as a state_dict .npz and bound by name (`weights`), random shapes
and seeds (odd sizes included), forward outputs y, h_n, c_n within 1e-5,
with and without h0/c0, batch_first, on cpu at 1 and 2 threads and on the
simulated device;
and one SGD training step through mge-train (a linear head and mse, or
cross_entropy) whose updated parameters equal PyTorch's within 1e-4."""
import os

import numpy as np

from common import need_torch, read_stream, rel_err, run, npy_stream, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(2)

FWD_TOL = 1e-5
STEP_TOL = 1e-4


def save_weights(d, mods):
    """state_dicts of name -> module into d/w.npz, keys NAME.weight_ih_l0 ..."""
    path = os.path.join(d, "w.npz")
    arrs = {}
    for name, m in mods.items():
        for k, v in m.state_dict().items():
            arrs[f"{name}.{k}"] = v.detach().numpy().copy()
    np.savez(path, **arrs)
    return path


def attrs(h, layers, bidir, bf, bias):
    return (f"hidden_size={h}, num_layers={layers}, bidirectional={'true' if bidir else 'false'}, "
            f"batch_first={'true' if bf else 'false'}, bias={'true' if bias else 'false'}")


def forward_case(kind, seed, S, N, I, H, layers, bidir, bf=False, bias=True, state=False, backend="cpu",
                 threads=2):
    torch.manual_seed(seed)
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    m = cls(I, H, num_layers=layers, bidirectional=bidir, batch_first=bf, bias=bias)
    D = 2 if bidir else 1
    gen = torch.Generator().manual_seed(seed + 100)
    # two records of different lengths in one stream (the model's S is a symbol)
    lens = (S, S + 3)
    xs = [torch.randn(*((N, s, I) if bf else (s, N, I)), generator=gen) for s in lens]
    h0 = torch.randn(D * layers, N, H, generator=gen)
    c0 = torch.randn(D * layers, N, H, generator=gen)
    d = tmpdir()
    w = save_weights(d, {"rnn": m})
    xdecl = "f32[N,S,%d]" % I if bf else "f32[S,N,%d]" % I
    src = f'weights "{w}"\ninput x : {xdecl}\n'
    args = "x"
    if state:
        src += f"input h0 : f32[{D * layers},N,{H}]\n"
        args += ", h0"
        if kind == "lstm":
            src += f"input c0 : f32[{D * layers},N,{H}]\n"
            args += ", c0"
    outs = "rnn, hn, cn" if kind == "lstm" else "rnn, hn"
    src += f"{outs} = {kind}({args}, {attrs(H, layers, bidir, bf, bias)})\n"
    src += "".join(f"output {o.strip()}\n" for o in outs.split(","))
    mgt = os.path.join(d, "m.mgt")
    with open(mgt, "w") as f:
        f.write(src)
    recs = []
    refs = []
    with torch.no_grad():
        for x in xs:
            recs.append(x.numpy())
            if state:
                recs.append(h0.numpy())
                if kind == "lstm":
                    recs.append(c0.numpy())
                    y, (hn, cn) = m(x, (h0, c0))
                    refs += [y.numpy(), hn.numpy(), cn.numpy()]
                else:
                    y, hn = m(x, h0)
                    refs += [y.numpy(), hn.numpy()]
            else:
                if kind == "lstm":
                    y, (hn, cn) = m(x)
                    refs += [y.numpy(), hn.numpy(), cn.numpy()]
                else:
                    y, hn = m(x)
                    refs += [y.numpy(), hn.numpy()]
    env_args = ["--threads", str(threads)]
    if backend != "cpu":
        env_args += ["--device", backend]
    _, out, _ = run([tool("mge-run"), mgt, *env_args], stdin=npy_stream(*recs))
    got = read_stream(out)
    assert len(got) == len(refs), f"{len(got)} outputs for {len(refs)}"
    for i, (g, r) in enumerate(zip(got, refs)):
        assert g.shape == r.shape, f"{kind} output {i}: shape {g.shape} != {r.shape}"
        e = rel_err(g, r)
        assert e < FWD_TOL, f"{kind} seed {seed} output {i} ({backend}, {threads} threads): rel error {e:.3g}"


def test_lstm_2layer_bidirectional():
    forward_case("lstm", 1, 7, 3, 5, 8, 2, True)
    forward_case("lstm", 1, 7, 3, 5, 8, 2, True, backend="sim", threads=1)
    forward_case("lstm", 1, 7, 3, 5, 8, 2, True, threads=1)


def test_lstm_random_shapes():
    rng = np.random.default_rng(5)
    for seed in range(4):
        S, N, I, H = (int(v) for v in rng.integers(1, 12, 4))
        layers = int(rng.integers(1, 4))
        bidir = bool(rng.integers(0, 2))
        forward_case("lstm", seed, S, N, I, H, layers, bidir, bf=bool(seed % 2), bias=seed != 2, state=seed >= 2)


def test_gru_2layer_bidirectional():
    forward_case("gru", 2, 6, 4, 3, 9, 2, True)
    forward_case("gru", 2, 6, 4, 3, 9, 2, True, backend="sim", threads=1)
    forward_case("gru", 2, 6, 4, 3, 9, 2, True, bf=True, state=True, threads=1)


def test_gru_random_shapes():
    rng = np.random.default_rng(6)
    for seed in range(4):
        S, N, I, H = (int(v) for v in rng.integers(1, 12, 4))
        layers = int(rng.integers(1, 4))
        forward_case("gru", 10 + seed, S, N, I, H, layers, bool(seed % 2 == 0), bf=seed == 1, bias=seed != 3,
                     state=seed >= 2)


class Net(nn.Module):
    """An lstm or gru (batch_first) and a linear head over the flattened sequence."""

    def __init__(self, kind, S, I, H, layers, bidir, K):
        super().__init__()
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cls(I, H, num_layers=layers, bidirectional=bidir, batch_first=True)
        self.head = nn.Linear(S * H * (2 if bidir else 1), K)

    def forward(self, x):
        y = self.rnn(x)[0]
        return self.head(torch.flatten(y, 1))


def train_case(kind, loss, seed, S, N, I, H, layers, bidir, K=3, threads=2):
    torch.manual_seed(seed)
    net = Net(kind, S, I, H, layers, bidir, K)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(N, S, I, generator=gen)
    d = tmpdir()
    init = save_weights(d, {"rnn": net.rnn, "head": net.head})
    data = os.path.join(d, "batch.npz")
    if loss == "mse":
        target = torch.randn(N, K, generator=gen)
        np.savez(data, x=x.numpy(), target=target.numpy())
        tdecl, lossexpr = f"input target : f32[N,{K}]", "loss = mse(head, target)"
    else:
        target = torch.randint(0, K, (N,), generator=gen)
        np.savez(data, x=x.numpy(), target=target.numpy().astype(np.int32))
        tdecl, lossexpr = "input target : i32[N]", "loss = cross_entropy(head, target)"
    outs = "rnn, hn, cn" if kind == "lstm" else "rnn, hn"
    src = (f"input x : f32[N,{S},{I}]\n{tdecl}\n"
           f"{outs} = {kind}(x, {attrs(H, layers, bidir, True, True)})\n"
           f"flat = flatten(rnn)\nhead = linear(flat, out={K})\n{lossexpr}\noutput head\nminimize loss\n")
    mgt = os.path.join(d, "net.mgt")
    with open(mgt, "w") as f:
        f.write(src)
    out = os.path.join(d, "trained.mge")
    params = os.path.join(d, "trained.npz")
    run([tool("mge-train"), mgt, "--data", data, "--batch", str(N), "--steps", "1", "--no-shuffle",
         "--threads", str(threads), "-q", "-o", out, "--optimizer", "sgd", "--lr", "0.5", "--weights", init])
    run([tool("mge-dump"), out, "--params", params])
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    opt.zero_grad()
    pred = net(x)
    (F.mse_loss(pred, target) if loss == "mse" else F.cross_entropy(pred, target)).backward()
    opt.step()
    ref = {f"rnn.{k}": v.detach().numpy() for k, v in net.rnn.state_dict().items()}
    ref.update({f"head.{k}": v.detach().numpy() for k, v in net.head.state_dict().items()})
    got = dict(np.load(params))
    assert set(got) == set(ref), f"params {sorted(set(got) ^ set(ref))[:6]}"
    start = dict(np.load(init))
    for k, r in ref.items():
        assert got[k].shape == r.shape, f"{k}: {got[k].shape} != {r.shape}"
        # the update itself (not only the weights, which barely move) within STEP_TOL
        du, dr = got[k] - start[k], r - start[k]
        assert np.max(np.abs(dr)) > 0, f"{k}: PyTorch did not move it"
        e = rel_err(du, dr)
        assert e < STEP_TOL * 10 and rel_err(got[k], r) < STEP_TOL, \
            f"{kind} {loss} {k}: update rel error {e:.3g}, weights {rel_err(got[k], r):.3g}"


def test_lstm_train_step():
    train_case("lstm", "mse", 3, 5, 4, 3, 6, 2, True)
    train_case("lstm", "cross_entropy", 4, 4, 3, 5, 7, 1, False, threads=1)


def test_gru_train_step():
    train_case("gru", "mse", 5, 5, 4, 3, 6, 2, True)
    train_case("gru", "cross_entropy", 6, 3, 5, 2, 4, 1, True, threads=1)
