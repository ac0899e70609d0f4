"""The build steps pyproject.toml cannot state: compile the C library and the
detinfer command with the repository's Makefile and put both in the package
(detinfer/_native), tag the wheel for the platform, and carry the C sources
in the sdist. bindings/python/README.md, "Install", says why setuptools."""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from buildsupport import csources, native  # noqa: E402

try:  # setuptools >= 70.1 has bdist_wheel; before it, the wheel package does
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel


def _root() -> str:
    root = csources.find_root(HERE)
    if root is None:
        raise SystemExit("libdetinfer: the C sources are missing: build from the repository "
                         "(pip install ./bindings/python) or from its sdist (which carries them in csrc/)")
    return root


class BuildPyWithNative(build_py):
    """The Python files, then libdetinfer.so.1 and detinfer beside them."""

    def run(self) -> None:
        super().run()
        native.build(_root(), os.path.join(self.build_lib, "detinfer", native.PACKAGE_DIR))


class SdistWithSources(sdist):
    """The sdist also carries the C sources (csrc/), so a wheel builds from it alone."""

    def make_release_tree(self, base_dir: str, files: list) -> None:
        super().make_release_tree(base_dir, files)
        n = csources.copy_sources(_root(), os.path.join(base_dir, csources.SDIST_DIR))
        print(f"libdetinfer: {n} C source files in {csources.SDIST_DIR}/")


class NativeDistribution(Distribution):
    """Native code inside: installed to platlib, in a platform wheel."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """No Python extension, so any Python 3 on this platform
    (py3-none-linux_x86_64; auditwheel repair makes it manylinux)."""

    def get_tag(self) -> tuple:
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=NativeDistribution,
      cmdclass={"build_py": BuildPyWithNative, "sdist": SdistWithSources, "bdist_wheel": PlatformWheel})
