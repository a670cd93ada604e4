#!/usr/bin/env bash
# run.sh — build the cuda backend's GPU suite (tests/gpu/test_cuda) in a temp dir and run it, where there is a
# GPU and the CUDA toolkit but maybe no autotools, liburing, hwloc or CUnit (configure if present, else gcc).
# Usage: tests/gpu/run.sh   Env: CUDA_HOME (default /usr/local/cuda), OUT (gets gpu.json), HOFF_JOBS,
# HOFF_GPU_DIRECT=1 (skip configure), HOFF_GPU_TIMEOUT (s, default 280), KEEP=1 (keep the build dir).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
jobs=${HOFF_JOBS:-$(nproc 2>/dev/null || echo 2)}
limit=${HOFF_GPU_TIMEOUT:-280}

if [ ! -f "$CUDA/include/cuda_runtime_api.h" ]; then
    echo "run.sh: no CUDA toolkit at $CUDA (cuda_runtime_api.h missing); set CUDA_HOME" >&2
    exit 1
fi
cudalib=
for l in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do
    if [ -e "$CUDA/$l/libcudart.so" ]; then cudalib="$CUDA/$l"; break; fi
done
if [ -z "$cudalib" ]; then
    echo "run.sh: no libcudart.so under $CUDA" >&2
    exit 1
fi

build=$(mktemp -d "${TMPDIR:-/tmp}/hoff-gpu.XXXXXX")
# shellcheck disable=SC2317  # called by the trap
cleanup() { if [ "${KEEP:-0}" != 1 ]; then rm -rf "$build"; else echo "run.sh: build kept in $build"; fi; }
trap cleanup EXIT
start=$(date +%s)

# The .c files of libhoff_internal_la_SOURCES in Makefile.am, with only the
# HAVE_CUDA conditional true (the GPU machine has no liburing/hwloc/CUnit).
lib_sources() {
    awk '
    function active(   i) { for (i = 1; i <= depth; i++) if (!on[i]) return 0; return 1 }
    /^if[ \t]/ { c = $2; neg = (c ~ /^!/); sub(/^!/, "", c); depth++;
                 on[depth] = ((c == "HAVE_CUDA") != neg); next }
    /^else([ \t]|$)/ { on[depth] = !on[depth]; next }
    /^endif([ \t]|$)/ { depth--; next }
    {
        line = $0
        if (!cont && line ~ /^libhoff_internal_la_SOURCES[ \t]*\+?=/) { cont = 1; sub(/^[^=]*=/, "", line) }
        else if (!cont) next
        more = (line ~ /\\[ \t]*$/)
        sub(/\\[ \t]*$/, "", line)
        if (active()) { n = split(line, w, /[ \t]+/); for (i = 1; i <= n; i++) if (w[i] ~ /\.c$/) print w[i] }
        cont = more
    }' "$top/Makefile.am"
}

bin=
if [ "${HOFF_GPU_DIRECT:-0}" != 1 ] && [ -x "$top/configure" ] && [ ! -f "$top/config.status" ]; then
    # An unpacked `make dist` tarball (or a tree with a generated configure):
    # build out of tree so the source stays clean.
    echo "run.sh: configure + make in $build"
    (cd "$build" &&
        "$top/configure" -q --with-cuda="$CUDA" --without-liburing --without-hwloc --without-cunit &&
        make -j"$jobs" tests/gpu/test_cuda)
    bin="$build/tests/gpu/test_cuda"
else
    # A git checkout without configure (or a tree already configured some
    # other way): compile directly.
    echo "run.sh: direct build in $build (no configure, or the tree is already configured)"
    hdr="$CUDA/include/cuda_runtime_api.h"
    d_discard=0; d_prefetch=0
    grep -q 'cudaMemDiscardBatchAsync[ \t]*(' "$hdr" && d_discard=1
    grep -q 'cudaMemPrefetchBatchAsync[ \t]*(' "$hdr" && d_prefetch=1
    version=$(sed -n 's/^AC_INIT(\[hoff\], *\[\([^]]*\)\].*/\1/p' "$top/configure.ac" 2>/dev/null || true)
    version=${version:-0.0.0}
    cat > "$build/config.h" <<EOF
/* config.h written by tests/gpu/run.sh */
#define HAVE_CUDA 1
#define HAVE_DECL_CUDAMEMDISCARDBATCHASYNC $d_discard
#define HAVE_DECL_CUDAMEMPREFETCHBATCHASYNC $d_prefetch
#define PACKAGE "hoff"
#define PACKAGE_NAME "hoff"
#define PACKAGE_TARNAME "hoff"
#define PACKAGE_VERSION "$version"
#define PACKAGE_STRING "hoff $version"
#define PACKAGE_BUGREPORT ""
#define PACKAGE_URL ""
#define VERSION "$version"
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_DLFCN_H 1
EOF
    srcs=()
    if [ -f "$top/Makefile.am" ]; then
        while IFS= read -r s; do
            [ -f "$top/$s" ] && srcs+=("$top/$s")
        done < <(lib_sources)
    fi
    if [ "${#srcs[@]}" -eq 0 ]; then
        while IFS= read -r s; do srcs+=("$s"); done < <(find "$top/lib" -name '*.c' | sort)
    fi
    # A generated makefile: parallel, and it stops at the first error.
    mk="$build/Makefile"
    {
        echo "CFLAGS = -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -pthread \\"
        echo "	-I$top/include -I$top/lib -I$build -I$CUDA/include"
        echo "LIBS = -L$cudalib -Wl,-rpath,$cudalib -lcudart -pthread -lm -lrt -ldl"
        objs=
        i=0
        for s in "${srcs[@]}" "$top/tests/gpu/test_cuda.c"; do
            o="$i-$(basename "${s%.c}").o"
            i=$((i + 1))
            objs="$objs $o"
            # shellcheck disable=SC2016  # $(CFLAGS) and $@ are make's
            printf '%s: %s %s/config.h\n\t@echo "  CC   %s"\n\t@gcc $(CFLAGS) -c -o $@ %s\n' \
                "$o" "$s" "$build" "${s#"$top"/}" "$s"
        done
        # shellcheck disable=SC2016
        printf 'test_cuda:%s\n\t@echo "  CCLD tests/gpu/test_cuda"\n\t@gcc -o $@ $^ $(LIBS)\n' "$objs"
    } > "$mk"
    make -s -C "$build" -f "$mk" -j"$jobs" test_cuda
    bin="$build/test_cuda"
fi
echo "run.sh: built in $(( $(date +%s) - start )) s; running $bin"

[ -n "${OUT:-}" ] && rm -f "$OUT/gpu.json"
set +e
if command -v timeout >/dev/null 2>&1; then
    timeout -k 10 "$limit" "$bin"
else
    "$bin"
fi
rc=$?
set -e
case $rc in
0) echo "run.sh: test_cuda passed" ;;
77) echo "run.sh: test_cuda skipped (no usable GPU)" ;;
124) echo "run.sh: test_cuda timed out after $limit s" ;;
*) echo "run.sh: test_cuda failed (exit $rc)" ;;
esac
if [ -n "${OUT:-}" ] && [ -f "$OUT/gpu.json" ]; then
    echo "run.sh: results in $OUT/gpu.json"
elif [ -n "${OUT:-}" ]; then
    echo "run.sh: no gpu.json written (the suite skipped or stopped early)"
else
    echo "run.sh: no gpu.json (set OUT=dir to get one)"
fi
echo "run.sh: total $(( $(date +%s) - start )) s"
exit "$rc"
