"""Builds the library and the command with the repository's Makefile (`make
wheel-native`, tools/detinfer.mk) into a folder of the package."""

from __future__ import annotations

import os
import subprocess

from . import prereqs

# The folder inside the package (detinfer/_native); _lib.py reads the same name.
PACKAGE_DIR = "_native"


def build(root: str, stage: str) -> None:
    """make -C root wheel-native WHEEL_STAGE=stage, after the prerequisite
    check; exits (SystemExit: pip shows the message, no traceback) with the
    check's report or make's status."""
    absent = prereqs.missing()
    if absent:
        raise SystemExit(prereqs.report(absent))
    # A make above pip (make check-bindings) must not lend its jobserver.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    jobs = str(os.cpu_count() or 1)
    cmd = ["make", "-C", root, f"-j{jobs}", "wheel-native", f"WHEEL_STAGE={os.path.abspath(stage)}"]
    print("libdetinfer: " + " ".join(cmd), flush=True)
    if subprocess.run(cmd, env=env, check=False).returncode != 0:
        raise SystemExit(f"libdetinfer: `{' '.join(cmd)}` failed (its output is above)")
