"""Build prerequisites, checked before anything is compiled: a C compiler,
make, and the headers and libraries of Debian's -dev packages. Each is
probed by compiling and linking a one-line program, so the check holds on
any distribution; the names given are Debian's (and Ubuntu's).

    python3 buildsupport/prereqs.py     # prints what is missing, exit 1 if anything is
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, NamedTuple, Optional


class Prereq(NamedTuple):
    package: str          # the Debian package that provides it
    header: Optional[str]  # None: a program, not a library
    link: str             # -l flag, or the program's name
    used_by: str


LIBRARIES = (
    Prereq("libpcre2-dev", "pcre2.h", "-lpcre2-8", "the library's BPE tokenizer"),
    Prereq("libxxhash-dev", "xxhash.h", "-lxxhash", "digests"),
    Prereq("libmicrohttpd-dev", "microhttpd.h", "-lmicrohttpd", "detinfer serve"),
    Prereq("libjansson-dev", "jansson.h", "-ljansson", "detinfer serve's JSON"),
    Prereq("libcurl4-openssl-dev", "curl/curl.h", "-lcurl", "detinfer verify --url"),
)


def _probe(cc: str, prereq: Prereq, tmp: str) -> bool:
    src = os.path.join(tmp, "probe.c")
    with open(src, "w") as f:
        if prereq.header == "pcre2.h":
            f.write("#define PCRE2_CODE_UNIT_WIDTH 8\n")
        f.write(f"#include <{prereq.header}>\nint main(void) {{ return 0; }}\n")
    try:
        r = subprocess.run([cc, src, "-o", os.path.join(tmp, "probe"), prereq.link],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _header_present(header: str) -> bool:
    """Without a compiler to probe with: the header in the usual folders."""
    return any(glob.glob(os.path.join(d, header))
               for d in ("/usr/include", "/usr/local/include", "/usr/include/*-linux-gnu"))


def missing(cc: Optional[str] = None) -> List[Prereq]:
    """Every prerequisite this machine lacks (empty: the build can start)."""
    cc = cc or os.environ.get("CC") or "cc"
    out: List[Prereq] = []
    have_cc = shutil.which(cc) is not None
    if not have_cc:
        out.append(Prereq("build-essential", None, cc, "the C compiler"))
    if shutil.which("make") is None:
        out.append(Prereq("make", None, "make", "the build (the repository's Makefile)"))
    if not have_cc:
        return out + [p for p in LIBRARIES if p.header is None or not _header_present(p.header)]
    with tempfile.TemporaryDirectory(prefix="detinfer-prereqs-") as tmp:
        out.extend(p for p in LIBRARIES if not _probe(cc, p, tmp))
    return out


def report(absent: List[Prereq]) -> str:
    """The message for a build that cannot start."""
    lines = ["libdetinfer: the C library and the detinfer command cannot be built here; missing:"]
    for p in absent:
        what = f"{p.header}, {p.link}" if p.header else p.link
        lines.append(f"  {p.package:<22} ({what}: {p.used_by})")
    lines.append("On Debian or Ubuntu: apt-get install " + " ".join(p.package for p in absent))
    lines.append("Or install a prebuilt wheel (pip install libdetinfer-*.whl), which needs none of them.")
    return "\n".join(lines)


def main() -> int:
    absent = missing()
    if absent:
        print(report(absent), file=sys.stderr)
        return 1
    print("libdetinfer: every build prerequisite is present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
