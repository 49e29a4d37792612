"""Test helpers: the faults a disk, a copy or a kill does to stored files, and running the
real ``stepsim`` command under them (tests/experiments/test_store_*.py,
tests/checks/test_check_faults.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def stepsim(*args, cwd, prefix=(), timeout: float = 1800) -> subprocess.CompletedProcess:
    """``python -m stepsim ARGS`` in ``cwd``, this checkout's code, no progress bar (prefix:
    a command to run it under, e.g. :func:`strace_kill_at`)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPSIM_PROGRESS="0")
    return subprocess.run([*prefix, sys.executable, "-m", "stepsim", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def lines(text: str) -> list[str]:
    """The non-blank lines of ``text``."""
    return [line for line in text.splitlines() if line.strip()]


def flip(path: Path, at: int) -> None:
    """Flip every bit of byte ``at`` of the file (its size unchanged)."""
    data = bytearray(Path(path).read_bytes())
    data[at] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def inside_an_array(npz) -> int:
    """The offset of a byte in the middle of the largest array's compressed data in an
    .npz (past the member's local header: its name and extra field)."""
    with zipfile.ZipFile(npz) as archive:
        info = max(archive.infolist(), key=lambda i: i.compress_size)
    with open(npz, "rb") as f:
        f.seek(info.header_offset + 26)  # the local header's name and extra lengths
        name_len, extra_len = struct.unpack("<HH", f.read(4))
    return info.header_offset + 30 + name_len + extra_len + info.compress_size // 2


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (the test is skipped where mounting is not
    permitted: not root, or no CAP_SYS_ADMIN), unmounted on the way out."""
    path.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                  str(path)], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        pytest.skip("no mount command")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def strace_kill_at(n: int) -> list[str]:
    """A command prefix that SIGKILLs the command (not its children) as it enters its n-th
    rename — atomic writes commit by renaming, so: as it commits the n-th file it writes —
    or a skip where strace is missing or cannot trace."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("no strace")
    probe = subprocess.run([strace, "-o", os.devnull, "true"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.strip()}")
    calls = "rename,renameat,renameat2"
    return [strace, "-o", os.devnull, "-e", f"trace={calls}",
            "-e", f"inject={calls}:signal=SIGKILL:when={n}"]
