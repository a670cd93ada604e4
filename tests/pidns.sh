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
    for s in $(cat "$tmp.new" 2>/dev/null); do rm -f "/dev/shm/$s"; done # ours, killed: stale
    rm -rf "$tmp".*
}
trap cleanup EXIT
trap 'exit 1' INT TERM
bad() { echo "FAIL: $*"; fail=1; }
small="--layers 2 --hidden 256 --seq 512 --steps 2 --hold 600" # killed at the end

self=$(readlink /proc/self/ns/pid | sed -n 's/^pid:\[\([0-9]*\)\]$/\1/p')
[ -n "$self" ] || { echo "SKIP: cannot read /proc/self/ns/pid"; exit 77; }
# /dev/shm is shared with other suites, and with other runs of this one (another build's make check, another
# user): each of our segments is known by its exact name, and --clean only ever runs on private copies of
# ours (the liveness of a segment's writer is read from its header, wherever the file lies), so that it
# neither removes another suite's stale segment nor has ours removed by theirs.
mkdir "$tmp.dir" || exit 99
# in_ns NAME CMD...: CMD as pid 1 of a new pid namespace, whose number goes to $tmp.NAME.ns; run in the
# background, $! is unshare's pid (exec: not a subshell's)
in_ns() {
    f=$tmp.$1.ns
    shift
    exec unshare --pid --fork --mount-proc --kill-child sh -c \
        'readlink /proc/self/ns/pid | sed -n "s/^pid:\[\([0-9]*\)\]$/\1/p" >"$0.part" && mv "$0.part" "$0" &&
         exec "$@"' "$f" "$@"
}
# until_ok CMD...: CMD every 0.1 s until it succeeds, 60 s at most (a sanitized demo on a loaded machine starts
# slowly); its last status
until_ok() {
    i=0
    until "$@"; do
        [ $i -lt 600 ] || return 1
        sleep 0.1
        i=$((i + 1))
    done
}
# ns_of NAME: the number of namespace NAME, once its pid 1 has written it
ns_of() {
    until_ok test -s "$tmp.$1.ns"
    cat "$tmp.$1.ns" 2>/dev/null
}
# copy: our segments (those that exist) into the private directory, afresh
copy() {
    rm -f "$tmp.dir"/*
    for s in $(cat "$tmp.new"); do
        [ -e "/dev/shm/$s" ] && cp "/dev/shm/$s" "$tmp.dir/$s" && chmod 600 "$tmp.dir/$s"
    done
}
copies() { (cd "$tmp.dir" && ls) | sort; }

# 1. Two demos, each pid 1 of its own namespace, and one of ours.
in_ns a ./hoff-demo $small >/dev/null 2>"$tmp.a" &
pids="$pids $!"
in_ns b ./hoff-demo $small >/dev/null 2>"$tmp.b" &
nsb=$!
pids="$pids $nsb"
./hoff-demo $small >/dev/null 2>"$tmp.c" &
host=$!
pids="$pids $host"
seg_a=hoff.$uid.$(ns_of a).1
seg_b=hoff.$uid.$(ns_of b).1
seg_c=hoff.$uid.$self.$host
printf '%s\n' "$seg_a" "$seg_b" "$seg_c" | sort >"$tmp.new"
for s in $seg_a $seg_b $seg_c; do
    until_ok test -e "/dev/shm/$s"
done
sleep 0.5 # let a replacement, if any, happen
n=0
for s in $seg_a $seg_b $seg_c; do
    [ -e "/dev/shm/$s" ] && n=$((n + 1))
done
[ "$n" = 3 ] || { bad "3 hoff processes (two with pid 1 in two pid namespaces) left $n of their segments $(cat "$tmp.new" | tr '\n' ' ')(/dev/shm: $(ls /dev/shm | grep "^hoff\.$uid\." | tr '\n' ' '))"; cat "$tmp.a" "$tmp.b" "$tmp.c"; }

# 2. hoff-stat --clean inside yet another namespace (where none of these pids
#    exists) removes none of them.
copy
copies >"$tmp.before"
unshare --pid --fork --mount-proc --kill-child ./hoff-stat --dir "$tmp.dir" --clean >"$tmp.out" 2>&1
copies >"$tmp.after"
cmp -s "$tmp.before" "$tmp.after" || { bad "hoff-stat --clean in another pid namespace removed live segments: $(comm -23 "$tmp.before" "$tmp.after")"; cat "$tmp.out"; }
# ... nor from here, where it sees them all alive.
./hoff-stat --dir "$tmp.dir" --clean >"$tmp.out" 2>&1
copies >"$tmp.after"
cmp -s "$tmp.before" "$tmp.after" || { bad "hoff-stat --clean removed live segments of other namespaces: $(comm -23 "$tmp.before" "$tmp.after")"; cat "$tmp.out"; }
./hoff-stat --json >"$tmp.json" 2>"$tmp.jerr" # other suites' segments may warn on stderr
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
#    here, and --clean removes it and nothing else.  The namespace ends when
#    its pid 1 has exited, a while after unshare's death on a loaded machine:
#    waited for (60 s at most), as hoff-stat sees it.
kill -KILL "$nsb"
wait "$nsb" 2>/dev/null
copy
b_gone() {
    ./hoff-stat --dir "$tmp.dir" --json 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(p["segment"] == sys.argv[1] and p["alive"] is False for p in json.load(sys.stdin)["processes"])
         else 1)' "$seg_b"
}
until_ok b_gone
./hoff-stat --dir "$tmp.dir" --clean >"$tmp.out" 2>&1
copies >"$tmp.after"
printf '%s\n' "$seg_a" "$seg_c" | sort >"$tmp.want"
cmp -s "$tmp.want" "$tmp.after" || { bad "after namespace b died, --clean left $(cat "$tmp.after" | tr '\n' ' ')(expected $(cat "$tmp.want" | tr '\n' ' '))"; cat "$tmp.out"; }
grep -q "^removed $tmp.dir/$seg_b " "$tmp.out" || { bad "--clean did not say what it removed"; cat "$tmp.out"; }
exit $fail
