#!/usr/bin/env bash
# Build splitsched's images with podman, without Docker and without any registry, and
# optionally import them into a containerd (the real-node tier's, or yours).
#
#   scripts/build-images.sh                       # base, pause, watcher, scheduler, binder
#   scripts/build-images.sh --containerd-address /run/containerd/containerd.sock
#
# Images (all under localhost/, which is what the chart renders with
# global.image.registry=localhost):
#   localhost/splitsched-base:bookworm      python3 on Debian bookworm, made by mmdebstrap
#                                           from the host's own apt mirror (nothing pulled)
#   localhost/splitsched-{watcher,scheduler,binder}:TAG
#                                           the Dockerfile's targets on that base
#                                           (TAG: the chart's appVersion by default)
#   localhost/splitsched-pause:1.0          the pod sandbox image: deploy/pause/pause.c,
#                                           static, FROM scratch
#
# Prints one line per image (its name) on stdout; the time of each phase on stderr.
# Idempotent: the base is made only when missing (or with --rebuild-base), and podman's
# layer cache makes a second run of the other builds quick.
#
# Needs: podman, runc, and for the base mmdebstrap, for the pause image gcc with a static
# libc (libc6-dev), for the import ctr. It installs nothing: it says what is missing.
#
# The host's CA bundle is mounted read-only into the build's RUN steps, over the image's
# own bundle, and pip is pointed at it (PIP_CERT), so builds work behind a proxy with its
# own CA; no layer keeps it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE_IMAGE=localhost/splitsched-base:bookworm
PAUSE_IMAGE=localhost/splitsched-pause:1.0
SERVICES=(watcher scheduler binder)
BASE_PACKAGES=python3,python3-venv,python3-pip,python-is-python3,passwd,ca-certificates
# Where apt's sources are read from (a test points this at a fake tree).
APT_ETC=${SPLITSCHED_APT_ETC:-/etc/apt}
CA_BUNDLE=${SPLITSCHED_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
# The path of Debian's (and python slim's) CA bundle inside the images.
IMAGE_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# podman's default rlimits for a container (nofile/nproc 1048576) are above this VM's hard
# limits, and raising them needs CAP_SYS_RESOURCE: the check runs ask for modest ones.
RUN_LIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

usage() {
  cat <<'EOF'
usage: scripts/build-images.sh [options]

  --tag T                      tag of the three service images (default: the chart's appVersion)
  --only base|pause|services   build only that part (services makes the base when missing)
  --rebuild-base               make the base image again even if it exists
  --containerd-address SOCK    then import the pause and service images into that
                               containerd's k8s.io namespace (podman save | ctr import)
  --quiet                      hide the build tools' output (shown on failure)
  --print-apt-sources          print the apt lines the base would be made from, and exit
  -h, --help                   this text
EOF
}

die() {
  echo "build-images: error: $*" >&2
  exit 1
}

TAG=""
ONLY=all
SOCK=""
QUIET=0
REBUILD_BASE=0
PRINT_SOURCES=0
while (($#)); do
  case $1 in
    --tag) TAG=${2:?--tag needs a value}; shift 2 ;;
    --tag=*) TAG=${1#*=}; shift ;;
    --only) ONLY=${2:?--only needs a value}; shift 2 ;;
    --only=*) ONLY=${1#*=}; shift ;;
    --containerd-address) SOCK=${2:?--containerd-address needs a value}; shift 2 ;;
    --containerd-address=*) SOCK=${1#*=}; shift ;;
    --rebuild-base) REBUILD_BASE=1; shift ;;
    --quiet | -q) QUIET=1; shift ;;
    --print-apt-sources) PRINT_SOURCES=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
case $ONLY in
  all | base | pause | services) ;;
  *) die "--only takes base, pause or services, not '$ONLY'" ;;
esac
[[ -z $SOCK || $ONLY != base ]] || die "--containerd-address: the base image is not imported; use --only pause, services or neither"

# ---- apt sources: the mirror comes from the host, never from this repository --------------

# Print "deb URI SUITE main" for each bookworm suite (bookworm, bookworm-updates,
# bookworm-security) that the host's apt sources list: deb822 *.sources files
# (Types/URIs/Suites/Enabled fields, folded lines, comments) and one-line sources.list
# entries, options in brackets included.
apt_sources() {
  local files=()
  [[ -f $APT_ETC/sources.list ]] && files+=("$APT_ETC/sources.list")
  local f
  for f in "$APT_ETC"/sources.list.d/*.list "$APT_ETC"/sources.list.d/*.sources; do
    [[ -f $f ]] && files+=("$f")
  done
  ((${#files[@]})) || return 0
  awk '
    function wanted(suite) {
      return suite == "bookworm" || suite == "bookworm-updates" || suite == "bookworm-security"
    }
    function emit(uri, suite, line) {
      sub(/\/+$/, "", uri)
      line = "deb " uri " " suite " main"
      if (wanted(suite) && !(line in seen)) { seen[line] = 1; print line }
    }
    function flush(   n, u, s, i, j, uris, suites, types, t, isdeb) {
      if (tolower(f["enabled"]) != "no") {
        n = split(f["types"], types, /[ \t]+/)
        isdeb = 0
        for (t = 1; t <= n; t++) if (types[t] == "deb") isdeb = 1
        if (isdeb) {
          u = split(f["uris"], uris, /[ \t]+/)
          s = split(f["suites"], suites, /[ \t]+/)
          for (j = 1; j <= s; j++)
            for (i = 1; i <= u; i++) if (uris[i] != "") emit(uris[i], suites[j])
        }
      }
      delete f
      last = ""
    }
    FNR == 1 { if (deb822) flush(); deb822 = (FILENAME ~ /\.sources$/) }
    deb822 {
      if ($0 ~ /^[ \t]*#/) next
      if ($0 ~ /^[ \t]*$/) { flush(); next }
      if ($0 ~ /^[ \t]/ && last != "") { f[last] = f[last] " " $0; next }
      key = tolower($0); sub(/:.*/, "", key)
      value = $0; sub(/^[^:]*:[ \t]*/, "", value)
      f[key] = value; last = key
      next
    }
    {
      line = $0
      sub(/#.*/, "", line)
      n = split(line, w, /[ \t]+/)
      i = 1
      if (w[i] == "") i++
      if (w[i] != "deb") next
      i++
      if (w[i] ~ /^\[/) { while (i <= n && w[i] !~ /\]$/) i++; i++ }
      if (i + 1 <= n) emit(w[i], w[i + 1])
    }
    END { if (deb822) flush() }
  ' "${files[@]}"
}

if ((PRINT_SOURCES)); then
  apt_sources
  exit 0
fi

# ---- helpers --------------------------------------------------------------------------------

need() {
  local tool=$1 why=$2 package=$3
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found ($why); install it: apt-get install $package"
}

LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/splitsched-build-images.XXXXXX")
trap 'rm -rf "$LOG_DIR"' EXIT

# run LOGNAME CMD...: with --quiet, the output goes to a log shown only on failure.
run() {
  local log=$LOG_DIR/$1.log
  shift
  if ((QUIET)); then
    if ! "$@" >"$log" 2>&1; then
      tail -n 40 "$log" >&2
      return 1
    fi
  else
    "$@" >&2
  fi
}

now() { date +%s.%N; }
phase_done() { # NAME START NOTE
  awk -v n="$1" -v s="$2" -v e="$(now)" -v note="$3" \
    'BEGIN { printf "build-images: %-10s %6.1fs  %s\n", n, e - s, note }' >&2
}

image_exists() { podman image exists "$1"; }

describe() { # IMAGE -> "ID SIZE" for the summary line
  podman image inspect --format '{{.Id}} {{.Size}}' "$1" |
    awk '{ printf "%s %.0fMB", substr($1, 1, 12), $2 / 1e6 }'
}

chart_app_version() {
  local chart=$ROOT/helm/splitsched/Chart.yaml v
  v=$(sed -n 's/^appVersion:[[:space:]]*["'\'']\{0,1\}\([^"'\'' ]*\).*/\1/p' "$chart")
  [[ -n $v ]] || die "no appVersion in $chart"
  echo "$v"
}

BUILT=()

# ---- the phases ------------------------------------------------------------------------------

# mmdebstrap_base APT_LINE...: the base's root file system as a tar stream on stdout.
mmdebstrap_base() {
  # merged-usr hook: /usr merged without the usrmerge package and its perl dependencies.
  # No docs, man pages or translations; no apt lists or caches; no host resolv.conf/hostname.
  # shellcheck disable=SC2016 # "$1" is the chroot, expanded by mmdebstrap's hook shell
  mmdebstrap --variant=minbase --include="$BASE_PACKAGES" --format=tar \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    --customize-hook=': > "$1"/etc/resolv.conf; : > "$1"/etc/hostname' \
    bookworm - "$@"
}

base_failed() {
  podman rmi --force "$BASE_IMAGE" >/dev/null 2>&1 || true
  die "$BASE_IMAGE: $1 failed"
}

build_base() {
  local start note
  start=$(now)
  if ((REBUILD_BASE == 0)) && image_exists "$BASE_IMAGE"; then
    note=cached
  else
    need mmdebstrap "it makes the base image" mmdebstrap
    local sources=()
    mapfile -t sources < <(apt_sources)
    [[ " ${sources[*]-} " == *" bookworm main "* ]] ||
      die "no 'bookworm' suite in the apt sources under $APT_ETC (sources.list or sources.list.d/*.sources): the base is made from the host's Debian mirror"
    # The tar stream goes straight into podman import; a failed or partial base is removed,
    # so the next run does not take it for a cached one.
    if ((QUIET)); then
      mmdebstrap_base "${sources[@]}" 2>"$LOG_DIR/base.log" |
        podman import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$BASE_IMAGE" \
          >>"$LOG_DIR/base.log" 2>&1 || { tail -n 40 "$LOG_DIR/base.log" >&2; base_failed "making it"; }
    else
      mmdebstrap_base "${sources[@]}" |
        podman import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$BASE_IMAGE" >&2 ||
        base_failed "making it"
    fi
    run base-check podman run --rm --runtime runc "${RUN_LIMITS[@]}" --network none "$BASE_IMAGE" \
      python -c 'import ensurepip, ssl, venv' || base_failed "python (with ssl and venv) in it"
    note="built from: ${sources[*]}"
  fi
  phase_done base "$start" "$note"
  echo "$BASE_IMAGE"
}

build_service() {
  local service=$1 image=localhost/splitsched-$1:$TAG start uid
  start=$(now)
  run "$service" podman build --runtime runc --format docker --network host --pull=never \
    --layers --target "$service" -t "$image" \
    --build-arg PYTHON_IMAGE="$BASE_IMAGE" \
    --build-arg PIP_CERT="$IMAGE_CA_BUNDLE" \
    -v "$CA_BUNDLE:$IMAGE_CA_BUNDLE:ro" \
    "$ROOT" || die "podman build of $service failed"
  run "$service-check" podman run --rm --runtime runc --no-healthcheck "${RUN_LIMITS[@]}" \
    --network none "$image" --help || die "$image --help failed"
  uid=$(podman run --rm --runtime runc --no-healthcheck "${RUN_LIMITS[@]}" --network none \
    --entrypoint python "$image" -c 'import os; print(os.getuid(), os.getgid())')
  [[ $uid == "10001 10001" ]] || die "$image runs as uid/gid $uid, not 10001 10001"
  phase_done "$service" "$start" "$(describe "$image")"
  echo "$image"
  BUILT+=("$image")
}

build_pause() {
  local start context id code
  start=$(now)
  need gcc "it compiles deploy/pause/pause.c" gcc
  context=$LOG_DIR/pause-context
  mkdir -p "$context"
  gcc -static -Os -s -Wall -Wextra -Werror -o "$context/pause" "$ROOT/deploy/pause/pause.c" ||
    die "gcc -static failed (a static libc is in libc6-dev)"
  run pause podman build --runtime runc --format docker --network none --pull=never --layers \
    -f "$ROOT/deploy/pause/Containerfile" -t "$PAUSE_IMAGE" "$context" ||
    die "podman build of the pause image failed"
  # It must run, sleep, and exit 0 on SIGTERM.
  id=$(podman run -d --runtime runc "${RUN_LIMITS[@]}" --network none "$PAUSE_IMAGE")
  sleep 0.5
  podman stop -t 5 "$id" >/dev/null
  code=$(podman inspect --format '{{.State.ExitCode}}' "$id")
  podman rm "$id" >/dev/null
  [[ $code == 0 ]] || die "$PAUSE_IMAGE exited $code on SIGTERM, not 0"
  phase_done pause "$start" "$(describe "$PAUSE_IMAGE")"
  echo "$PAUSE_IMAGE"
  BUILT+=("$PAUSE_IMAGE")
}

import_containerd() {
  local start missing=() image names
  start=$(now)
  need ctr "it imports into containerd" containerd
  [[ -S $SOCK ]] || die "no containerd socket at $SOCK"
  # -m: one archive holding several images; docker-archive keeps each image's name.
  # ctr unpacks into the default snapshotter ($CONTAINERD_SNAPSHOTTER, else overlayfs),
  # which is the CRI plugin's default.
  podman save -m --format docker-archive "${BUILT[@]}" |
    run import ctr --address "$SOCK" -n k8s.io images import - ||
    die "ctr images import into $SOCK failed"
  names=$(ctr --address "$SOCK" -n k8s.io images ls -q)
  for image in "${BUILT[@]}"; do
    grep -qxF "$image" <<<"$names" || missing+=("$image")
  done
  ((${#missing[@]} == 0)) || die "not in containerd (k8s.io) after the import: ${missing[*]}"
  phase_done import "$start" "${#BUILT[@]} images into $SOCK (namespace k8s.io)"
}

# ---- main ------------------------------------------------------------------------------------

need podman "it builds the images" podman
need runc "podman runs the builds with it" runc
[[ -n $TAG ]] || TAG=$(chart_app_version)
if [[ $ONLY == all || $ONLY == services ]]; then
  [[ -r $CA_BUNDLE ]] || die "no CA bundle at $CA_BUNDLE (set SPLITSCHED_CA_BUNDLE)"
fi

case $ONLY in
  base) build_base ;;
  pause) build_pause ;;
  services)
    build_base
    for s in "${SERVICES[@]}"; do build_service "$s"; done
    ;;
  all)
    build_base
    build_pause
    for s in "${SERVICES[@]}"; do build_service "$s"; done
    ;;
esac

if [[ -n $SOCK ]]; then
  import_containerd
fi
