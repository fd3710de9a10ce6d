"""Group "attn" against PyTorch: scaled_dot_product_attention against the
explicit softmax(q k^T * scale + mask) v (torch 1.13 has no
F.scaled_dot_product_attention) on random shapes (odd sizes, Sq != Sk,
leading dims, bool / float / broadcast masks, causal, a given scale),
embedding, cross_entropy over trailing dims with ignore_index and
label_smoothing, and nn.TransformerEncoder (2 layers, d_model 32, 4 heads,
feed-forward 64, dropout 0, batch_first; norm_first both ways, relu and
gelu) mapped by name onto an mge text model of linear / split / reshape /
transpose / scaled_dot_product_attention / layernorm / add.

Forward results come from mge-run (within 1e-5 relative); gradients from
one SGD step of mge-train on a model whose tensors under test are
parameters: the update is lr * gradient, compared with PyTorch's (within
1e-5 relative for the single ops; the TransformerEncoder's updated weights
within 1e-4)."""
import os

import numpy as np

from common import need_torch, read_stream, rel_err, run, tmpdir, tool, npy_stream

need_torch()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(2)


def write(d, name, text):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def mge_forward(mgt, arrays, threads=2):
    _, out, _ = run([tool("mge-run"), mgt, "--threads", str(threads)], stdin=npy_stream(*arrays))
    return read_stream(out)


def mge_sgd_step(d, mgt, data, weights, lr, batch, threads=2):
    """One plain SGD step of mge-train; the parameters after it, by name."""
    np.savez(os.path.join(d, "data.npz"), **data)
    np.savez(os.path.join(d, "w.npz"), **weights)
    out = os.path.join(d, "out.mge")
    run([tool("mge-train"), mgt, "--data", os.path.join(d, "data.npz"), "--weights", os.path.join(d, "w.npz"),
         "--batch", str(batch), "--steps", "1", "--optimizer", "sgd", "--lr", repr(lr), "--no-shuffle",
         "--threads", str(threads), "-q", "-o", out])
    params = os.path.join(d, "params.npz")
    run([tool("mge-dump"), out, "--params", params])
    return dict(np.load(params))


def torch_sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    if causal:
        Sq, Sk = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(Sq, Sk, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def dims(shape):
    return ",".join(str(x) for x in shape)


SDPA_CASES = [
    # lead, Sq, Sk, D, Dv, mask kind ("", bool, float), mask shape (None: full), causal, scale
    ((), 5, 7, 8, 3, "", None, False, None),
    ((2,), 1, 13, 5, 5, "", None, True, None),
    ((2, 3), 9, 9, 16, 16, "", None, True, 0.3),
    ((1, 8), 33, 17, 64, 64, "bool", (33, 17), False, None),
    ((3,), 70, 300, 8, 5, "float", (3, 1, 300), True, None),
    ((2, 2), 31, 31, 7, 9, "float", (2, 1, 31, 31), False, 1.5),
    ((2, 4), 129, 257, 32, 16, "bool", (1, 257), True, None),
]


def make_sdpa(seed, lead, Sq, Sk, D, Dv, kind, mshape):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, Sq, D, generator=g)
    k = torch.randn(*lead, Sk, D, generator=g)
    v = torch.randn(*lead, Sk, Dv, generator=g)
    mask = None
    if kind == "bool":
        mask = torch.rand(*mshape, generator=g) > 0.4
        mask[..., 0] = True   # no fully masked row (NaN in both)
    elif kind == "float":
        mask = torch.randn(*mshape, generator=g)
        mask = mask.masked_fill(torch.rand(*mshape, generator=g) > 0.8, float("-inf"))
        mask[..., 0] = 0.0
    return q, k, v, mask


def sdpa_text(lead, Sq, Sk, D, Dv, kind, mshape, causal, scale, params=False):
    decl = "param" if params else "input"
    t = f"{decl} q : f32[{dims((*lead, Sq, D))}]\n{decl} k : f32[{dims((*lead, Sk, D))}]\n" \
        f"{decl} v : f32[{dims((*lead, Sk, Dv))}]\n"
    args = "q, k, v"
    if kind:
        t += f"{decl if not params else 'input'} m : {'bool' if kind == 'bool' else 'f32'}[{dims(mshape)}]\n"
        args += ", m"
    at = (", causal=true" if causal else "") + (f", scale={scale!r}" if scale is not None else "")
    return t + f"y = scaled_dot_product_attention({args}{at})\n"


def test_sdpa_forward():
    d = tmpdir()
    for i, (lead, Sq, Sk, D, Dv, kind, mshape, causal, scale) in enumerate(SDPA_CASES):
        q, k, v, mask = make_sdpa(i, lead, Sq, Sk, D, Dv, kind, mshape)
        want = torch_sdpa(q, k, v, mask, causal, scale).numpy()
        mgt = write(d, f"s{i}.mgt", sdpa_text(lead, Sq, Sk, D, Dv, kind, mshape, causal, scale) + "output y\n")
        ins = [q.numpy(), k.numpy(), v.numpy()] + ([mask.numpy()] if mask is not None else [])
        for threads in (1, 2):
            (got,) = mge_forward(mgt, ins, threads)
            assert got.shape == want.shape
            e = rel_err(got, want)
            assert e < 1e-5, f"case {i}, {threads} thread(s): relative error {e:.3g}"


def test_sdpa_fully_masked_row_is_nan_as_pytorch():
    d = tmpdir()
    q, k, v, _ = make_sdpa(9, (), 3, 4, 4, 2, "", None)
    mask = torch.tensor([[True, False, True, True], [False] * 4, [True] * 4])
    want = torch_sdpa(q, k, v, mask).numpy()
    mgt = write(d, "m.mgt", sdpa_text((), 3, 4, 4, 2, "bool", (3, 4), False, None) + "output y\n")
    (got,) = mge_forward(mgt, [q.numpy(), k.numpy(), v.numpy(), mask.numpy()])
    assert np.isnan(want[1]).all() and np.isnan(got[1]).all()
    assert rel_err(got[[0, 2]], want[[0, 2]]) < 1e-5


def test_sdpa_gradient():
    """dq, dk, dv: one SGD step on q, k, v as parameters, loss mse(y, t)."""
    for i, (lead, Sq, Sk, D, Dv, kind, mshape, causal, scale) in enumerate(SDPA_CASES):
        if Sq * Sk * max(1, int(np.prod(lead))) > 200000:
            continue   # the largest case is covered forward; keep the run short
        d = tmpdir()
        q, k, v, mask = make_sdpa(100 + i, lead, Sq, Sk, D, Dv, kind, mshape)
        t = torch.randn(1, *lead, Sq, Dv, generator=torch.Generator().manual_seed(i))
        qp, kp, vp = (x.clone().requires_grad_() for x in (q, k, v))
        F.mse_loss(torch_sdpa(qp, kp, vp, mask, causal, scale), t[0]).backward()
        lr = float(t.numel())   # lr * gradient near 1: the update recovers the gradient to f32 precision
        # the target is the one batch sample; q, k, v (and the mask) are fixed tensors
        text = sdpa_text(lead, Sq, Sk, D, Dv, "", None, causal, scale, params=True)
        if mask is not None:   # a const: no gradient flows into the mask
            vals = ", ".join(str(int(x)) if kind == "bool" else repr(float(x)) for x in mask.flatten().tolist())
            const = f"const m : {'bool' if kind == 'bool' else 'f32'}[{dims(mshape)}] = [{vals}]\n"
            text = text.replace("y = scaled_dot_product_attention(q, k, v", const + "y = scaled_dot_product_attention(q, k, v, m")
        # the target is the dataset's one sample [N=1, ...]; y broadcast onto it
        text += f"input t : f32[N,{dims((*lead, Sq, Dv))}]\nconst zero : f32[] = [0]\ntz = mul(t, zero)\n" \
                "yt = add(tz, y)\nloss = mse(yt, t)\noutput y\nminimize loss\n"
        mgt = write(d, "g.mgt", text)
        got = mge_sgd_step(d, mgt, {"t": t.numpy()}, {"q": q.numpy(), "k": k.numpy(), "v": v.numpy()}, lr, 1)
        # relative to the largest of the three gradients: with one visible key
        # (causal, Sq = 1) dq is exactly 0 in PyTorch and rounding noise here
        big = max(float(t.grad.abs().max()) for t in (qp, kp, vp))
        for name, p0, tp in (("q", q, qp), ("k", k, kp), ("v", v, vp)):
            g = (p0.numpy().astype(np.float64) - got[name]) / lr
            e = float(np.max(np.abs(g - tp.grad.numpy().astype(np.float64)))) / big
            assert e < 1e-5, f"case {i}: d{name} error {e:.3g} of the largest gradient"


def test_embedding_forward_and_gradient():
    d = tmpdir()
    g = torch.Generator().manual_seed(3)
    for num, dim, shape in ((50, 7, (4, 9)), (300, 64, (2, 3, 5)), (3, 1, (11,))):
        emb = nn.Embedding(num, dim)
        with torch.no_grad():
            emb.weight.copy_(torch.randn(num, dim, generator=g))
        idx = torch.randint(0, num, shape, generator=g)
        idx.view(-1)[:3] = idx.view(-1)[0]   # repeated rows: their gradients add up
        src = f"input tokens : i64[N,{dims(shape[1:])}]\ne = embedding(tokens, num={num}, dim={dim})\n" if len(shape) > 1 \
            else f"input tokens : i64[N]\ne = embedding(tokens, num={num}, dim={dim})\n"
        np.savez(os.path.join(d, "ew.npz"), **{"e.weight": emb.weight.detach().numpy()})
        mgt = write(d, "e.mgt", f'weights "ew.npz"\n{src}output e\n')
        (got,) = mge_forward(mgt, [idx.numpy()])
        assert np.array_equal(got, emb(idx).detach().numpy())
        t = torch.randn(*shape, dim, generator=g)
        F.mse_loss(emb(idx), t).backward()
        tmgt = write(d, "t.mgt", f"{src}input t : f32[N,{dims((*shape[1:], dim))}]\nloss = mse(e, t)\noutput e\nminimize loss\n")
        lr = float(t.numel())
        after = mge_sgd_step(d, tmgt, {"tokens": idx.numpy(), "t": t.numpy()},
                             {"e.weight": emb.weight.detach().numpy()}, lr, shape[0])
        grad = (emb.weight.detach().numpy().astype(np.float64) - after["e.weight"]) / lr
        assert rel_err(grad, emb.weight.grad.numpy()) < 1e-5


CE_CASES = [
    # N, C, trailing, ignore_index (None: default), smoothing, label dtype
    (7, 5, (), None, 0.0, np.int64),
    (4, 10, (3,), 2, 0.0, np.int32),
    (3, 6, (2, 5), None, 0.25, np.int64),
    (5, 3, (7,), 0, 0.1, np.int64),
    (2, 1000, (), None, 0.05, np.int32),
]


def test_cross_entropy_forward_and_gradient():
    for i, (N, C, tr, ign, eps, ldt) in enumerate(CE_CASES):
        d = tmpdir()
        g = torch.Generator().manual_seed(20 + i)
        x = torch.randn(N, C, *tr, generator=g)
        lab = torch.randint(0, C, (N, *tr), generator=g)
        if ign is None:
            lab.view(-1)[::4] = -100   # the default ignore_index drops these
        kw = dict(ignore_index=ign if ign is not None else -100, label_smoothing=eps)
        want = F.cross_entropy(x, lab, **kw).item()
        at = (f", ignore_index={ign}" if ign is not None else "") + (f", label_smoothing={eps!r}" if eps else "")
        ldn = "i64" if ldt == np.int64 else "i32"
        mgt = write(d, "c.mgt", f"input x : f32[N,{dims((C, *tr))}]\ninput l : {ldn}[N{',' if tr else ''}{dims(tr)}]\n"
                                f"c = cross_entropy(x, l{at})\noutput c\n")
        (got,) = mge_forward(mgt, [x.numpy(), lab.numpy().astype(ldt)])
        assert abs(float(got) - want) <= 1e-5 * abs(want), f"case {i}: {float(got)} vs {want}"
        if ign is None:
            continue   # mge-train refuses labels outside [0, C) (the -100s) before it starts
        xp = x.clone().requires_grad_()
        F.cross_entropy(xp, lab, **kw).backward()
        # the logits as a parameter p [C, N, d...] broadcast onto a batch of one
        # sample: logits [1, C, N, d...] with labels [1, N, d...], the same loss
        pshape = (C, N, *tr)
        tm = write(d, "ct.mgt", f"param p : f32[{dims(pshape)}]\ninput z : f32[N,{dims(pshape)}]\n"
                                f"input l : {ldn}[N,{dims((N, *tr))}]\nconst zero : f32[] = [0]\n"
                                f"zz = mul(z, zero)\nlg = add(zz, p)\nc = cross_entropy(lg, l{at})\noutput c\nminimize c\n")
        p0 = x.numpy().swapaxes(0, 1).copy()
        lr = float(lab.numel())
        after = mge_sgd_step(d, tm, {"z": np.zeros((1, *pshape), np.float32), "l": lab.numpy().astype(ldt)[None]},
                             {"p": p0}, lr, 1)
        grad = ((p0.astype(np.float64) - after["p"]) / lr).swapaxes(0, 1)
        assert rel_err(grad, xp.grad.numpy()) < 1e-5, f"case {i}: gradient relative error {rel_err(grad, xp.grad.numpy()):.3g}"


def test_cross_entropy_all_ignored_is_nan_as_pytorch():
    d = tmpdir()
    x = torch.randn(3, 4, 2)
    lab = torch.full((3, 2), -100)
    assert np.isnan(F.cross_entropy(x, lab).item())
    mgt = write(d, "n.mgt", "input x : f32[N,4,2]\ninput l : i64[N,2]\nc = cross_entropy(x, l)\noutput c\n")
    (got,) = mge_forward(mgt, [x.numpy(), lab.numpy()])
    assert np.isnan(got)


# ---------------------------------------------------------------- TransformerEncoder

D_MODEL, HEADS, FF = 32, 4, 64


def encoder_text(layers, act, norm_first):
    hd = D_MODEL // HEADS
    t = [f"input x : f32[N,S,{D_MODEL}]"]
    cur = "x"
    for i in range(layers):
        p = f"layers.{i}"

        def attn(src):
            return [
                f"{p}.self_attn.in_proj = linear({src}, out={3 * D_MODEL})",
                f"{p}.q, {p}.k, {p}.v = split({p}.self_attn.in_proj, axis=2)",
                *[f"{p}.{n}4 = reshape({p}.{n}, shape=[0,0,{HEADS},{hd}])\n"
                  f"{p}.{n}h = transpose({p}.{n}4, perm=[0,2,1,3])" for n in "qkv"],
                f"{p}.a = scaled_dot_product_attention({p}.qh, {p}.kh, {p}.vh)",
                f"{p}.at = transpose({p}.a, perm=[0,2,1,3])",
                f"{p}.ar = reshape({p}.at, shape=[0,0,{D_MODEL}])",
                f"{p}.self_attn.out_proj = linear({p}.ar, out={D_MODEL})",
            ]

        def ff(src):
            return [
                f"{p}.linear1 = linear({src}, out={FF})",
                f"{p}.act = {act}({p}.linear1)",
                f"{p}.linear2 = linear({p}.act, out={D_MODEL})",
            ]

        if norm_first:
            t += [f"{p}.norm1 = layernorm({cur})", *attn(f"{p}.norm1"),
                  f"{p}.x1 = add({cur}, {p}.self_attn.out_proj)",
                  f"{p}.norm2 = layernorm({p}.x1)", *ff(f"{p}.norm2"),
                  f"{p}.out = add({p}.x1, {p}.linear2)"]
            cur = f"{p}.out"
        else:
            t += [*attn(cur), f"{p}.r1 = add({cur}, {p}.self_attn.out_proj)",
                  f"{p}.norm1 = layernorm({p}.r1)", *ff(f"{p}.norm1"),
                  f"{p}.r2 = add({p}.norm1, {p}.linear2)", f"{p}.norm2 = layernorm({p}.r2)"]
            cur = f"{p}.norm2"
    t += [f"output {cur}"]
    return "\n".join(t) + "\n", cur


def torch_to_mge(sd):
    out = {}
    for k, v in sd.items():
        k2 = k.replace("self_attn.in_proj_weight", "self_attn.in_proj.weight") \
              .replace("self_attn.in_proj_bias", "self_attn.in_proj.bias")
        out[k2] = v.detach().numpy().copy()
    return out


def make_encoder(act, norm_first, seed):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=FF, dropout=0.0, activation=act,
                                       batch_first=True, norm_first=norm_first)
    enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    with torch.no_grad():   # biases and norms away from their 0/1 init, so every mapping matters
        for name, p in enc.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(0.1 * torch.randn(p.shape))
    return enc


def test_transformer_encoder_forward_and_sgd_step():
    for ci, (act, norm_first) in enumerate([("relu", False), ("gelu", False), ("relu", True), ("gelu", True)]):
        d = tmpdir()
        enc = make_encoder(act, norm_first, 40 + ci)
        enc.train()   # dropout 0; the training path (no fused fast path)
        g = torch.Generator().manual_seed(ci)
        B, S = 3, 11
        x = torch.randn(B, S, D_MODEL, generator=g)
        t = torch.randn(B, S, D_MODEL, generator=g)
        text, out = encoder_text(2, act, norm_first)
        weights = torch_to_mge(enc.state_dict())
        np.savez(os.path.join(d, "enc.npz"), **weights)
        fwd = write(d, "enc_fwd.mgt", 'weights "enc.npz"\n' + text)
        want = enc(x).detach().numpy()
        # two sequence lengths in one stream
        x2 = torch.randn(1, 6, D_MODEL, generator=g)
        got = mge_forward(fwd, [x.numpy(), x2.numpy()])
        assert len(got) == 2 and got[0].shape == want.shape
        e = rel_err(got[0], want)
        assert e < 1e-5, f"{act} norm_first={norm_first}: forward relative error {e:.3g}"
        assert rel_err(got[1], enc(x2).detach().numpy()) < 1e-5
        # one SGD step on mse(enc(x), t)
        lr = 0.1
        opt = torch.optim.SGD(enc.parameters(), lr=lr)
        opt.zero_grad()
        F.mse_loss(enc(x), t).backward()
        opt.step()
        ref = torch_to_mge(enc.state_dict())
        mgt = write(d, "enc.mgt", text + f"input t : f32[N,S,{D_MODEL}]\nloss = mse({out}, t)\nminimize loss\n")
        after = mge_sgd_step(d, mgt, {"x": x.numpy(), "t": t.numpy()}, weights, lr, B)
        assert set(after) == set(ref), sorted(set(after) ^ set(ref))[:5]
        worst = max((rel_err(after[k], ref[k]), k) for k in ref)
        assert worst[0] < 1e-4, f"{act} norm_first={norm_first}: {worst[1]} relative error {worst[0]:.3g}"
        # and the update itself (the weights' change), where rounding shows first
        upd = max((rel_err(after[k].astype(np.float64) - weights[k], ref[k].astype(np.float64) - weights[k]), k)
                  for k in ref)
        assert upd[0] < 1e-3, f"{act} norm_first={norm_first}: update of {upd[1]} relative error {upd[0]:.3g}"
