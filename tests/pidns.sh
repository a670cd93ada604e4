#!/bin/sh
# pidns.sh — statistics segments across real pid namespaces (unshare --pid; needs root or user namespaces, skips
# otherwise): two hoff processes with the same pid in two namespaces keep a segment each, hoff-stat --clean run in
# another namespace removes none of the live ones, and one whose namespace died is stale from the initial namespace.
# Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
if ! unshare --pid --fork --mount-proc --kill-child true 2>/dev/null; then
    echo "SKIP: 'unshare --pid --fork --mount-proc' does not work here (needs root or unprivileged user namespaces)"
    exit 77
fi
[ -w /dev/shm ] || { echo "SKIP: no writable /dev/shm"; exit 77; }
uid=$(id -u)
fail=0
tmp=${TMPDIR:-/tmp}/hoff-pidns-test.$$
pids=""
cleanup() {
    for p in $pids; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    for s in $(cat "$tmp.new" 2>/dev/null); do rm -f "/dev/shm/$s"; done
    rm -f "$tmp".*
}
trap cleanup EXIT
trap 'exit 1' INT TERM
: >"$tmp.new"
bad() { echo "FAIL: $*"; fail=1; }
# Segments of this form (hoff.UID.PIDNS.PID[.K]; other suites may run at the same time with other names).
segs() { (cd /dev/shm && ls -d hoff."$uid".* 2>/dev/null) | sort; }
small="--layers 2 --hidden 256 --seq 512 --steps 2 --hold 60"

self=$(readlink /proc/self/ns/pid | sed -n 's/^pid:\[\([0-9]*\)\]$/\1/p')
[ -n "$self" ] || { echo "SKIP: cannot read /proc/self/ns/pid"; exit 77; }
# The segments of pid 1 of other namespaces (a, b), and of our demo: only
# these are counted and removed (other suites may publish at the same time).
ours() { segs | grep -E "^hoff\.$uid\.[0-9]+\.1$" | grep -v "^hoff\.$uid\.$self\.1$" | grep -vxF -f "$tmp.pre1"; }
segs | grep -E "^hoff\.$uid\.[0-9]+\.1$" >"$tmp.pre1"
: >"$tmp.new"
# wait_for CMD N: until CMD lists N names (10 s at most)
wait_for() {
    i=0
    while [ $i -lt 100 ] && [ "$($1 | wc -l)" -lt "$2" ]; do
        sleep 0.1
        i=$((i + 1))
    done
}
host_seg() { [ -e "/dev/shm/hoff.$uid.$self.$host" ] && echo "hoff.$uid.$self.$host"; }
tracked() { { ours; host_seg; } | sort; }

# 1. Two demos, each pid 1 of its own namespace, and one of ours.
unshare --pid --fork --mount-proc --kill-child ./hoff-demo $small >/dev/null 2>"$tmp.a" &
pids="$pids $!"
wait_for ours 1
ours >"$tmp.new"
unshare --pid --fork --mount-proc --kill-child ./hoff-demo $small >/dev/null 2>"$tmp.b" &
nsb=$!
pids="$pids $nsb"
wait_for ours 2
ours >"$tmp.new"
./hoff-demo $small >/dev/null 2>"$tmp.c" &
host=$!
pids="$pids $host"
wait_for host_seg 1
sleep 0.5 # let a replacement, if any, happen
tracked >"$tmp.new"
n=$(wc -l <"$tmp.new")
[ "$n" = 3 ] || { bad "3 hoff processes (two with pid 1 in two pid namespaces) left $n segments: $(cat "$tmp.new")"; cat "$tmp.a" "$tmp.b"; }

# 2. hoff-stat --clean inside yet another namespace (where none of these pids
#    exists) removes none of them.
unshare --pid --fork --mount-proc --kill-child ./hoff-stat --clean >"$tmp.out" 2>&1
tracked >"$tmp.after"
cmp -s "$tmp.new" "$tmp.after" || { bad "hoff-stat --clean in another pid namespace removed live segments: $(comm -23 "$tmp.new" "$tmp.after")"; cat "$tmp.out"; }
# ... nor from here, where it sees them all alive.
./hoff-stat --clean >"$tmp.out" 2>&1
tracked >"$tmp.after"
cmp -s "$tmp.new" "$tmp.after" || { bad "hoff-stat --clean removed live segments of other namespaces: $(comm -23 "$tmp.new" "$tmp.after")"; cat "$tmp.out"; }
./hoff-stat --json >"$tmp.json" 2>"$tmp.err" # other hoff builds' segments are refused on stderr
python3 - "$tmp.json" "$tmp.new" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
new = open(sys.argv[2]).read().split()
mine = {p["segment"]: p for p in d["processes"] if p["segment"] in new}
if len(mine) != 3 or not all(p["alive"] is True for p in mine.values()):
    print("FAIL: hoff-stat --json from the initial namespace: expected the 3 segments alive, got", mine)
    sys.exit(1)
if sum(1 for p in mine.values() if not p["same_namespace"]) != 2:
    print("FAIL: expected 2 segments of other pid namespaces:", mine)
    sys.exit(1)
PY

# 3. Namespace b dies (SIGKILL: no exit handler): its segment is stale from
#    here, and --clean removes it and nothing else.
kill -KILL "$nsb"
wait "$nsb" 2>/dev/null
sleep 0.3
./hoff-stat --clean >"$tmp.out" 2>&1
tracked >"$tmp.after"
n=$(wc -l <"$tmp.after")
[ "$n" = 2 ] || { bad "after namespace b died, --clean left $n of the 3 segments (expected 2)"; cat "$tmp.out"; }
grep -q "^removed " "$tmp.out" || { bad "--clean did not say what it removed"; cat "$tmp.out"; }
exit $fail
