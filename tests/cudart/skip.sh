#!/bin/sh
# skip.sh — stands in for the CUDA runtime double's tests (tests/cudart/) where configure found no
# CUDA headers (or was given --without-cuda): the double is compiled against the real cuda_runtime_api.h.
echo "SKIP: built without the CUDA toolkit (no cuda_runtime_api.h found, or --without-cuda): the CUDA runtime double is compiled against its headers"
exit 77
