#!/bin/sh
# layers.sh — the include-layer rule of lib/ (doc/design.md, "Map: the main types and the layers"): reads the layer
# table and the list of debts from doc/design.md itself, so the rule is written once, and fails (exit 1) on
#   - an include in lib/ of a header from a higher layer that is not a listed debt;
#   - a file in lib/ that is in no layer (a .c file beside its own .h takes the header's layer);
#   - a listed debt that no longer occurs (paid: remove it, so the list only shrinks);
#   - a table that names a file that does not exist;
#   - a residency file (lib/mem/res_*.c, residency.c) that calls a function of a residency file listed after it in
#     the order after '<!-- residency:' in doc/design.md, or one the order does not list: no cycle among them;
#   - a file below the top layer that names the context (struct hoff_ctx, or the public hoff_ctx) outside a
#     comment: the lower layers take their own state (mem/mem.h struct hoff__mem, the pipeline, a pool), so a
#     prototype on the context through a forward declaration, which the include check cannot see, fails here.
# Only "dir/file.h" includes of lib/ are checked; <system> headers, hoff.h and config.h are below every layer.
set -u
top=$(cd "${srcdir:-.}" && pwd)
doc=$top/doc/design.md
lib=$top/lib
[ -f "$doc" ] || { echo "FAIL: $doc is missing"; exit 1; }

tmp=${TMPDIR:-/tmp}/hoff-layers.$$
trap 'rm -f "$tmp".*' EXIT
trap 'exit 1' INT TERM

# The two fenced blocks after the <!-- layers: and <!-- debts: markers.
awk -v want=layers 'index($0, "<!-- " want ":") == 1 { m = 1; next }
    m == 1 && /^```/ { m = 2; next } m == 2 && /^```/ { exit } m == 2 { print }' "$doc" >"$tmp.layers"
awk -v want=debts 'index($0, "<!-- " want ":") == 1 { m = 1; next }
    m == 1 && /^```/ { m = 2; next } m == 2 && /^```/ { exit } m == 2 { print }' "$doc" >"$tmp.debts"
if [ ! -s "$tmp.layers" ]; then
    echo "FAIL: no layer table after '<!-- layers:' in $doc"
    exit 1
fi

# file -> layer, from the table: "N name: file ..."
awk '{ n = $1; for (i = 3; i <= NF; i++) print $i, n }' "$tmp.layers" >"$tmp.map"
# includes: "file header" for every "dir/x.h" include of every file in lib/
(cd "$lib" && for f in */*.c */*.h; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\/[a-z_0-9]*\.h\)".*/\1/p' "$f" |
        while read -r h; do echo "$f $h"; done
done) >"$tmp.inc"
(cd "$lib" && ls */*.c */*.h) >"$tmp.files"

# "file line" for every mention of hoff_ctx outside a comment ("/* ... */" on one line, or a comment's body line).
(cd "$lib" && for f in */*.c */*.h; do
    sed -e 's|/\*.*\*/||g' -e 's|^[[:space:]]*/\*.*||' -e 's|^[[:space:]]*\*.*||' -e 's|//.*||' "$f" |
        grep -n '\bhoff_ctx\b' | while IFS=: read -r n _; do echo "$f $n"; done
done) >"$tmp.ctx"

awk -v libdir="$lib" '
    FILENAME == ARGV[1] { layer[$1] = $2; listed[$1] = 1; if ($2 + 0 > top) top = $2 + 0; next }
    FILENAME == ARGV[2] { if ($2 == "->") { debt[$1 " " $3] = 1; why[$1 " " $3] = $0 } next }
    FILENAME == ARGV[3] { files[$1] = 1; next }
    FILENAME == ARGV[4] { inc[++n] = $0; next }
    FILENAME == ARGV[5] { ctxuse[++nc] = $0; next }
    END {
        bad = 0
        for (f in listed)
            if (!(f in files)) { printf "FAIL: the layer table names %s, which is not in lib/\n", f; bad = 1 }
        for (f in files) {
            l = f
            if (!(f in layer)) {
                h = f; sub(/\.c$/, ".h", h)
                if (f ~ /\.c$/ && (h in layer)) layer[f] = layer[h]
                else { printf "FAIL: lib/%s is in no layer: add it to the table in doc/design.md\n", f; bad = 1 }
            }
        }
        for (i = 1; i <= n; i++) {
            split(inc[i], p, " ")
            if (!(p[1] in layer)) continue
            if (!(p[2] in layer)) { printf "FAIL: lib/%s includes %s, which is in no layer\n", p[1], p[2]; bad = 1; continue }
            if (layer[p[2]] + 0 <= layer[p[1]] + 0) continue
            if ((p[1] " " p[2]) in debt) { used[p[1] " " p[2]] = 1; continue }
            printf "FAIL: lib/%s (layer %s) includes %s (layer %s): a layer may include only its own and lower layers\n",
                p[1], layer[p[1]], p[2], layer[p[2]]
            bad = 1
        }
        for (i = 1; i <= nc; i++) {
            split(ctxuse[i], p, " ")
            if (!(p[1] in layer) || layer[p[1]] + 0 >= top + 0) continue
            printf "FAIL: lib/%s:%s (layer %s) names the context (hoff_ctx): only the top layer may; take the layer'"'"'s own state (mem/mem.h, exec/executor.h)\n", p[1], p[2], layer[p[1]]
            bad = 1
        }
        for (d in debt)
            if (!(d in used)) { printf "FAIL: the debt \"%s\" no longer occurs (or is not upward): remove it from doc/design.md\n", why[d]; bad = 1 }
        nd = 0; for (d in used) nd++
        if (!bad) printf "layers: %d files; %d includes, %d of them listed debts\n", length(files), n, nd
        exit bad
    }' "$tmp.map" "$tmp.debts" "$tmp.files" "$tmp.inc" "$tmp.ctx" || exit 1
# The residency files, lowest first: each may call only the ones before it.
order=$(sed -n 's/^<!-- residency: \([^>]*\) -->$/\1/p' "$doc")
if [ -z "$order" ]; then
    echo "FAIL: no '<!-- residency: FILE ... -->' order in $doc"
    exit 1
fi
(cd "$lib/mem" && for f in res_*.c residency.c; do
    case " $order " in *" $f "*) ;; *) echo "FAIL: lib/mem/$f is not in the residency order of doc/design.md"; exit 1 ;; esac
done) || exit 1
i=0
for f in $order; do
    [ -f "$lib/mem/$f" ] || { echo "FAIL: the residency order names lib/mem/$f, which does not exist"; exit 1; }
    i=$((i + 1))
    # "rank file function" for every function the file defines at column 0
    sed -n 's/^[a-z][^(;]*[ *]\(hoff__[a-z_0-9]*\)(.*[^;]$/\1/p' "$lib/mem/$f" | while read -r fn; do echo "$i $f $fn"; done
done >"$tmp.rdefs"
bad=0
i=0
for f in $order; do
    i=$((i + 1))
    while read -r r df fn; do
        [ "$r" -gt "$i" ] || continue
        if sed -e 's|/\*.*\*/||g' -e 's|^[[:space:]]*\*.*||' "$lib/mem/$f" | grep -q "\b$fn("; then
            echo "FAIL: lib/mem/$f calls $fn of lib/mem/$df, which comes after it in the residency order (a cycle)"
            bad=1
        fi
    done <"$tmp.rdefs"
done
[ "$bad" = 0 ] || exit 1
echo "residency: $(echo $order | wc -w) files in order, $(wc -l <"$tmp.rdefs") functions, no upward call"
echo "PASS: layers.sh"
