"""Shared helpers for oracle tests: tool paths, temp dirs, NPY streams."""
import atexit
import io
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("MGE_BIN", os.path.join(ROOT, "bin"))


class Skip(Exception):
    """Raised by a test (or at import) to skip with a visible reason."""


def need_torch():
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        raise Skip(f"PyTorch/torchvision not installed ({e}); scripts/deps installs them")


def tool(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{path} not built")
    return path


def run(args, stdin=None, check=True):
    """Runs a tool; returns (returncode, stdout bytes, stderr text)."""
    p = subprocess.run(args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


_TMPDIRS = []


def tmpdir():
    """A scratch directory removed when the run ends."""
    d = tempfile.mkdtemp(prefix="mge-oracle-")
    _TMPDIRS.append(d)
    return d


@atexit.register
def _cleanup():
    for d in _TMPDIRS:
        shutil.rmtree(d, ignore_errors=True)


def npy_stream(*arrays):
    import numpy as np
    b = io.BytesIO()
    for a in arrays:
        np.save(b, a)
    return b.getvalue()


def read_stream(data):
    import numpy as np
    f = io.BytesIO(data)
    out = []
    while f.tell() < len(data):
        out.append(np.load(f))
    return out


def rel_err(a, b):
    """Largest error relative to the reference's largest magnitude."""
    import numpy as np
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
