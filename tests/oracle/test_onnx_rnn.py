"""ONNX LSTM and GRU import against onnxruntime: a 2-layer bidirectional
nn.LSTM and nn.GRU exported by torch.onnx.export (opset 13: one ONNX
LSTM/GRU node per layer, gates in ONNX order, Y reshaped between layers).

Per node: each exported LSTM/GRU node alone (its weights as exported, X
and the initial states as graph inputs, also forward-only, reverse-only
and layout 1 variants) run by mge-run and by onnxruntime.
Whole model: mge-run on the exported .onnx against onnxruntime and
PyTorch (y, h_n, c_n within 1e-5, with and without initial states, and
batch_first); skipped, saying which, while mge lacks a converter for one
of the export's other ops (Shape, Slice, Transpose, ...).
Skips visibly when onnxruntime or onnx is absent."""
import os
import re

import numpy as np

from common import Skip, need_torch, npy_stream, read_stream, rel_err, run, tmpdir, tool

need_torch()
try:
    import onnx  # noqa: F401
    import onnxruntime as ort
except ImportError as e:
    raise Skip(f"onnxruntime/onnx not installed ({e}); scripts/deps installs them")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.set_num_threads(2)

TOL = 1e-5


class Wrap(nn.Module):
    def __init__(self, m, state):
        super().__init__()
        self.m = m
        self.state = state

    def forward(self, x, *st):
        if isinstance(self.m, nn.LSTM):
            y, (h, c) = self.m(x, (st[0], st[1])) if self.state else self.m(x)
            return y, h, c
        y, h = self.m(x, st[0]) if self.state else self.m(x)
        return y, h


def case(kind, seed, S=6, N=3, I=5, H=7, layers=2, bf=False, state=False):
    torch.manual_seed(seed)
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    m = Wrap(cls(I, H, num_layers=layers, bidirectional=True, batch_first=bf), state).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(*((N, S, I) if bf else (S, N, I)), generator=gen)
    ins = [x]
    names = ["x"]
    if state:
        ins.append(torch.randn(2 * layers, N, H, generator=gen))
        names.append("h0")
        if kind == "lstm":
            ins.append(torch.randn(2 * layers, N, H, generator=gen))
            names.append("c0")
    outs = ["y", "hn", "cn"] if kind == "lstm" else ["y", "hn"]
    d = tmpdir()
    path = os.path.join(d, "m.onnx")
    with torch.no_grad():
        torch.onnx.export(m, tuple(ins), path, opset_version=13, input_names=names, output_names=outs)
    feeds = {k: v.numpy() for k, v in zip(names, ins)}
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    refs = sess.run(None, feeds)
    rc, out, err = run([tool("mge-run"), path], stdin=npy_stream(*[v.numpy() for v in ins]), check=False)
    missing = sorted(set(re.findall(r"\((\w+)\), opset \d+: no such op in mge", err)))
    if rc != 0 and missing and not set(missing) & {"LSTM", "GRU"}:
        raise Skip(f"the whole exported model needs ONNX converters for {', '.join(missing)}")
    assert rc == 0, f"mge-run {path} exited {rc}: {err}"
    got = read_stream(out)
    assert len(got) == len(refs), f"{kind}: {len(got)} outputs for {len(refs)}"
    with torch.no_grad():
        tref = m(*ins)
    for i, (g, r, t) in enumerate(zip(got, refs, tref)):
        assert g.shape == r.shape, f"{kind} output {i}: shape {g.shape} != {r.shape}"
        e = rel_err(g, r)
        assert e < TOL, f"{kind} seed {seed} output {i} (bf={bf}, state={state}): rel error {e:.3g} vs onnxruntime"
        e = rel_err(g, t.numpy())
        assert e < TOL, f"{kind} seed {seed} output {i} (bf={bf}, state={state}): rel error {e:.3g} vs PyTorch"


def node_case(kind, seed, S=5, N=2, I=4, H=6, direction=None, layout=0, state=True, bias=True, seq_lens=None):
    """Each LSTM/GRU node of an exported 2-layer bidirectional model, alone
    (direction/layout changed when given: the weights keep their first
    direction for forward/reverse)."""
    from onnx import TensorProto, helper, numpy_helper
    torch.manual_seed(seed)
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    m = Wrap(cls(I, H, num_layers=2, bidirectional=True, bias=bias), True).eval()
    x = torch.randn(S, N, I)
    st = [torch.randn(4, N, H)] * (2 if kind == "lstm" else 1)
    d = tmpdir()
    full = os.path.join(d, "full.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (x, *st), full, opset_version=13)
    g = onnx.load(full).graph
    inits = {t.name: t for t in g.initializer}
    consts = {n.output[0]: n.attribute[0].t for n in g.node if n.op_type == "Constant"}
    rng = np.random.default_rng(seed)
    nodes = [n for n in g.node if n.op_type == kind.upper()]
    assert len(nodes) == 2
    for li, node in enumerate(nodes):
        D = 1 if direction else 2
        inp = I if li == 0 else 2 * H
        node = onnx.NodeProto.FromString(node.SerializeToString())
        tensors = []
        for k in (1, 2, 3):
            if k >= len(node.input) or not node.input[k]:
                continue
            name = node.input[k]
            arr = numpy_helper.to_array(inits[name] if name in inits else consts[name])
            tensors.append(numpy_helper.from_array(arr[:D].copy(), name))
        if direction:
            for a in node.attribute:
                if a.name == "direction":
                    a.s = direction.encode()
        # onnxruntime runs layout 0 only: layout 1 is checked against it transposed
        feeds = {"X": rng.standard_normal((S, N, inp)).astype(np.float32)}
        ins = ["X"] + [node.input[k] if k < len(node.input) else "" for k in (1, 2, 3)] + [""]
        if seq_lens is not None:
            # an initializer: mge takes it when every sequence is full length
            tensors.append(numpy_helper.from_array(np.array(seq_lens, dtype=np.int32), "L"))
            ins[4] = "L"
        if state:
            ins += ["H0"] + (["C0"] if kind == "lstm" else [])
            for nm in ins[5:]:
                feeds[nm] = rng.standard_normal((D, N, H)).astype(np.float32)
        while not ins[-1]:
            ins.pop()
        del node.input[:]
        node.input.extend(ins)
        outs = ["Y", "Y_h"] + (["Y_c"] if kind == "lstm" else [])
        del node.output[:]
        node.output.extend(outs)
        gout = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]

        def save(lay, name):
            nd = onnx.NodeProto.FromString(node.SerializeToString())
            if lay:
                nd.attribute.append(helper.make_attribute("layout", 1))
            gin = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.swapaxes(0, 1).shape if lay else v.shape)
                   for k, v in feeds.items()]
            model = helper.make_model(helper.make_graph([nd], "rnn", gin, gout, tensors),
                                      opset_imports=[helper.make_opsetid("", 14 if lay else 13)])
            path = os.path.join(d, name)
            onnx.save(model, path)
            return path

        refs = ort.InferenceSession(save(0, f"r{li}.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)
        if layout:
            refs = [r.transpose(2, 0, 1, 3) if i == 0 else r.swapaxes(0, 1) for i, r in enumerate(refs)]
        mine = [v.swapaxes(0, 1).copy() if layout else v for v in feeds.values()]
        if seq_lens is not None and any(v != S for v in seq_lens):
            rc, _, err = run([tool("mge-run"), save(layout, f"n{li}.onnx")], stdin=npy_stream(*mine), check=False)
            assert rc == 1 and "sequence_lens" in err, f"{kind}: partial sequence_lens: exit {rc}: {err}"
            continue
        _, out, _ = run([tool("mge-run"), save(layout, f"n{li}.onnx")], stdin=npy_stream(*mine))
        got = read_stream(out)
        assert len(got) == len(refs), f"{kind} node {li}: {len(got)} outputs for {len(refs)}"
        for i, (gv, r) in enumerate(zip(got, refs)):
            assert gv.shape == r.shape, f"{kind} node {li} output {i}: shape {gv.shape} != {r.shape}"
            e = rel_err(gv, r)
            assert e < TOL, (f"{kind} node {li} output {i} (direction={direction}, layout={layout}, "
                             f"state={state}): rel error {e:.3g}")


def test_onnx_lstm_nodes():
    node_case("lstm", 1)
    node_case("lstm", 2, state=False)
    node_case("lstm", 3, direction="forward")
    node_case("lstm", 4, direction="reverse")
    node_case("lstm", 5, layout=1)
    node_case("lstm", 6, direction="reverse", layout=1, bias=False)
    node_case("lstm", 7, seq_lens=[5, 5])
    node_case("lstm", 8, seq_lens=[5, 3])


def test_onnx_gru_nodes():
    node_case("gru", 1)
    node_case("gru", 2, state=False)
    node_case("gru", 3, direction="forward")
    node_case("gru", 4, direction="reverse")
    node_case("gru", 5, layout=1)
    node_case("gru", 6, direction="reverse", layout=1, bias=False)
    node_case("gru", 7, seq_lens=[5, 5], state=False)
    node_case("gru", 8, seq_lens=[2, 5])


def test_onnx_lstm_2layer_bidirectional():
    case("lstm", 1)
    case("lstm", 2, state=True)
    case("lstm", 3, bf=True, state=True)


def test_onnx_gru_2layer_bidirectional():
    case("gru", 1)
    case("gru", 2, state=True)
    case("gru", 3, bf=True, state=True)
