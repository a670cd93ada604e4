#!/bin/sh
# stat.sh — hoff-stat against a running hoff-demo (sim backend): the list, a watched process's figures equal to the
# demo's own stats at the same step, the plan's working-set floor with its phase and op (the demo's is in the forward
# pass) in the JSON, the line and the list, a job's ranks grouped with a total and watched together (--job), the line format against stored expected output, the JSON against
# doc/hoff-stat.schema.json, stale segments and --clean, and every refusal (symlink, other owner, truncated,
# garbage, wrong version or size) with a clear message and no crash.  Runs in the build directory ($builddir or cwd).
set -u

srcdir=${srcdir:-.}
case $srcdir in /*) ;; *) srcdir=$(pwd)/$srcdir ;; esac
cd "${builddir:-.}" || exit 99
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is needed to compare the JSON"
    exit 77
fi
if [ ! -d /dev/shm ] || [ ! -w /dev/shm ]; then
    echo "SKIP: no writable /dev/shm"
    exit 77
fi
fail=0
tmp=${TMPDIR:-/tmp}/hoff-stat-test.$$
seg_dir=$tmp.dir
uid=$(id -u)
# Segments are named hoff.UID.PIDNS.PID: our pid namespace.
ns=$(readlink /proc/self/ns/pid | sed -n 's/^pid:\[\([0-9]*\)\]$/\1/p')
[ -n "$ns" ] || { echo "SKIP: cannot read /proc/self/ns/pid"; exit 77; }
demo_pids=""
# stop_demos: kill our demos and remove the segments they leave (a killed process cannot remove its own; left
# behind, they would pile up in the /dev/shm every suite and user shares)
stop_demos() {
    for p in $demo_pids; do
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        rm -f "/dev/shm/hoff.$uid.$ns.$p"
    done
    demo_pids=""
}
cleanup() {
    stop_demos
    rm -rf "$tmp".* "$seg_dir" "$seg_dir.stale"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

say() { echo "--- $*"; }
bad() { echo "FAIL: $*"; fail=1; }

check() { # check FILE PATTERN WHAT
    if ! grep -q -- "$2" "$1"; then
        bad "$3: no '$2' in:"
        cat "$1"
    fi
}

# expect_rc RC WANT WHAT FILE: also, never a crash (a signal)
expect_rc() {
    if [ "$1" -ne "$2" ]; then
        bad "$3 exited $1, expected $2"
        cat "$4"
    fi
}

# Numbers (with a decimal point and a K/M/G/... or time unit) become N; runs of blanks one blank.
normalize() {
    sed -e 's/[0-9][0-9]*\(\.[0-9]*\)\{0,1\}[KMGTPE]\{0,1\}/N/g' -e 's/N[mun]\{0,1\}s\b/N/g' \
        -e 's/  */ /g' -e 's/^ //' "$1"
}

# Wait until FILE holds a complete JSON line (the demo has printed its report).
wait_json() { # wait_json FILE PID
    i=0
    while [ $i -lt 600 ]; do
        if grep -q '"stats":{' "$1" 2>/dev/null && tail -c 2 "$1" | grep -q '}'; then
            return 0
        fi
        if ! kill -0 "$2" 2>/dev/null; then
            return 1
        fi
        sleep 0.2
        i=$((i + 1))
    done
    return 1
}

small="--layers 4 --hidden 512 --seq 2048"

# 1. A demo that holds after its last step: its report and the segment agree.
say "demo with --hold"
./hoff-demo $small --steps 4 --json --hold 120 >"$tmp.demo.json" 2>"$tmp.demo.err" &
demo=$!
demo_pids="$demo"
if ! wait_json "$tmp.demo.json" "$demo"; then
    bad "hoff-demo --json --hold did not print its report"
    cat "$tmp.demo.json" "$tmp.demo.err"
    exit 1
fi

# 1a. The list shows it.
./hoff-stat >"$tmp.list" 2>&1
expect_rc $? 0 "hoff-stat (list)" "$tmp.list"
cat "$tmp.list"
check "$tmp.list" "PID *COMMAND *BACKEND *PLANNER *STATE *STEPS" "hoff-stat list header"
check "$tmp.list" "^ *$demo  hoff-demo  *sim  *timed  *replay  *4 .* alive" "hoff-stat list row"
# stderr apart: other processes' segments (another hoff build's layout) are refused there, not in the JSON.
./hoff-stat --json >"$tmp.list.json" 2>"$tmp.list.err"
expect_rc $? 0 "hoff-stat --json (list)" "$tmp.list.err"
python3 "$srcdir/tests/schema_check.py" "$srcdir/doc/hoff-stat.schema.json" list <"$tmp.list.json" >"$tmp.out" 2>&1 ||
    { bad "hoff-stat --json (list) does not validate"; cat "$tmp.out" "$tmp.list.json"; }
python3 - "$tmp.list.json" "$demo" <<'EOF' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
me = [p for p in doc["processes"] if p["pid"] == int(sys.argv[2])]
if len(me) != 1 or not me[0]["alive"] or not me[0]["readable"] or me[0]["command"] != "hoff-demo" \
        or me[0]["backend"] != "sim" or me[0]["planner"] != "timed" or me[0]["steps"] != 4:
    print("FAIL: the list's entry for the demo is wrong:", me)
    sys.exit(1)
EOF

# 1b. -p PID --once --json: the same counters as the demo's own "stats".
./hoff-stat -p "$demo" --once --json >"$tmp.once.json" 2>&1
expect_rc $? 0 "hoff-stat -p --once --json" "$tmp.once.json"
python3 "$srcdir/tests/schema_check.py" "$srcdir/doc/hoff-stat.schema.json" sample <"$tmp.once.json" >"$tmp.out" 2>&1 ||
    { bad "hoff-stat -p --json does not validate"; cat "$tmp.out" "$tmp.once.json"; }
python3 "$srcdir/tests/schema_check.py" "$srcdir/doc/hoff-stat.schema.json" <"$tmp.once.json" >"$tmp.out" 2>&1 ||
    { bad "hoff-stat -p --json does not validate against the root schema"; cat "$tmp.out"; }
python3 - "$tmp.demo.json" "$tmp.once.json" "$demo" "$tmp.list.json" <<'EOF' || fail=1
import json, re, sys
demo = json.load(open(sys.argv[1]))
stat = json.loads(open(sys.argv[2]).readline())
listed = [p for p in json.load(open(sys.argv[4]))["processes"] if p["pid"] == int(sys.argv[3])]
a, b = demo["stats"], stat["stats"]
diff = [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
if diff:
    print("FAIL: hoff-stat's figures differ from the demo's own stats:", diff)
    sys.exit(1)
if stat["pid"] != int(sys.argv[3]) or stat["state"] != "replay" or not stat["alive"] \
        or stat["backend"] != demo["backend"] or stat["planner"] != demo["plan"]["planner"] \
        or b["steps"] != demo["steps"] or b["budget_bytes"] != demo["budget_bytes"] \
        or b["peak_resident_bytes"] != demo["peak_resident_bytes"]:
    print("FAIL: hoff-stat's header fields differ from the demo's:", stat)
    sys.exit(1)
# The floor: the demo's own figures, its phase by name, and the op the segment carries (the demo names its ops
# L<layer>.<fwd|bwd>.<op>; its floor is in the forward pass).
fl = stat.get("floor")
want = {"bytes": demo["plan"]["floor_bytes"], "blocks": b["plan_floor_blocks"], "phase": "forward"}
if demo["plan"]["floor_phase"] != "forward" or demo["plan"]["floor_bytes"] <= 0 or b["plan_floor_phase"] != 1:
    print("FAIL: the demo's floor is not in the forward pass:", demo["plan"])
    sys.exit(1)
if not fl or any(fl.get(k) != v for k, v in want.items()) or not re.match(r"^L[0-9]+\.fwd\.[a-z_0-9]+$", fl.get("op", "")) \
        or fl["bytes"] != b["plan_floor_bytes"] or fl["blocks"] < 1:
    print("FAIL: hoff-stat -p --json: floor %r, want %r with an op L<n>.fwd.<op>" % (fl, want))
    sys.exit(1)
if len(listed) != 1 or listed[0].get("floor") != fl:
    print("FAIL: hoff-stat --json (list): floor %r, want %r" % (listed[0].get("floor") if listed else None, fl))
    sys.exit(1)
print("hoff-stat matches the demo's stats: %d counters, step %d, floor %s" % (len(a), b["steps"], fl))
EOF

# 1c. The line: its format against the stored expected output, its figures
#     against the JSON (the counters do not move while the demo holds).
./hoff-stat -p "$demo" --once >"$tmp.once" 2>&1
expect_rc $? 0 "hoff-stat -p --once" "$tmp.once"
cat "$tmp.once"
normalize "$tmp.once" >"$tmp.once.norm"
if ! diff -u "$srcdir/tests/expected/hoff-stat-once.txt" "$tmp.once.norm"; then
    bad "hoff-stat -p --once: the format differs from tests/expected/hoff-stat-once.txt"
fi
python3 - "$tmp.once" "$tmp.once.json" "$tmp.list" "$demo" <<'EOF' || fail=1
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
names, values = lines[1].split(), lines[2].split()
if len(names) != len(values):
    print("FAIL: the line has %d values under %d column names" % (len(values), len(names)))
    sys.exit(1)
row = dict(zip(names, values))
st = json.loads(open(sys.argv[2]).readline())["stats"]

def hsize(v):
    if v < 1024:
        return str(v)
    d, u = float(v), -1
    while d >= 1024.0 and u < 5:
        d /= 1024.0
        u += 1
    return ("%.1f%s" if d < 9.95 else "%.0f%s") % (d, "KMGTPE"[u])

hits, misses = st["cache_hits"], st["cache_misses"]
want = {
    "state": "replay", "steps": str(st["steps"]), "budget": hsize(st["budget_bytes"]),
    "resid": hsize(st["resident_bytes"]), "peak": hsize(st["peak_resident_bytes"]),
    "host": hsize(st["host_bytes"]), "nvme": hsize(st["nvme_bytes"]),
    "hit%": "%.1f" % (100.0 * hits / (hits + misses)),
    "mapped": hsize(st["device_pool_bytes"] + st["managed_pool_bytes"]),
    "bytes": hsize(st["plan_floor_bytes"]), "phase": "fwd",  # the floor group: the demo's is in the forward pass
}
wrong = [(k, row.get(k), v) for k, v in want.items() if row.get(k) != v]
if wrong:
    print("FAIL: the line's figures differ from the JSON (column, line, json):", wrong)
    sys.exit(1)
if not re.match(r"^-plan-+ -floor-+ -offload bytes", lines[0]):
    print("FAIL: the line's header has no floor group after the plan:", lines[0])
    sys.exit(1)
# The list: the floor as "8.0M fwd" in its FLOOR column, after BUDGET.
lst = open(sys.argv[3]).read().splitlines()
head = lst[0].split()
mine = [l for l in lst if l.split() and l.split()[0] == sys.argv[4]]
if head[head.index("BUDGET") + 1] != "FLOOR" or len(mine) != 1 \
        or not re.search(r" %s +%s fwd +\S+  alive$" % (re.escape(row["budget"]), re.escape(want["bytes"])), mine[0]):
    print("FAIL: the list does not show the floor '%s fwd' after the budget:" % want["bytes"], lst[0], mine)
    sys.exit(1)
EOF

# 1d. The header comes back every screenful (LINES when not a terminal).
LINES=5 ./hoff-stat -p "$demo" -i 0.05 -c 7 >"$tmp.rep" 2>&1
expect_rc $? 0 "hoff-stat -p -i -c" "$tmp.rep"
normalize "$tmp.rep" >"$tmp.rep.norm"
if ! diff -u "$srcdir/tests/expected/hoff-stat-repeat.txt" "$tmp.rep.norm"; then
    bad "LINES=5 hoff-stat -c 7: the format differs from tests/expected/hoff-stat-repeat.txt"
fi

# 1e. Security: copies of the live segment under --dir, spoiled in every way.
say "refusals"
mkdir "$seg_dir" || exit 99
live=$seg_dir/hoff.$uid.$ns.$demo
cp "/dev/shm/hoff.$uid.$ns.$demo" "$live" && chmod 600 "$live" || exit 99
./hoff-stat --dir "$seg_dir" -p "$demo" --once >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-stat --dir (a good copy)" "$tmp.out"
size=$(wc -c <"$live")
refused() { # refused NAME PATTERN WHAT: -p refuses it with the message, exit 1, no crash
    pid=${1#hoff.$uid.$ns.}
    ./hoff-stat --dir "$seg_dir" -p "$pid" --once >"$tmp.out" 2>&1
    rc=$?
    expect_rc $rc 1 "hoff-stat -p on $3" "$tmp.out"
    check "$tmp.out" "refused: .*$2" "hoff-stat -p on $3"
    ./hoff-stat --dir "$seg_dir" -p "$pid" --once --json >"$tmp.out" 2>&1
    expect_rc $? 1 "hoff-stat -p --json on $3" "$tmp.out"
    check "$tmp.out" "refused: .*$2" "hoff-stat -p --json on $3"
}
ln -s "$live" "$seg_dir/hoff.$uid.$ns.4194301"
refused "hoff.$uid.$ns.4194301" "symbolic link" "a symlink to a good segment"
head -c 100 "$live" >"$seg_dir/hoff.$uid.$ns.4194302"
chmod 600 "$seg_dir/hoff.$uid.$ns.4194302"
refused "hoff.$uid.$ns.4194302" "truncated" "a truncated segment"
: >"$seg_dir/hoff.$uid.$ns.4194303"
chmod 600 "$seg_dir/hoff.$uid.$ns.4194303"
refused "hoff.$uid.$ns.4194303" "truncated" "an empty segment"
head -c "$size" /dev/urandom >"$seg_dir/hoff.$uid.$ns.4194304"
chmod 600 "$seg_dir/hoff.$uid.$ns.4194304"
refused "hoff.$uid.$ns.4194304" "not a hoff statistics segment" "a segment of random bytes"
python3 - "$live" "$seg_dir/hoff.$uid.$ns.4194305" "$seg_dir/hoff.$uid.$ns.4194306" "$seg_dir/hoff.$uid.$ns.4194307" \
    "$seg_dir/hoff.$uid.$ns.4194312" <<'EOF'
import os, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
v = bytearray(data); struct.pack_into("<I", v, 8, 99)         # layout version 99
w = bytearray(data); struct.pack_into("<I", w, 24, 1 << 30)   # another stats size
x = bytearray(data) + b"\0" * 64                              # longer than the header says
# the layout before the floor's op (version 3): the segment ended with the stats, 64 bytes shorter
o = bytearray(data[:-64]); struct.pack_into("<I", o, 8, 3); struct.pack_into("<I", o, 12, len(o))
for path, d in zip(sys.argv[2:], (v, w, x, o)):
    with open(path, "wb") as f:
        f.write(d)
    os.chmod(path, 0o600)
EOF
refused "hoff.$uid.$ns.4194305" "layout version 99; this hoff-stat reads version 4" "a segment of another layout version"
refused "hoff.$uid.$ns.4194312" "layout version 3; this hoff-stat reads version 4" "a segment of the layout before the floor's op"
refused "hoff.$uid.$ns.4194306" "stats version" "a segment of another stats size"
refused "hoff.$uid.$ns.4194307" "the header says" "a segment longer than its header says"
cp "$live" "$seg_dir/hoff.$uid.$ns.4194308"
chmod 644 "$seg_dir/hoff.$uid.$ns.4194308"
refused "hoff.$uid.$ns.4194308" "group or others" "a segment others may read"
if [ "$uid" -eq 0 ]; then
    cp "$live" "$seg_dir/hoff.$uid.$ns.4194309"
    chmod 600 "$seg_dir/hoff.$uid.$ns.4194309"
    chown 65534 "$seg_dir/hoff.$uid.$ns.4194309"
    refused "hoff.$uid.$ns.4194309" "owned by uid 65534" "a segment of another user"
else
    echo "(not root: the other-owner case is covered by tests/test_publish)"
fi
mkfifo "$seg_dir/hoff.$uid.$ns.4194310"
refused "hoff.$uid.$ns.4194310" "not a regular file" "a FIFO"
./hoff-stat --dir "$seg_dir" -p 4194311 --once >"$tmp.out" 2>&1
expect_rc $? 1 "hoff-stat -p on a missing segment" "$tmp.out"
check "$tmp.out" "no such segment" "hoff-stat -p on a missing segment"
# The list shows the live copy and reports the rest; --clean removes what is
# stale (their pids are not running) and nothing else.
./hoff-stat --dir "$seg_dir" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-stat --dir (list of spoiled segments)" "$tmp.out"
cat "$tmp.out"
check "$tmp.out" "^ *$demo  hoff-demo .* alive" "the list of spoiled segments: the good one"
check "$tmp.out" "4194301 .*refused: a symbolic link" "the list of spoiled segments: the symlink"
check "$tmp.out" "stale segment" "the list of spoiled segments: the stale count"
./hoff-stat --dir "$seg_dir" --json >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-stat --dir --json (list of spoiled segments)" "$tmp.out"
python3 "$srcdir/tests/schema_check.py" "$srcdir/doc/hoff-stat.schema.json" list <"$tmp.out" >"$tmp.out2" 2>&1 ||
    { bad "the list of spoiled segments does not validate"; cat "$tmp.out2" "$tmp.out"; }
./hoff-stat --dir "$seg_dir" --clean >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-stat --clean" "$tmp.out"
cat "$tmp.out"
left=$(cd "$seg_dir" && ls | sort | tr '\n' ' ')
want="hoff.$uid.$ns.$demo hoff.$uid.$ns.4194310"            # the live one; a FIFO is never removed
[ "$uid" -eq 0 ] && want="$want hoff.$uid.$ns.4194309" # nor another owner's
want=$(printf '%s\n' $want | sort | tr '\n' ' ')
if [ "$left" != "$want" ]; then
    bad "hoff-stat --clean left '$left', expected '$want'"
fi

# 2. A process killed without shutting down leaves a stale segment: reported, and removed by --clean.
say "stale segment"
kill -KILL "$demo"
wait "$demo" 2>/dev/null
demo_pids=""
if [ ! -e "/dev/shm/hoff.$uid.$ns.$demo" ]; then
    bad "a killed demo left no segment behind"
else
    ./hoff-stat >"$tmp.out" 2>&1
    expect_rc $? 0 "hoff-stat (list with a stale segment)" "$tmp.out"
    check "$tmp.out" "^ *$demo .*stale (process gone)" "the list marks the killed demo stale"
    check "$tmp.out" "hoff-stat --clean" "the list says how to clean"
    ./hoff-stat -p "$demo" --once >"$tmp.out" 2>&1
    expect_rc $? 1 "hoff-stat -p on a stale segment" "$tmp.out"
    check "$tmp.out" "is gone; its segment is stale" "hoff-stat -p on a stale segment"
    # --clean on a private copy: /dev/shm is shared with the rest of the suite.
    mkdir "$seg_dir.stale" && cp -p "/dev/shm/hoff.$uid.$ns.$demo" "$seg_dir.stale/" || exit 99
    rm -f "/dev/shm/hoff.$uid.$ns.$demo"
    ./hoff-stat --dir "$seg_dir.stale" --clean >"$tmp.out" 2>&1
    expect_rc $? 0 "hoff-stat --clean" "$tmp.out"
    check "$tmp.out" "removed $seg_dir.stale/hoff.$uid.$ns.$demo (process $demo is gone)" "hoff-stat --clean"
    if [ -e "$seg_dir.stale/hoff.$uid.$ns.$demo" ]; then
        bad "hoff-stat --clean did not remove the stale segment"
    fi
fi

# 3. Watching a running process: a line per interval, steps advancing, JSON valid;
#    the watch ends when the process does (its segment removed at shutdown).
say "watching a running demo"
./hoff-demo $small --steps 6 --step-delay 150 >"$tmp.demo2" 2>&1 &
demo=$!
demo_pids="$demo"
i=0
# Until the demo has reported its first step (with --step-delay it flushes each report): the segment's name
# alone is no sign, for the demo first sizes its blocks in a throw-away context whose segment, under the same
# name, is gone again before the real one is made (watching from that moment failed: "no such segment").
# Up to 60 s: a sanitized demo on a loaded 2-core machine starts slowly.
while ! grep -q '^step 0 ' "$tmp.demo2" && [ $i -lt 1200 ] && kill -0 "$demo" 2>/dev/null; do
    sleep 0.05
    i=$((i + 1))
done
grep -q '^step 0 ' "$tmp.demo2" || echo "note: the demo reported no step in $((i / 20)) s (alive: $(kill -0 "$demo" 2>/dev/null && echo yes || echo no))"
./hoff-stat -p "$demo" -i 0.1 --json >"$tmp.watch.json" 2>"$tmp.watch.err"
rc=$?
wait "$demo"
demo_rc=$?
demo_pids=""
expect_rc $demo_rc 0 "hoff-demo --step-delay" "$tmp.demo2"
expect_rc $rc 0 "hoff-stat -p (until the process ends)" "$tmp.watch.err"
check "$tmp.watch.err" "has ended" "hoff-stat -p: the end of the process"
python3 "$srcdir/tests/schema_check.py" "$srcdir/doc/hoff-stat.schema.json" sample <"$tmp.watch.json" >"$tmp.out" 2>&1 ||
    { bad "hoff-stat -p --json (watching) does not validate"; cat "$tmp.out"; }
python3 - "$tmp.watch.json" <<'EOF' || fail=1
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# Every sample says the floor: none before the first plan, the forward pass's once there is one.
for x in s:
    fl, planned = x["floor"], x["stats"]["plans"] > 0
    if (fl["phase"] != "forward" or fl["bytes"] <= 0 or not fl["op"]) if planned else \
            (fl != {"bytes": 0, "blocks": 0, "phase": "none", "op": ""}):
        print("FAIL: watching the demo: step %d, %d plans, floor %r" % (x["stats"]["steps"], x["stats"]["plans"], fl))
        sys.exit(1)
if not s or s[-1]["stats"]["plans"] < 1:
    print("FAIL: watching the demo: no sample with a plan")
    sys.exit(1)
steps = [x["stats"]["steps"] for x in s]
if len(s) < 3 or steps != sorted(steps) or steps[-1] < 5 or len(set(steps)) < 3:
    print("FAIL: watching the demo: %d samples, steps %s (want >= 3 samples, rising to >= 5)" % (len(s), steps))
    sys.exit(1)
if any(x["stats"]["allocs"] < y["stats"]["allocs"] for x, y in zip(s[1:], s)):
    print("FAIL: allocs went backwards")
    sys.exit(1)
print("watched %d samples, steps %s" % (len(s), steps))
EOF
if [ -e "/dev/shm/hoff.$uid.$ns.$demo" ]; then
    bad "the demo's segment is still there after it shut down"
fi

# 4. HOFF_STATS=0: no segment.
./hoff-demo $small --steps 2 --hold 2 >"$tmp.out" 2>&1 &
demo=$!
demo_pids="$demo"
HOFF_STATS=0 ./hoff-demo $small --steps 2 --hold 3 >"$tmp.out" 2>&1 &
quiet=$!
demo_pids="$demo $quiet"
sleep 1.5
if [ -e "/dev/shm/hoff.$uid.$ns.$quiet" ]; then
    bad "HOFF_STATS=0 published a segment"
fi
wait "$demo" "$quiet"
demo_pids=""

# 5. The publishing benchmark runs and reports what it measures (the ratio
#    itself is for a quiet machine: bench/stats without --quick).
./bench/stats --quick --json >"$tmp.bench" 2>&1
expect_rc $? 0 "bench/stats --quick --json" "$tmp.bench"
cat "$tmp.bench"
for key in '"ratio":' '"ratio_paired_median":' '"publish_on_pair_ns_median":' '"publish_off_pair_ns_median":' \
           '"write_ns":' '"segment_matches_stats":true'; do
    check "$tmp.bench" "$key" "bench/stats --json"
done

# 5b. One job: three hoff-demo ranks as torchrun starts them (RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID) and one
#     process outside it.  The list groups the ranks under the job with a total; --job watches all three.
say "a job of 3 ranks"
job=statjob-$$
demo_pids=""
for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r TORCHELASTIC_RUN_ID=$job HOFF_BUDGET=8M \
        ./hoff-demo $small --steps 3 --hold 60 >"$tmp.rank$r" 2>&1 &
    demo_pids="$demo_pids $!"
done
./hoff-demo $small --steps 3 --hold 60 >"$tmp.lone" 2>&1 &
lone=$!
demo_pids="$demo_pids $lone"
n=0
for i in $(seq 1 300); do
    n=$(./hoff-stat --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for p in d["processes"] if p.get("job") == sys.argv[1] and p.get("steps", 0) >= 3))' "$job")
    [ "$n" = 3 ] && break
    sleep 0.2
done
[ "$n" = 3 ] || bad "hoff-stat --json: $n of the 3 ranks of job $job listed with 3 steps"
./hoff-stat >"$tmp.jlist" 2>/dev/null
expect_rc $? 0 "hoff-stat (list with a job)" "$tmp.jlist"
cat "$tmp.jlist"
check "$tmp.jlist" "^job $job: 3 of 3 ranks on this node" "the job's heading"
python3 - "$tmp.jlist" "$job" "$lone" <<'PY' || bad "the job's ranks are not listed together under its heading, with its total"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
job, lone = sys.argv[2], sys.argv[3]
h = next(i for i, l in enumerate(lines) if l.startswith("job %s:" % job))
ranks = lines[h + 1:h + 4]
for r, l in enumerate(ranks):
    assert re.search(r"rank %d on GPU %d, alive$" % (r, r), l), l
total = lines[h + 4]
# the state is the ranks' common one, or "mixed" (a rank whose plan is still being made is in warmup)
# the floor: summed over the ranks with a plan, with their common phase ("-" while none has one)
assert re.match(r"^ *total +%s +(warmup|replay|mixed) +3 .* 24M +(-|[0-9.]+[KMG]? fwd) +job total \(3 ranks here"
                % re.escape(job[:15]), total), total
assert not any(l.split()[0] == lone for l in lines[h:h + 5]), "the lone process is inside the job"
PY
./hoff-stat --json >"$tmp.jlist.json" 2>/dev/null
python3 "$srcdir/tests/schema_check.py" "$srcdir/doc/hoff-stat.schema.json" list <"$tmp.jlist.json" >"$tmp.out" 2>&1 ||
    { bad "hoff-stat --json with a job does not match the schema"; cat "$tmp.out"; }
python3 - "$tmp.jlist.json" "$job" <<'PY' || bad "hoff-stat --json: the job's entry"
import json, sys
d = json.load(open(sys.argv[1]))
j = [x for x in d["jobs"] if x["job"] == sys.argv[2]]
assert len(j) == 1, d["jobs"]
j = j[0]
assert j["world_size"] == 3 and j["ranks"] == [0, 1, 2] and j["steps_min"] == 3, j
assert j["budget_bytes"] == 3 * 8 << 20, j
PY
./hoff-stat --job "$job" -i 0.2 -c 2 >"$tmp.jwatch" 2>&1
expect_rc $? 0 "hoff-stat --job $job -i 0.2 -c 2" "$tmp.jwatch"
cat "$tmp.jwatch"
[ "$(grep -c '^0 ' "$tmp.jwatch")" = 2 ] && [ "$(grep -c '^2 ' "$tmp.jwatch")" = 2 ] &&
    [ "$(grep -c '^total ' "$tmp.jwatch")" = 2 ] || bad "hoff-stat --job: want a line per rank and a total per interval"
check "$tmp.jwatch" "^rank  *state" "hoff-stat --job header"
check "$tmp.jwatch" "^total  *[a-z]*  *3 .* 24M " "hoff-stat --job total line (fewest steps, summed budget)"
./hoff-stat --job "$job" --once --json >"$tmp.jwatch.json" 2>&1
expect_rc $? 0 "hoff-stat --job --once --json" "$tmp.jwatch.json"
[ "$(wc -l <"$tmp.jwatch.json")" = 3 ] || bad "hoff-stat --job --once --json: want 3 lines (one per rank)"
python3 "$srcdir/tests/schema_check.py" "$srcdir/doc/hoff-stat.schema.json" sample <"$tmp.jwatch.json" >"$tmp.out" 2>&1 ||
    { bad "hoff-stat --job --json lines do not match the schema"; cat "$tmp.out"; }
./hoff-stat --job "no-such-job-$$" --once >"$tmp.out" 2>&1
expect_rc $? 1 "hoff-stat --job of no running job" "$tmp.out"
check "$tmp.out" "no hoff process of job 'no-such-job-$$'" "hoff-stat --job of no running job"
./hoff-stat --job "$job" -p 1 >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-stat --job with -p" "$tmp.out"
stop_demos

# 6. Usage errors.
./hoff-stat -p notapid >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-stat -p notapid" "$tmp.out"
./hoff-stat -i 0 -p 1 >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-stat -i 0" "$tmp.out"
./hoff-stat -c 3 >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-stat -c without -p" "$tmp.out"
./hoff-stat --bogus >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-stat --bogus" "$tmp.out"
./hoff-stat --help >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-stat --help" "$tmp.out"
check "$tmp.out" "usage: hoff-stat" "hoff-stat --help"

exit $fail
