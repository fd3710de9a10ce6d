"""An independent .mge reader, written from man/man5/mge-format.5 alone,
checks the files mge-opt writes: signature, header CRC, section CRCs,
64-byte tensor alignment, zero padding, every tensor's CRC, and that the
tensor bytes equal the parameters mge-dump --params exports."""
import os
import struct
import zlib

import numpy as np

from common import ROOT, run, tmpdir, tool

SIZES = {0: 4, 1: 2, 2: 2, 3: 1, 4: 1, 5: 4, 6: 8, 7: 1, 8: 1, 9: 4}
NP = {0: "<f4", 1: "<f2", 3: "i1", 4: "u1", 5: "<i4", 6: "<i8", 7: "?"}


class Reader:
    def __init__(self, b, p):
        self.b, self.p = b, p

    def u(self, f):
        v = struct.unpack_from("<" + f, self.b, self.p)
        self.p += struct.calcsize(f)
        return v[0]

    def s(self):
        n = self.u("I")
        v = self.b[self.p:self.p + n].decode()
        self.p += n
        return v


def parse(d):
    assert d[:8] == b"\x89MGE\r\n\x1a\n", "signature"
    ver, flags, doff, fsize, hcrc = struct.unpack_from("<IIQQI", d, 8)
    assert ver == 1 and flags == 0 and fsize == len(d), "header fields"
    assert zlib.crc32(d[:32]) == hcrc, "header CRC"
    assert doff % 64 == 0, "data offset alignment"
    pos, secs = 36, {}
    for tag in (b"META", b"GRPH", b"TDIR"):
        assert d[pos:pos + 4] == tag, f"section {tag}"
        n = struct.unpack_from("<Q", d, pos + 4)[0]
        assert zlib.crc32(d[pos:pos + 12 + n]) == struct.unpack_from("<I", d, pos + 12 + n)[0], f"{tag} CRC"
        secs[tag] = (pos + 12, pos + 12 + n)
        pos += 16 + n
    assert (pos + 63) // 64 * 64 == doff and d[pos:doff] == bytes(doff - pos), "padding before data"
    r = Reader(d, secs[b"META"][0])
    meta = {}
    for _ in range(r.u("I")):
        k = r.s()
        meta[k] = r.s() if r.u("B") == 0 else str(r.u("q"))
    assert r.p == secs[b"META"][1]
    r = Reader(d, secs[b"GRPH"][0])
    vals = []
    for _ in range(r.u("I")):
        name = r.s()
        kind, dt, nd = r.u("B"), r.u("B"), r.u("B")
        dims = [r.u("q") for _ in range(nd)]
        init, fl = r.s(), r.u("B")
        vals.append((name, kind, dt, dims, init, fl))
    nodes = []
    for _ in range(r.u("I")):
        name, op = r.s(), r.s()
        ins = [r.u("I") for _ in range(r.u("I"))]
        outs = [r.u("I") for _ in range(r.u("I"))]
        attrs = {}
        for _ in range(r.u("I")):
            k, t = r.s(), r.u("B")
            if t == 0:
                attrs[k] = r.u("q")
            elif t == 1:
                attrs[k] = [r.u("q") for _ in range(r.u("B"))]
            elif t == 2:
                attrs[k] = r.u("d")
            elif t == 5:   # op names
                attrs[k] = [r.s() for _ in range(r.u("B"))]
            elif t == 6:   # an enum's word
                attrs[k] = r.s()
            elif t == 7:
                attrs[k] = [r.u("d") for _ in range(r.u("B"))]
            else:          # bool, dtype
                attrs[k] = r.u("B")
        nodes.append((name, op, ins, outs, attrs))
    inputs = [r.u("I") for _ in range(r.u("I"))]
    outputs = [r.u("I") for _ in range(r.u("I"))]
    r.u("I")  # loss
    assert r.p == secs[b"GRPH"][1]
    r = Reader(d, secs[b"TDIR"][0])
    end, tensors = doff, {}
    for _ in range(r.u("I")):
        v, dt, _lay, nd, comp = r.u("I"), r.u("B"), r.u("B"), r.u("B"), r.u("B")
        dims = [r.u("q") for _ in range(nd)]
        r.u("i"), r.u("i")
        for _ in range(r.u("I")):
            r.u("f")
        off, stored, raw, crc = r.u("Q"), r.u("Q"), r.u("Q"), r.u("I")
        assert raw == int(np.prod(dims, dtype=np.int64)) * SIZES[dt] and dims == vals[v][3] and dt == vals[v][2]
        assert off == (end + 63) // 64 * 64 and d[end:off] == bytes(off - end), "tensor alignment/padding"
        blob = d[off:off + stored]
        assert zlib.crc32(blob) == crc, f"CRC of {vals[v][0]}"
        data = zlib.decompress(blob) if comp == 1 else blob
        assert len(data) == raw
        tensors[vals[v][0]] = np.frombuffer(data, NP[dt]).reshape(dims)
        end = off + stored
    assert r.p == secs[b"TDIR"][1] and end == len(d), "trailing bytes"
    return meta, vals, nodes, inputs, outputs, tensors


def test_sample_nets_read_independently():
    d = tmpdir()
    for net in ("mlp", "lenet", "resnet18", "mobilenet_v2"):
        m = os.path.join(d, net + ".mge")
        p = os.path.join(d, net + ".npz")
        run([tool("mge-opt"), os.path.join(ROOT, "samples", "nets", net + ".mgt"), "--seed", "3", "-o", m])
        run([tool("mge-dump"), m, "--params", p])
        _, vals, nodes, inputs, _, tensors = parse(open(m, "rb").read())
        assert vals[inputs[0]][0] == "x"
        exported = np.load(p)
        assert set(exported.keys()) == set(tensors.keys()), net
        for k in exported.keys():
            assert np.array_equal(exported[k], tensors[k]), f"{net}: {k} differs"
        assert len(nodes) > 0
