#!/bin/sh
# Builds counter.wasm beside manifest.json (a WASI reactor; the module is not committed).
set -eu
cd "$(dirname "$0")"
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o counter.wasm .
echo "built $(pwd)/counter.wasm ($(wc -c < counter.wasm) bytes)"
