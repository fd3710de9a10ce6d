"""NPY streams and NPZ archives against numpy, parameters against PyTorch.

Two roles:
  * oracle tests (tests/oracle/oracle.py): numpy writes records and archives
    (np.save, np.savez, np.savez_compressed, format 2.0/3.0, big-endian,
    Fortran order), the unit-test binary test_npy copies them through
    libmge (--copy, --npz-copy, --bind), numpy loads the result;
  * a helper for tests/unit/test_npy.c: `test_npy.py gen DIR` writes files
    for the C test to read, `test_npy.py check DIR` loads the files it wrote.
"""
import io
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


# ------------------------------------------------------------------ records numpy writes

def _records():
    """(array, version or None) pairs: arange in C order (bool: i % 3 == 0)."""
    out = []

    def ar(shape, dtype):
        n = int(np.prod(shape, dtype=np.int64))
        if np.dtype(dtype).kind == "b":
            return (np.arange(n) % 3 == 0).reshape(shape)
        return np.arange(n).astype(dtype).reshape(shape)

    for dt in ["<f4", "<f2", "|i1", "|u1", "<i4", "<i8", "|b1", "<f8", "<i2", "<u2", "<u4", "<u8"]:
        for shape in [(), (5,), (2, 3), (2, 3, 4)]:
            out.append((ar(shape, dt), None))
    out.append((ar((1, 2, 1, 2, 1, 2, 1, 2), "<f4"), None))  # rank 8
    out.append((ar((0, 3), "<f4"), None))                      # empty
    out.append((ar((2, 3), ">f4"), None))                      # big-endian
    out.append((ar((4,), ">i8"), None))
    out.append((ar((3,), ">f2"), None))
    out.append((ar((2, 2), ">i4"), None))
    out.append((ar((3,), ">f8"), None))
    out.append((ar((2, 2), ">u8"), None))
    out.append((ar((5,), ">i2"), None))
    out.append((np.asfortranarray(ar((2, 3), "<f4")), None))   # Fortran order
    out.append((np.asfortranarray(ar((2, 3, 4), "<i4")), None))
    out.append((np.asfortranarray(ar((3, 1, 2, 5), ">f4")), None))
    out.append((ar((2, 5), "<f4"), (2, 0)))                    # format 2.0 and 3.0
    out.append((ar((7,), "<i8"), (3, 0)))
    return out


def _write(f, a, version):
    if version is None:
        np.save(f, a)
    else:
        np.lib.format.write_array(f, a, version=version)


def gen(d):
    """Files the C unit test reads."""
    with open(os.path.join(d, "stream.npy"), "wb") as f, open(os.path.join(d, "manifest.txt"), "w") as m:
        for a, v in _records():
            _write(f, a, v)
            m.write(f"{a.dtype.str} {a.ndim} {' '.join(str(x) for x in a.shape)}\n")
    np.save(os.path.join(d, "c16.npy"), np.zeros(3, np.complex128))
    arrays = {"a.b.weight": np.ones((4, 3), np.float32), "count": np.array(7, np.int64),
              "flags": np.array([True, False])}
    np.savez(os.path.join(d, "plain.npz"), **arrays)
    np.savez_compressed(os.path.join(d, "compressed.npz"), **arrays)


# ------------------------------------------------------------------ what the C test wrote

# The C test's fill pattern per mge dtype (tests/unit/test_npy.c put_val), and
# the NPY dtype each comes back as: bf16 -> float32, qs8 -> int8, qs32 -> int32.
_MGE = ["f32", "f16", "bf16", "i8", "u8", "i32", "i64", "bool", "qs8", "qs32", "f64", "i16", "u16", "u32", "u64"]
_DESCR = {"f32": "<f4", "f16": "<f2", "bf16": "<f4", "i8": "|i1", "u8": "|u1", "i32": "<i4",
          "i64": "<i8", "bool": "|b1", "qs8": "|i1", "qs32": "<i4", "f64": "<f8", "i16": "<i2",
          "u16": "<u2", "u32": "<u4", "u64": "<u8"}


def _pattern(dt, n):
    i = np.arange(n, dtype=np.int64)
    if dt == "f32":
        return (i * 0.5 - 3).astype(np.float32)
    if dt == "f16":
        return ((i % 200) * 0.25 - 2).astype(np.float16)
    if dt == "bf16":
        return (i - 5).astype(np.float32)
    if dt in ("i8", "qs8"):
        return (i * 7 - 100).astype(np.int8)
    if dt == "u8":
        return (i * 3 + 1).astype(np.uint8)
    if dt in ("i32", "qs32"):
        return (i * 1000 - 7).astype(np.int32)
    if dt == "i64":
        return i * 10000000000 - 5
    if dt == "f64":
        return i * 0.1 - 1e300 * (i % 2)
    if dt == "i16":
        return (i * 3001 - 30000).astype(np.int16)
    if dt == "u16":
        return (i * 4001 + 60000).astype(np.uint16)
    if dt == "u32":
        return (i * 70001 + 4000000000).astype(np.uint32)
    if dt == "u64":
        return i.astype(np.uint64) * np.uint64(10000000000) + np.uint64(18000000000000000000)
    return i % 3 == 0


def _rank_dims(r):
    return tuple(1 + (i + r) % 3 for i in range(r))


def check(d):
    """Loads what the C test wrote; exits non-zero on any difference."""
    bad = []
    path = os.path.join(d, "ours.npy")
    data = open(path, "rb").read()
    f = io.BytesIO(data)
    for dt in _MGE:
        for r in range(4):
            start = f.tell()
            major, minor = np.lib.format.read_magic(f)
            f.seek(start)
            a = np.load(f)
            shape = _rank_dims(r)
            want = _pattern(dt, int(np.prod(shape, dtype=np.int64))).reshape(shape)
            if (major, minor) != (1, 0) or (f.tell() - start - a.nbytes) % 64:
                bad.append(f"{dt} rank {r}: version {major}.{minor}, header not 64-aligned")
            if a.dtype.str != _DESCR[dt] or a.shape != shape or not np.array_equal(a, want):
                bad.append(f"{dt} rank {r}: got {a.dtype.str}{a.shape}")
    if f.tell() != len(data):
        bad.append(f"{len(data) - f.tell()} bytes after the last record")
    z = np.load(os.path.join(d, "ours.npz"))
    names = ["layer1.0.conv1.weight", "bn1.num_batches_tracked", "half", "mask"]
    if list(z.files) != names:
        bad.append(f"npz names {z.files}")
    else:
        exp = {"layer1.0.conv1.weight": ("f32", (3, 4)), "bn1.num_batches_tracked": ("i64", ()),
               "half": ("bf16", (5,)), "mask": ("bool", (3, 4))}
        for k, (dt, shape) in exp.items():
            want = _pattern(dt, int(np.prod(shape, dtype=np.int64))).reshape(shape)
            if z[k].dtype.str != _DESCR[dt] or not np.array_equal(z[k], want):
                bad.append(f"npz {k}: {z[k].dtype.str}{z[k].shape}")
    for b in bad:
        print("test_npy.py check:", b, file=sys.stderr)
    return 1 if bad else 0


# ------------------------------------------------------------------ oracle tests

def _driver():
    from common import BIN, Skip
    cands = [os.environ.get("MGE_TEST_NPY", ""),
             os.path.join(os.path.dirname(BIN), "tests", "test_npy"),
             os.path.join(ROOT, "build", "rel", "tests", "test_npy"),
             os.path.join(ROOT, "build", "asan", "tests", "test_npy")]
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    raise Skip("the unit test binary test_npy (the NPY driver) is not built: run `make unit`")


def _drive(args, stdin=None):
    from common import run
    return run([_driver()] + args, stdin=stdin, check=False)


def _same(a, b):
    """b is a's record after libmge: native byte order, C order, same values."""
    return (b.dtype == a.dtype.newbyteorder("=") and b.shape == a.shape and b.flags.c_contiguous
            and np.array_equal(a, b))


def test_stream_copy():
    from common import tmpdir
    d = tmpdir()
    src, dst = os.path.join(d, "in.npy"), os.path.join(d, "out.npy")
    recs = _records()
    with open(src, "wb") as f:
        for a, v in recs:
            _write(f, a, v)
    rc, _, err = _drive(["--copy", src, dst])
    assert rc == 0, err
    from common import read_stream
    back = read_stream(open(dst, "rb").read())
    assert len(back) == len(recs)
    for (a, _), b in zip(recs, back):
        assert _same(a, b), f"{a.dtype.str}{a.shape} came back {b.dtype.str}{b.shape}"


def test_stream_pipe():
    """stdin to stdout, records back to back, as mge-run uses them."""
    buf = io.BytesIO()
    arrays = [np.random.RandomState(0).randn(3, 4).astype(np.float32), np.arange(5, dtype=np.int64),
              np.array(2.5, np.float32)]
    for a in arrays:
        np.save(buf, a)
    rc, out, err = _drive(["--copy", "-", "-"], stdin=buf.getvalue())
    assert rc == 0, err
    assert out == buf.getvalue(), "a numpy stream copied through libmge changed"
    rc, out, err = _drive(["--copy", "-", "-"], stdin=buf.getvalue()[:-3])
    assert rc == 1 and "stream ends inside a record" in err, err


def test_refused_dtypes():
    for a, word in [(np.zeros(3, np.longdouble), "longdouble"), (np.zeros(3, np.complex128), "complex128"),
                    (np.zeros(2, np.complex64), "complex64")]:
        buf = io.BytesIO()
        np.save(buf, a)
        rc, _, err = _drive(["--copy", "-", "-"], stdin=buf.getvalue())
        assert rc == 1 and word in err and "not supported" in err, err


def test_wide_dtypes_copy():
    """float64 and the 16-, 32- and 64-bit integers go through libmge
    unchanged, either byte order in (native order out)."""
    arrays = []
    for d in ["<f8", ">f8", "<i2", ">i2", "<u2", "<u4", ">u4", "<u8", ">u8"]:
        dt = np.dtype(d)
        info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)
        arrays.append(np.array([[info.min, info.max], [0, 1]], dtype=dt))
    buf = io.BytesIO()
    for a in arrays:
        np.save(buf, a)
    rc, out, err = _drive(["--copy", "-", "-"], stdin=buf.getvalue())
    assert rc == 0, err
    f = io.BytesIO(out)
    for a in arrays:
        b = np.load(f)
        assert b.dtype == a.dtype.newbyteorder("=") and np.array_equal(a, b), (a, b)


def test_npz_copy():
    from common import tmpdir
    d = tmpdir()
    arrays = {"conv1.weight": np.random.RandomState(1).randn(8, 3, 3, 3).astype(np.float32),
              "bn1.num_batches_tracked": np.array(12, np.int64),
              "be": np.arange(6, dtype=">f4").reshape(2, 3),
              "fortran": np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
              "mask": np.array([True, False, True])}
    for kind, save in [("plain", np.savez), ("compressed", np.savez_compressed)]:
        src, dst = os.path.join(d, kind + ".npz"), os.path.join(d, kind + "-out.npz")
        save(src, **arrays)
        rc, _, err = _drive(["--npz-copy", src, dst])
        assert rc == 0, err
        z = np.load(dst)
        assert list(z.files) == list(arrays), z.files
        for k, a in arrays.items():
            assert _same(a, z[k]), k
        # deterministic: the same input gives the same bytes
        rc, _, err = _drive(["--npz-copy", src, dst + "2"])
        assert rc == 0 and open(dst, "rb").read() == open(dst + "2", "rb").read()


def test_npz_from_pipe():
    """An .npz numpy streams to a pipe (data descriptors, no seeking) read from stdin."""
    from common import tmpdir
    d = tmpdir()
    dst = os.path.join(d, "out.npz")
    code = ("import sys, numpy as np; "
            "np.savez(sys.stdout.buffer, w=np.arange(10, dtype=np.float32), n=np.array(3, np.int64))")
    prod = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    p = subprocess.run([_driver(), "--npz-copy", "-", dst], stdin=prod.stdout, stderr=subprocess.PIPE)
    prod.stdout.close()
    assert prod.wait() == 0
    assert p.returncode == 0, p.stderr.decode()
    z = np.load(dst)
    assert list(z.files) == ["w", "n"] and np.array_equal(z["w"], np.arange(10, dtype=np.float32))
    assert z["n"].dtype == np.int64 and z["n"].shape == () and int(z["n"]) == 3


def test_resnet18_state_dict():
    """A torchvision resnet18 state_dict saved with numpy binds exactly by name."""
    from common import need_torch, tmpdir
    need_torch()
    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    sd = model.state_dict()
    params = {k for k, _ in model.named_parameters()}
    d = tmpdir()
    spec, npz, out = os.path.join(d, "spec"), os.path.join(d, "sd.npz"), os.path.join(d, "out.npz")
    names = {torch.float32: "f32", torch.int64: "i64"}
    with open(spec, "w") as f:
        for k, v in sd.items():
            f.write(f"{'param' if k in params else 'state'} {k} {names[v.dtype]} {' '.join(map(str, v.shape))}\n")
    np.savez(npz, **{k: v.numpy() for k, v in sd.items()})
    rc, _, err = _drive(["--bind", spec, npz, out])
    assert rc == 0, err
    z = np.load(out)
    assert list(z.files) == list(sd.keys())
    for k, v in sd.items():
        assert z[k].dtype == v.numpy().dtype and np.array_equal(z[k], v.numpy()), k
    assert z["bn1.num_batches_tracked"].shape == ()
    # one tensor short: the error names it
    np.savez(npz, **{k: v.numpy() for k, v in sd.items() if k != "layer4.1.bn2.running_var"})
    rc, _, err = _drive(["--bind", spec, npz, out])
    assert rc == 1 and "layer4.1.bn2.running_var" in err and "without a value" in err, err
    # a wrong shape names the tensor, expected and got
    bad = {k: v.numpy() for k, v in sd.items()}
    bad["fc.weight"] = np.zeros((10, 512), np.float32)
    np.savez(npz, **bad)
    rc, _, err = _drive(["--bind", spec, npz, out])
    assert rc == 1 and "'fc.weight': expected f32[1000,512], got f32[10,512]" in err, err


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    print("usage: test_npy.py gen|check DIR", file=sys.stderr)
    sys.exit(2)
