# torch_python.sh — sourced by the shell tests that run PyTorch: sets $py to the first of $PYTHON, python3,
# /usr/bin/python3 that imports torch, or skips the test (exit 77) with the reason.
py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    echo "SKIP: no python3 with torch (Debian: apt-get install python3-torch)"
    exit 77
fi
