"""`splitsched up`, step by step: resolve the options, check the identity's rights (and
stop there, printing the RBAC to grant, when some are missing), take the state dir, make
the certificates, start the services, print how to use them, then wait until Ctrl-C,
SIGTERM or a service's death, and stop every process it started.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from splitsched.apiclient import EXIT_BAD_INPUT, EXIT_DENIED, EXIT_OK, EXIT_UNAVAILABLE
from splitsched.launch import certs, processes
from splitsched.launch.interrupts import stop_like_ctrl_c
from splitsched.launch.processes import Service
from splitsched.up import access, cluster, hints, plan
from splitsched.up.cluster import UpError

#: A service died while the others ran.
EXIT_SERVICE_FAILED = 1
#: Interrupted (Ctrl-C, SIGTERM) before everything was ready.
EXIT_INTERRUPTED = 130
#: Certificates are made anew at each start; they need only outlive one run.
CERT_DAYS = 365


def run(args: argparse.Namespace) -> int:
    """The `up` subcommand (see `splitsched.up`)."""
    try:
        opts = options(args)
        target = cluster.connect(opts.kubeconfig, opts.context)
        user = cluster.who_am_i(target)
        where = f"{target.server} (context {target.context})"
        denied = cluster.missing(target, access.needed())
        if denied:  # stdout holds the RBAC only, for `> file` or `| kubectl apply -f -`
            print(access.report(denied, username=user, cluster=where), file=sys.stderr)
            print(access.grant_yaml(user), end="")
            return EXIT_DENIED
        print(f"cluster {where} as {user or 'an unnamed user'}: may do all it needs")
        with _locked(plan.Layout(opts.state_dir).lock):
            return _serve(opts, context=target.context)
    except UpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


def options(args: argparse.Namespace) -> plan.Options:
    """The resolved options; UpError (bad input) naming the flag."""
    if args.binders < 1:
        raise UpError("--binders must be at least 1", EXIT_BAD_INPUT)
    profiles, names = _profiles(args.config)
    return plan.Options(
        kubeconfig=_kubeconfig(args.kubeconfig),
        context=args.context or None,
        binders=args.binders,
        profiles=profiles,
        scheduler_names=names,
        listen=args.listen,
        state_dir=Path(args.state_dir or plan.default_state_dir()).absolute(),
        tls=not args.insecure,
    )


def _kubeconfig(flag: str | None) -> Path:
    """--kubeconfig, else $KUBECONFIG (one file), else ~/.kube/config, as kubectl reads."""
    chosen = flag or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    if not flag and os.pathsep in chosen:
        raise UpError(
            f"KUBECONFIG lists several files ({chosen}): name one with --kubeconfig",
            EXIT_BAD_INPUT,
        )
    return Path(chosen).expanduser().absolute()


def _profiles(config: str | None) -> tuple[Path | None, tuple[str, ...]]:
    """The scheduler's KubeSchedulerConfiguration, checked now (its notes on fields that
    do not apply here printed once), and the schedulerNames it serves."""
    if not config:
        return None, ()
    from splitsched.core import profiles  # numpy and the plugins: only when asked

    path = Path(config).absolute()
    try:
        loaded = profiles.load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UpError(f"--config {config}: {exc.strerror}", EXIT_BAD_INPUT) from None
    except profiles.ProfileError as exc:
        raise UpError(f"--config {config}: {exc}", EXIT_BAD_INPUT) from None
    for note in loaded.notes:
        print(f"note: --config {config}: {note}", file=sys.stderr)
    return path, tuple(loaded.profiles)


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Hold the state dir for this run: two `up`s sharing one would overwrite each
    other's certificates and logs."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise UpError(
                f"another splitsched up (pid {holder}) uses {lock_path.parent}; stop it or "
                "give --state-dir",
                EXIT_BAD_INPUT,
            ) from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield


def _check_listen(listen: str) -> None:
    """The Scheduler API's address is free: a clear message now rather than the
    scheduler's log later."""
    host, _, port = listen.rpartition(":")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), int(port)))
        except (OSError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise UpError(
                f"--listen {listen}: {why} (another splitsched up or the demo? pick "
                "another address)",
                EXIT_BAD_INPUT,
            ) from None


def _serve(opts: plan.Options, *, context: str) -> int:
    """Start everything, print how to use it, wait; stop everything whatever happens."""
    stop_like_ctrl_c()  # from here on SIGTERM, too, runs the clean-up below
    _check_listen(opts.listen)
    layout = plan.Layout(opts.state_dir)
    layout.services_file.unlink(missing_ok=True)  # a crashed run's: never read as this one's
    if opts.tls:
        certs.write_stack_certs(layout.tls_dir, common_name="splitsched up CA", days=CERT_DAYS)
    services = plan.services(opts)
    print(f"starting the watcher, {opts.binders} binder(s) and the scheduler...", flush=True)
    ready = False
    try:
        started = time.monotonic()
        for svc in services:
            processes.start(svc, new_session=True)
        try:
            processes.wait_ready(services, timeout=120)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_UNAVAILABLE
        ready = True
        layout.cli_env.write_text(plan.cli_env_file(opts))
        layout.services_file.write_text(plan.services_json(services))
        print(f"  ready in {time.monotonic() - started:.1f}s\n")
        print(hints.ready(opts, services, context=context), flush=True)
        return _watch(services)
    except KeyboardInterrupt:
        return EXIT_OK if ready else EXIT_INTERRUPTED
    finally:
        _say("stopping the scheduler, the binders and the watcher...")
        layout.services_file.unlink(missing_ok=True)
        processes.stop(services)
        _say("stopped")


def _say(text: str) -> None:
    """Print, but never let a closed stdout (a pipe that went away) keep us from
    stopping what we started."""
    with contextlib.suppress(OSError):
        print(text, flush=True)


def _watch(services: Sequence[Service]) -> int:
    """Wait until a service exits (an error: say which, with its log's tail) or the user
    stops us (KeyboardInterrupt, also on SIGTERM)."""
    while True:
        for svc in services:
            if not svc.alive():
                code = svc.proc.returncode if svc.proc else None
                print(
                    f"error: {svc.name} exited (code {code}); the end of {svc.log_path}:\n"
                    f"{svc.log_tail()}",
                    file=sys.stderr,
                )
                return EXIT_SERVICE_FAILED
        time.sleep(0.5)
