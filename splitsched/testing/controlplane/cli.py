"""``python -m splitsched.testing.controlplane up|down|status`` (``make cluster-up``,
``cluster-down``, ``cluster-status``): the control plane from a shell."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from splitsched.launch.interrupts import stop_like_ctrl_c
from splitsched.testing.controlplane.plane import ControlPlane
from splitsched.testing.controlplane.state import ControlPlaneError


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``up`` | ``down`` | ``status``."""
    args = _parser().parse_args(argv)
    stop_like_ctrl_c()  # SIGTERM during `up` stops what it started (ControlPlane.up)
    cp = ControlPlane(args.state_dir)
    if args.verb == "up":
        return _up(cp)
    if args.verb == "down":
        stopped = cp.down()
        print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
        return 0
    return _status(cp, check=args.check)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m splitsched.testing.controlplane",
        description="Run the local control plane (etcd, kube-apiserver, kwok).",
    )
    parser.add_argument("verb", choices=["up", "down", "status"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="default: $SPLITSCHED_CLUSTER_DIR or <repo>/.local-cluster",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="status: exit 1 unless every component runs and /readyz is ok",
    )
    return parser


def _up(cp: ControlPlane) -> int:
    if cp.load_state() is not None and cp.is_healthy():
        print(f"control plane already running at {cp.server_url}")
    else:
        start = time.monotonic()
        try:
            cp.up()
        except ControlPlaneError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("interrupted: stopped what had started", file=sys.stderr)
            return 130
        print(f"control plane up at {cp.server_url} in {time.monotonic() - start:.1f}s")
    print(f"  kubeconfig: {cp.kubeconfig_path}")
    print(f"  export KUBECONFIG={cp.kubeconfig_path}")
    print(f"  logs:       {cp.state_dir / 'logs'}")
    return 0


def _status(cp: ControlPlane, *, check: bool) -> int:
    info = cp.status()
    print(f"state dir:  {info['state_dir']}")
    for component, pid in info["components"].items():
        print(f"  {component:24s} {'running (pid ' + str(pid) + ')' if pid else 'stopped'}")
    if info["server_url"]:
        print(f"server:     {info['server_url']} ({'ready' if info['ready'] else 'NOT ready'})")
        print(f"kubeconfig: {info['kubeconfig']}")
    print("healthy" if info["healthy"] else "not running (or not healthy)")
    return 0 if info["healthy"] or not check else 1
