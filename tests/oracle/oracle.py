"""A small runner for the oracle tests (no pytest needed).

Each tests/oracle/test_*.py defines functions test_*(); a test skips by
raising Skip("why") and the reason is printed. The last line is
"oracle: N passed, N failed, N skipped". Usage: oracle.py [-k SUBSTRING]
"""
import glob
import importlib.util
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Skip  # noqa: E402


def main(argv):
    pattern = argv[argv.index("-k") + 1] if "-k" in argv else ""
    here = os.path.dirname(os.path.abspath(__file__))
    passed = failed = skipped = 0
    for path in sorted(glob.glob(os.path.join(here, "test_*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Skip as e:
            print(f"SKIP {name}: {e}")
            skipped += 1
            continue
        except Exception:
            print(f"FAIL {name} (import)")
            traceback.print_exc()
            failed += 1
            continue
        for fn_name in sorted(n for n in dir(mod) if n.startswith("test_")):
            full = f"{name}.{fn_name}"
            if pattern not in full:
                continue
            t0 = time.time()
            try:
                getattr(mod, fn_name)()
            except Skip as e:
                print(f"SKIP {full}: {e}")
                skipped += 1
            except Exception:
                print(f"FAIL {full}")
                traceback.print_exc()
                failed += 1
            else:
                print(f"ok   {full} ({time.time() - t0:.1f}s)")
                passed += 1
            sys.stdout.flush()
    print(f"oracle: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
