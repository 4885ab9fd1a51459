#!/bin/sh
# Prints the compiler flags of src/embed/local.c for the llama.cpp there is:
# the system's (pkg-config llama; its library's path is kept), else the copy
# scripts/install-llama.sh put in DIR (only its file name is kept: the
# program finds it beside itself at run time, see fs_find_beside), else
# nothing (a build without the local provider).
# Usage: scripts/llama-flags.sh DIR
set -eu
dir=${1:-build/llama}
if pkg-config --exists llama 2>/dev/null && [ -z "${CLAWMEM_FORCE_NPM_LLAMA:-}" ]; then
    echo "-DCM_HAVE_LLAMA $(pkg-config --cflags llama) -DCM_LLAMA_LIB=\"$(pkg-config --variable=libdir llama)/libllama.so\""
elif ls "$dir"/.installed-* >/dev/null 2>&1; then
    echo "-DCM_HAVE_LLAMA -I$dir/include -DCM_LLAMA_NAME=\"libllama.v0.4.0.so\""
fi
