"""Build the krew archive of `kubectl splitsched` and print its sha256.

    python scripts/krew-archive.py [OUT]     (default dist/kubectl-splitsched.tar.gz)

The archive holds deploy/krew/kubectl-splitsched, the shim that runs the splitsched
Python package's plugin, and is byte-for-byte reproducible (fixed times, owners and
modes), so the sha256 in deploy/krew/splitsched.yaml can be checked against it
(tests/unit/deploy/test_krew.py). Install from a checkout, without any index:

    kubectl krew install --manifest=deploy/krew/splitsched.yaml \\
        --archive=dist/kubectl-splitsched.tar.gz
"""

from __future__ import annotations

import gzip
import hashlib
import io
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIM = REPO / "deploy" / "krew" / "kubectl-splitsched"


def archive_bytes() -> bytes:
    """The tar.gz, the same bytes on every machine."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        data = SHIM.read_bytes()
        info = tarfile.TarInfo(SHIM.name)
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "dist" / "kubectl-splitsched.tar.gz"
    data = archive_bytes()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print(f"{hashlib.sha256(data).hexdigest()}  {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
