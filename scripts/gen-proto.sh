#!/usr/bin/env bash
# Regenerate the Python gRPC stubs (and mypy stubs) from proto/ into splitsched/v1/.
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
  proto/splitsched/v1/*.proto
touch "$OUT/splitsched/v1/__init__.py" "$OUT/splitsched/v1/py.typed"
