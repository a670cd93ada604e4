# sim_setup.sh — sourced by the python -m hoff --sim tests (sim.sh, sim_train.sh) in the build directory, with
# $top the source tree: skips (77) without the preload, with a sanitized preload or libhoff (an LD_PRELOAD
# library cannot link a sanitizer runtime), or without a python3 that has torch ($py); then points the package
# at this build's libhoff.
if [ ! -f .libs/libhoff-sim.so ]; then
    echo "SKIP: .libs/libhoff-sim.so was not built"
    exit 77
fi
for l in .libs/libhoff-sim.so .libs/libhoff.so; do # the preload, and the libhoff it links
    if command -v readelf >/dev/null 2>&1 && readelf -d "$l" | grep -q 'lib[a-z]*san'; then
        echo "SKIP: $l is linked against a sanitizer runtime; an LD_PRELOAD library (and what it links) cannot be"
        exit 77
    fi
done
. "$top/tests/torch_python.sh"
HOFF_LIBRARY=$(pwd)/.libs/libhoff.so
PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
export HOFF_LIBRARY PYTHONPATH
unset LD_PRELOAD
