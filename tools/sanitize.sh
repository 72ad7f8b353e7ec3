#!/usr/bin/env bash
# The C parts (readers/cparse.c, ckernel.c) built with AddressSanitizer and UndefinedBehaviorSanitizer into a
# temporary copy of the tree, and the tests that run them (the native, reader and fuzz tests: the C reader at
# every vector width, 0 included, against the Python readers) run there; any sanitizer report fails the run.
#
#   tools/sanitize.sh                      the native, reader and fuzz tests (Hypothesis profile quick)
#   tools/sanitize.sh tests/test_x.py -k y other pytest arguments instead
#
# Needs gcc (or clang) with its sanitizer runtimes (libasan, libubsan). Python itself is not built with ASan, so
# libasan is preloaded into it (LD_PRELOAD); Python's objects come from malloc (PYTHONMALLOC=malloc) and Arrow's
# buffers from the system allocator, so that ASan sees the bounds of the buffers the C code reads and writes.
# Leaks are not looked for (the interpreter keeps memory until exit). A report ends the process that makes it
# (-fno-sanitize-recover): ASan's also go to files, found afterwards even when the process was a test's own
# subprocess; UBSan's go to stderr, which pytest leaves alone here (--capture=sys: C writes to fd 2 directly).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# the tree as it is (tracked and untracked files, not what .gitignore leaves out: no built module is copied)
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$work/"
cd "$work"
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CFLAGS="$sanitize -O1 -g" LDFLAGS="$sanitize" NDCG_MLFLOW_STRICT_C=1 python setup.py -q build_ext --inplace

cat > sanitize_pools.py <<'PY'
"""Arrow's buffers from malloc (the system pool), where ASan sees their bounds, not from jemalloc's arenas."""
import pyarrow as pa


def _refused():
    raise NotImplementedError("jemalloc is not used under the sanitizers")


pa.jemalloc_memory_pool = _refused
PY

libasan="$(${CC:-gcc} -print-file-name=libasan.so)"
[ -f "$libasan" ] || { echo "sanitize: no libasan.so from ${CC:-gcc}" >&2; exit 2; }
args=("$@")
[ $# -gt 0 ] || args=(tests/readers/test_native.py tests/readers/test_readers.py tests/readers/test_fuzz.py)
mkdir reports
export LD_PRELOAD="$libasan" PYTHONMALLOC=malloc ARROW_DEFAULT_MEMORY_POOL=system PYTHONPATH="$work" \
  ASAN_OPTIONS="detect_leaks=0:handle_sigbus=0:log_path=$work/reports/asan" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-quick}"
python - "$work" <<'PY'  # (the modules the tests import are the ones just built)
import sys

sys.path.insert(0, sys.argv[1])
import ndcg_mlflow.ckernel
import ndcg_mlflow.readers.cparse

for module in (ndcg_mlflow.readers.cparse, ndcg_mlflow.ckernel):
    assert module.__file__.startswith(sys.argv[1]), module.__file__
PY
status=0
python -m pytest -q --capture=sys -p no:cacheprovider -p sanitize_pools "${args[@]}" || status=$?
if compgen -G "reports/*" >/dev/null; then
  cat reports/* >&2
  echo "sanitize: the sanitizers reported the above" >&2
  exit 1
fi
exit "$status"
