#!/bin/sh
# bound.sh — bench/bound.py (the LP/MILP lower bound on the exposed stall) on a small synthetic trace at 50% and
# 35% (its working-set floor is 32%: below it no plan, and no bound, exists): both bounds come out, lp <= milp,
# and with --check neither is above the stall greedy and timed reach in hoff-plan simulate.  Skips (77) without a python3 that has scipy.  Runs in the build directory; reads
# bench/bound.py from $srcdir.
set -u

srcdir=${srcdir:-.}
cd "${builddir:-.}" || exit 99
. "$srcdir/tests/sim_memory.sh"
tmp=${TMPDIR:-/tmp}/hoff-bound-test.$$
trap 'rm -f "$tmp".*' EXIT INT TERM

py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import scipy.optimize' >/dev/null 2>&1; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    echo "SKIP: no python3 with scipy (Debian: apt-get install python3-scipy)"
    exit 77
fi

if ! ./hoff-plan synth --layers 2 --hidden 1024 --seq 2048 -o "$tmp.trace" >"$tmp.out" 2>&1; then
    echo "FAIL: hoff-plan synth"
    cat "$tmp.out"
    exit 1
fi
sim_run "$py" "$srcdir/bench/bound.py" --hoff-plan ./hoff-plan --check --time-limit 60 "$tmp.trace" --budget 50,35 \
    >"$tmp.json" 2>"$tmp.err"
rc=$?
cat "$tmp.err"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: bench/bound.py --check exited $rc"
    cat "$tmp.json"
    exit 1
fi
cat "$tmp.json"
"$py" - "$tmp.json" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = len(rows) == 2
if not ok:
    print("FAIL: expected 2 JSON lines, got %d" % len(rows))
for r in rows:
    what = "%s%%" % r.get("budget_pct")
    lp, mi = r.get("lp_bound_ns"), r.get("milp_bound_ns")
    sims = [r.get("greedy_stall_ns"), r.get("timed_stall_ns")]
    if lp is None or mi is None or None in sims:
        print("FAIL: %s: a bound or a simulated stall is missing: %s" % (what, r))
        ok = False
        continue
    tol = 1000 + 1e-6 * min(sims)
    if not (0 <= lp <= mi + tol):
        print("FAIL: %s: lp %d > milp %d" % (what, lp, mi))
        ok = False
    if mi > min(sims) + tol:
        print("FAIL: %s: milp bound %d above a simulated stall %s" % (what, mi, sims))
        ok = False
    if r.get("check") != "ok" or not r.get("milp_status", "").startswith(("optimal", "time_limit")):
        print("FAIL: %s: check %s, milp_status %s" % (what, r.get("check"), r.get("milp_status")))
        ok = False
    if lp == 0:
        print("FAIL: %s: the LP bound is 0 on a bandwidth-bound trace" % what)
        ok = False
sys.exit(0 if ok else 1)
EOF
