#!/bin/sh
# sizes.sh — the size rule of the sources (issue 17; issue 28 lowered the function limit from 150 to 100): no file in
# lib/ or tools/ over 900 lines, no function over 100 lines, so that a newcomer can read a file and a function at
# once.  Fails (exit 1) on
#   - a file or a function over its limit that is not a listed debt (below);
#   - a listed debt that is paid (the file or function is within the limit now, or gone: remove it, so the list
#     only shrinks).
# A function starts at a line in column 0 that names it with its '(' (not a declaration: no ';' before its '{',
# which ends that line or one of the next 8) and ends at the next '}' in column 0: the rule the issue's review
# measured with.  Prints the longest file and function it saw.
set -u
top=$(cd "${srcdir:-.}" && pwd)
cd "$top" || exit 99
max_file=900
max_func=100

# The debts: "file" (a file over max_file lines) or "file:function" (a function over max_func), with why.
# Each line goes when its file or function is within the limit.
debts='
'

files=$(ls lib/*/*.c lib/*/*.h tools/*.c tools/*/*.c tools/*/*.h 2>/dev/null)
[ -n "$files" ] || { echo "FAIL: no sources under $top/lib and $top/tools"; exit 1; }

# "lines file" for every file, "lines file:function" for every function.
measured=$(
    for f in $files; do
        echo "$(wc -l <"$f") $f"
    done
    awk '
        FNR == 1 { name = ""; open = 0; pending = "" }
        open && /^}/ { print FNR - start + 1, FILENAME ":" name; open = 0; name = ""; next }
        open { next }
        pending != "" {
            if ($0 ~ /;[[:space:]]*$/ && $0 !~ /\{[[:space:]]*$/) { pending = ""; next }
            if ($0 ~ /\{[[:space:]]*$/ && $0 !~ /= *\{[[:space:]]*$/) { open = 1; name = pending; pending = ""; next }
            if (FNR - start >= 8) pending = ""
            next
        }
        /^[A-Za-z_]/ && /\(/ && $0 !~ /;[[:space:]]*$/ {
            head = $0; sub(/\(.*/, "", head)
            if (head ~ /=/) next
            n = split(head, w, /[^A-Za-z0-9_]+/)
            fn = w[n]; if (fn == "" && n > 1) fn = w[n - 1]
            start = FNR
            if ($0 ~ /\{[[:space:]]*$/) { open = 1; name = fn } else pending = fn
        }
    ' $files
)

printf '%s\n' "$measured" | awk -v mf="$max_file" -v mfn="$max_func" -v debts="$debts" '
    BEGIN {
        nd = split(debts, d, "\n")
        for (i = 1; i <= nd; i++) { split(d[i], w, " "); if (w[1] != "") { debt[w[1]] = 1; seen[w[1]] = 0 } }
    }
    {
        n = $1; what = $2
        isfn = index(what, ":") > 0
        if (!isfn && n > bigf) { bigf = n; bigfw = what }
        if (isfn && n > bigfn) { bigfn = n; bigfnw = what }
        if (what in debt) seen[what] = n
        if ((!isfn && n > mf) || (isfn && n > mfn)) {
            if (what in debt) next
            printf "FAIL: %s is %d lines, over the limit of %d: split it (one concept a file, phases a function)\n",
                   what, n, isfn ? mfn : mf
            bad = 1
        }
    }
    END {
        for (k in debt) {
            lim = index(k, ":") ? mfn : mf
            if (seen[k] <= lim) {
                printf "FAIL: the debt %s is paid (%d lines, limit %d): remove it from tests/sizes.sh\n", k, seen[k], lim
                bad = 1
            }
        }
        printf "longest file: %s (%d lines); longest function: %s (%d lines)\n", bigfw, bigf, bigfnw, bigfn
        exit bad
    }'
