#!/bin/sh
# ab-selftest.sh — tests/gpu/ab_train.py --self-test: the A/B training check's own machinery on a tiny model on the
# CPU (each configuration in its own subprocess): the default reproduces itself bitwise, another seed does not,
# save_on_cpu and checkpoint run; and its JSON is valid.  Skips (77) without a python3 that has torch.  Reads
# $srcdir; writes only a temp file.
set -u

srcdir=${srcdir:-.}
tmp=$(mktemp "${TMPDIR:-/tmp}/hoff-ab-selftest.XXXXXX") || exit 99
trap 'rm -f "$tmp"' EXIT INT TERM

. "$srcdir/tests/torch_python.sh"

"$py" "$srcdir/tests/gpu/ab_train.py" --self-test --out "$tmp"
rc=$?
if ! "$py" - "$tmp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["config"]: r for r in d["summary"]}
want = {"default": True, "default_again": True, "default_seed1": False}
bad = [n for n, w in want.items() if rows.get(n, {}).get("bitwise_equal") is not w]
bad += [n for n in ("save_on_cpu", "checkpoint") if rows.get(n, {}).get("status") != "ok"]
print("self-test JSON: status %s; %s" % (d["status"], ", ".join("%s=%s" % (n, r["bitwise_equal"]) for n, r in rows.items())))
sys.exit(1 if bad or d["status"] != "ok" else 0)
PY
then
    echo "FAIL: ab_train.py --self-test wrote an unexpected result (exit $rc)"
    exit 1
fi
exit "$rc"
