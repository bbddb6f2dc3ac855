#!/usr/bin/env bash
# Regenerate the Python gRPC stubs (and mypy stubs) from proto/ into splitsched/v1/, and
# descriptors.binpb: the same files as a FileDescriptorSet with their comments
# (--include_source_info), which server reflection serves so that `grpcurl describe` shows
# the contract's documentation (splitsched/runtime/reflection.py).
# The only way stubs are made; tests/unit/v1/test_proto_stubs.py checks the committed ones
# match what this produces. Inputs are pinned by pyproject (grpcio-tools, mypy-protobuf).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${1:-.}
mkdir -p "$OUT/splitsched/v1"
"$PY" -m grpc_tools.protoc -Iproto \
  --python_out="$OUT" --grpc_python_out="$OUT" \
  --plugin=protoc-gen-mypy="$(dirname "$PY")/protoc-gen-mypy" \
  --plugin=protoc-gen-mypy_grpc="$(dirname "$PY")/protoc-gen-mypy_grpc" \
  --mypy_out="$OUT" --mypy_grpc_out="$OUT" \
  --descriptor_set_out="$OUT/splitsched/v1/descriptors.binpb" --include_source_info \
  proto/splitsched/v1/*.proto
touch "$OUT/splitsched/v1/__init__.py" "$OUT/splitsched/v1/py.typed"
