"""The `detinfer` command of a pip install: runs the bundled program
(detinfer/_native/detinfer, built with the library beside it) in place of
this process, so signals, exit status and standard streams are its own."""

from __future__ import annotations

import os
import sys

from ._lib import bundled


def main() -> None:
    exe = bundled("detinfer")
    if exe is None:
        sys.exit("detinfer: this copy of the libdetinfer package has no bundled command "
                 "(it was not installed with pip); install it with pip install ./bindings/python, "
                 "or install the C library and the command with make install")
    os.execv(exe, ["detinfer", *sys.argv[1:]])
