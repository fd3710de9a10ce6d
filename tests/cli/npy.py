"""npy.py - tiny NPY record tool for the CLI tests, without numpy (it starts
in a few milliseconds; tests that need numpy's own reader or maths use it).

  npy.py save OUT SPEC...   one record per SPEC "DTYPE:DIMS:FILL" (DIMS like
                            2x4, "" for a scalar; FILL a number, "arange", or
                            "rand" for reproducible values in [0, 1))
  npy.py count FILE         number of complete records
  npy.py show FILE          per record: dtype, shape, first value
"""
import struct
import sys

CODES = {"f32": ("<f4", "f"), "i32": ("<i4", "i"), "i64": ("<i8", "q"),
         "u8": ("|u1", "B"), "i8": ("|i1", "b"), "f64": ("<f8", "d")}
NAMES = {v[0]: k for k, v in CODES.items()}


def record(dtype, dims, fill):
    descr, fmt = CODES[dtype]
    n = 1
    for d in dims:
        n *= d
    if fill == "arange":
        vals = list(range(n))
    elif fill == "rand":
        x, vals = 12345, []
        for _ in range(n):
            x = (1103515245 * x + 12345) % 2**31
            vals.append(x / 2**31)
    else:
        vals = [float(fill)] * n
    if fmt not in "fd":
        vals = [int(v) for v in vals]
    shape = "(" + "".join("%d, " % d for d in dims)[:-2] + ("," if len(dims) == 1 else "") + ")"
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() +
            struct.pack("<%d%s" % (n, fmt), *vals))


def records(path):
    data = open(path, "rb").read()
    off = 0
    while off < len(data):
        if data[off:off + 6] != b"\x93NUMPY":
            raise ValueError("bad magic at byte %d" % off)
        major = data[off + 6]
        if major == 1:
            hl, hs = struct.unpack_from("<H", data, off + 8)[0], 10
        else:
            hl, hs = struct.unpack_from("<I", data, off + 8)[0], 12
        hdr = eval(data[off + hs:off + hs + hl].decode("latin1"))
        descr, shape = hdr["descr"], hdr["shape"]
        n = 1
        for d in shape:
            n *= d
        size = int(descr[2:]) * n
        start = off + hs + hl
        if start + size > len(data):
            raise ValueError("truncated record at byte %d" % off)
        fmt = {"f4": "f", "f8": "d", "i4": "i", "i8": "q", "u1": "B", "i1": "b", "b1": "?"}[descr[1:]]
        first = struct.unpack_from("<" + fmt, data, start)[0] if n else None
        yield NAMES.get(descr, descr), tuple(shape), first
        off = start + size


def main(argv):
    if argv[1] == "save":
        with open(argv[2], "wb") as f:
            for spec in argv[3:]:
                dtype, dims, fill = spec.split(":")
                f.write(record(dtype, [int(d) for d in dims.split("x") if d], fill))
    elif argv[1] == "count":
        print(sum(1 for _ in records(argv[2])))
    elif argv[1] == "show":
        for dtype, shape, first in records(argv[2]):
            print(dtype, "x".join(map(str, shape)), first)
    else:
        sys.exit("usage: npy.py save|count|show ...")


main(sys.argv)
