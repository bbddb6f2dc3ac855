#!/usr/bin/env bash
# Regenerate the Go stubs of the splitsched.v1 Scheduler API (scheduler.proto and the
# types.proto it imports) into gen/splitschedv1/ of this module, or of the module root
# given as $1 (tests/e2e/test_go_client.py regenerates into a temporary dir and compares).
#
# protoc is the one bundled with grpcio-tools in the repo's venv (python -m
# grpc_tools.protoc); the Go plugins are pinned and installed once with `go install` into
# ~/.cache/splitsched/go-bin/<name>-<version>/ (override with SPLITSCHED_GO_BIN).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE}
PY=${PY:-$ROOT/.venv/bin/python}
GO=${GO:-go}
BIN_ROOT=${SPLITSCHED_GO_BIN:-$HOME/.cache/splitsched/go-bin}

PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
MODULE=github.com/splitsched/splitsched/examples/go-client
PACKAGE=$MODULE/gen/splitschedv1

plugin() {  # plugin <package@version> -> path of the installed binary
  local pkg=$1 name version dir
  name=$(basename "${pkg%@*}")
  version=${pkg#*@}
  dir=$BIN_ROOT/$name-$version
  if [ ! -x "$dir/$name" ]; then
    echo "installing $pkg into $dir" >&2
    mkdir -p "$dir"
    GOBIN=$dir GOFLAGS=-mod=mod "$GO" install "$pkg" >&2
  fi
  echo "$dir/$name"
}

GEN_GO=$(plugin "$PROTOC_GEN_GO")
GEN_GO_GRPC=$(plugin "$PROTOC_GEN_GO_GRPC")
MAP="Msplitsched/v1/types.proto=$PACKAGE,Msplitsched/v1/scheduler.proto=$PACKAGE"
mkdir -p "$OUT"
cd "$ROOT"
"$PY" -m grpc_tools.protoc -Iproto \
  --plugin=protoc-gen-go="$GEN_GO" --plugin=protoc-gen-go-grpc="$GEN_GO_GRPC" \
  --go_out="$OUT" --go_opt="module=$MODULE,$MAP" \
  --go-grpc_out="$OUT" --go-grpc_opt="module=$MODULE,$MAP" \
  proto/splitsched/v1/scheduler.proto proto/splitsched/v1/types.proto
