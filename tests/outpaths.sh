#!/bin/sh
# outpaths.sh — every command that writes a user-named file (hoff-plan synth -o, timeline -o, export --perfetto)
# through core/outfile.h: a failed write leaves the old file and no temporary, a device node is written in place and
# never removed, a link planted in a sticky directory by another user is not followed, a directory is a clear error,
# new files are 0600.  Every target is in a scratch directory.  Runs in the build directory ($builddir or cwd).
set -u

srcdir=${srcdir:-.}
case $srcdir in /*) ;; *) srcdir=$(pwd)/$srcdir ;; esac
cd "${builddir:-.}" || exit 99
. "$srcdir/tests/sim_memory.sh"
fail=0
d=$(mktemp -d "${TMPDIR:-/tmp}/hoff-outpaths.XXXXXX") || exit 99
trap 'rm -rf "$d"' EXIT
trap 'exit 1' INT TERM
bad() { echo "FAIL: $*"; fail=1; }
root=0
[ "$(id -u)" = 0 ] && root=1

# run WHAT FILE: each command, writing FILE
run() {
    case $1 in
    synth) ./hoff-plan synth -o "$2" ;;
    timeline) sim_run ./hoff-plan timeline "$trace" --budget 25% --steps 2 -o "$2" ;;
    export) sim_run ./hoff-plan export "$trace" --budget 25% --steps 2 --perfetto "$2" ;;
    esac >"$d/out" 2>&1
}
leftovers() { find "$d" -name '.*.??????' | grep -q . && { bad "$1: a temporary file was left: $(find "$d" -name '.*.??????')"; }; }

umask 022
trace=$d/small.trace
./hoff-plan synth --events 200 -o "$trace" >"$d/out" 2>&1 || { bad "hoff-plan synth"; cat "$d/out"; exit 1; }
for what in synth timeline export; do
    # A new file: written, 0600, no temporary left.
    run $what "$d/new.$what" || { bad "$what to a new file failed"; cat "$d/out"; }
    mode=$(stat -c %a "$d/new.$what" 2>/dev/null)
    [ "$mode" = 600 ] || bad "$what: a new file has mode $mode, expected 600"
    leftovers "$what (new file)"

    # A failed write (the file size limit) leaves the old file as it was.
    printf 'the old file\n' >"$d/old.$what"
    (ulimit -f 4 && trap '' XFSZ && run $what "$d/old.$what") && bad "$what under 'ulimit -f 4' succeeded"
    [ "$(cat "$d/old.$what" 2>/dev/null)" = "the old file" ] ||
        bad "$what: the old file was lost or changed after a failed write ($(ls -l "$d/old.$what" 2>&1))"
    leftovers "$what (failed write)"

    # A directory: a clear error, exit 1.
    run $what "$d"
    rc=$?
    [ "$rc" = 1 ] || bad "$what -o DIR exited $rc, expected 1"
    grep -q "directory" "$d/out" || { bad "$what -o DIR: no 'directory' in the message"; cat "$d/out"; }

    if [ "$root" = 1 ]; then
        # Device nodes (twins of /dev/full and /dev/null): written in place, never removed.
        mknod "$d/full" c 1 7 && mknod "$d/null" c 1 3 || { bad "mknod failed as root"; continue; }
        run $what "$d/full" && bad "$what to a full device succeeded"
        grep -q "No space left" "$d/out" || { bad "$what to a full device: no 'No space left' in:"; cat "$d/out"; }
        [ -c "$d/full" ] || bad "$what removed the device node it failed to write"
        run $what "$d/null" || { bad "$what to a null device failed"; cat "$d/out"; }
        [ -c "$d/null" ] || bad "$what replaced or removed the null device node"
        rm -f "$d/full" "$d/null"
        leftovers "$what (devices)"

        # A link planted by another user in a sticky, world-writable directory.
        mkdir -p "$d/tmp" && chmod 1777 "$d/tmp"
        printf 'private\n' >"$d/victim"
        ln -sf "$d/victim" "$d/tmp/out" && chown -h nobody "$d/tmp/out" 2>/dev/null ||
            chown -h 65534 "$d/tmp/out"
        run $what "$d/tmp/out" && bad "$what followed a link planted by another user"
        grep -q "not followed" "$d/out" || { bad "$what (planted link): no 'not followed' in:"; cat "$d/out"; }
        [ "$(cat "$d/victim")" = private ] || bad "$what wrote through a planted link over another file"
        [ -L "$d/tmp/out" ] || bad "$what removed the planted link"
        rm -rf "$d/tmp" "$d/victim"
    fi
done
[ "$root" = 1 ] || echo "note: not root: the device-node and planted-link cases were not run"
exit $fail
