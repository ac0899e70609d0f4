"""Where the C sources are, and which of them an sdist carries.

The C library and the detinfer command are built by the repository's
Makefile. From a source tree, setup.py finds them two folders up; an sdist
carries a copy in csrc/ (copy_sources), so a wheel builds from the sdist
alone, in an empty folder."""

from __future__ import annotations

import fnmatch
import os
import shutil
from typing import List, Optional

# What `make wheel-native` reads (the Makefile includes tools/detinfer.mk and
# lib/backend/cuda/cuda.mk); install's pkg-config, CMake and man templates ride along.
BUILD_FILES = ("Makefile", "LICENSE")
BUILD_DIRS = ("include", "lib", "kernels", "tools", "pkgconfig", "cmake", "man")
# Build outputs never travel: build/ is not listed, and a stray one in a listed folder is skipped.
SKIP = ("*.o", "*.a", "*.so", "*.so.*", "__pycache__", "*.pyc")

SDIST_DIR = "csrc"


def is_source_root(path: str) -> bool:
    return (os.path.isfile(os.path.join(path, "Makefile"))
            and os.path.isfile(os.path.join(path, "include", "detinfer.h")))


def find_root(project_dir: str) -> Optional[str]:
    """The C source root: the sdist's csrc/, else the repository around
    bindings/python; None when neither is there."""
    for candidate in (os.path.join(project_dir, SDIST_DIR), os.path.join(project_dir, os.pardir, os.pardir)):
        if is_source_root(candidate):
            return os.path.abspath(candidate)
    return None


def _skipped(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in SKIP)


def source_files(root: str) -> List[str]:
    """The files of BUILD_FILES and BUILD_DIRS, relative to root, sorted."""
    out = [f for f in BUILD_FILES if os.path.isfile(os.path.join(root, f))]
    for top in BUILD_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not _skipped(d))
            rel = os.path.relpath(dirpath, root)
            out.extend(os.path.join(rel, f) for f in sorted(filenames)
                       if not _skipped(f) and not os.path.islink(os.path.join(dirpath, f)))
    return sorted(out)


def copy_sources(root: str, dest: str) -> int:
    """Copies the C sources into dest (an sdist's csrc/); returns the count."""
    files = source_files(root)
    for rel in files:
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(root, rel), target)
    return len(files)
