#!/bin/sh
# format.sh — every C source and header under lib/, include/, tools/, tests/ and bench/ is formatted as
# .clang-format says: fails (exit 1) listing the files clang-format would change, with the command that fixes
# them (make format).  With --apply it reformats them in place instead (what `make format` runs).
# clang-format's output differs between major versions, so the check is pinned to one (PINNED below): it skips
# (exit 77, saying why) where clang-format is missing or has another major.  CLANG_FORMAT=path picks the binary;
# by default clang-format-14, else clang-format.  Reads $srcdir only (unless --apply).
set -u
PINNED=14

top=$(cd "${srcdir:-.}" && pwd)
style=$top/.clang-format
apply=0
[ "${1:-}" = --apply ] && apply=1

# Skip (77) in the check, fail in --apply: `make format` with the wrong clang-format must not pass quietly.
unusable() {
    echo "format.sh: $*"
    if [ "$apply" = 1 ]; then
        echo "format.sh: nothing reformatted; install clang-format $PINNED, or set CLANG_FORMAT=path"
        exit 1
    fi
    echo "SKIP: the formatting check needs clang-format $PINNED (apt install clang-format-$PINNED; CLANG_FORMAT=path)"
    exit 77
}

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-$PINNED clang-format; do
        if command -v "$c" >/dev/null 2>&1; then
            cf=$c
            break
        fi
    done
    [ -n "$cf" ] || unusable "no clang-format-$PINNED or clang-format in PATH"
fi
version=$("$cf" --version 2>/dev/null) || unusable "cannot run '$cf' (CLANG_FORMAT)"
# "Debian clang-format version 14.0.6", "clang-format version 17.0.6 (...)"
major=$(echo "$version" | sed -n 's/.*clang-format version \([0-9][0-9]*\)\..*/\1/p')
[ "$major" = "$PINNED" ] ||
    unusable "'$cf' is version ${major:-unknown} ($version), not $PINNED: its output would differ"
[ -f "$style" ] || { echo "FAIL: $style is missing"; exit 1; }

cd "$top" || exit 1
files=$(find lib include tools tests bench -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
[ -n "$files" ] || { echo "FAIL: no C sources found under $top"; exit 1; }

if [ "$apply" = 1 ]; then
    # shellcheck disable=SC2086 # the paths have no spaces (find above, in this tree)
    exec "$cf" -i --style="file:$style" $files
fi

tmp=${TMPDIR:-/tmp}/hoff-format.$$
trap 'rm -f "$tmp"' EXIT
trap 'exit 1' INT TERM
bad=
n=0
for f in $files; do
    n=$((n + 1))
    if ! "$cf" --style="file:$style" "$f" >"$tmp"; then
        echo "FAIL: $cf could not format $f"
        exit 1
    fi
    if ! cmp -s "$tmp" "$f"; then
        [ -n "$bad" ] || diff -u "$f" "$tmp" | sed -n '1,40p' # the first one's differences, to show the kind
        bad="$bad $f"
    fi
done
if [ -n "$bad" ]; then
    echo "FAIL: not formatted as .clang-format says (clang-format $major):"
    for f in $bad; do
        echo "  $f"
    done
    echo "fix: make format (in the build directory), or: cd $top && $cf -i --style=file FILE..."
    exit 1
fi
echo "ok: $n files formatted as .clang-format says ($cf, version $major)"
exit 0
