#!/usr/bin/env python3
"""One release number everywhere (make check; docs/ABI.md, "Two version numbers").

The release lives in include/detinfer.h (DI_VERSION_MAJOR/MINOR/PATCH and
DI_VERSION_STRING); everything else that states it must agree:
  - the Python package (bindings/python/src/detinfer/__init__.py __version__),
  - the Rust crates (both Cargo.toml files, detinfer's dependency on
    detinfer-sys, Cargo.lock),
  - the pkg-config and CMake templates (they take @VERSION@ from the Makefile,
    which reads the header; with --installed PREFIX the installed detinfer.pc,
    detinfer-config-version.cmake and the library's file name
    libdetinfer.so.<ABI>.<minor>.<patch> are read too),
  - README.md (the status line, the `make` row's file name) and docs/ABI.md.

    check_versions.py ROOT [--installed PREFIX]   exit 1 naming every file that differs
    check_versions.py --self-test                 changes each place in a copy: the check must fail
"""
import os
import re
import shutil
import sys
import tempfile

SOURCES = ["include/detinfer.h", "bindings/python/src/detinfer/__init__.py", "bindings/rust/detinfer/Cargo.toml",
           "bindings/rust/detinfer-sys/Cargo.toml", "bindings/rust/Cargo.lock", "pkgconfig/detinfer.pc.in",
           "cmake/detinfer-config-version.cmake.in", "README.md", "docs/ABI.md"]


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def header(root):
    h = read(root, "include/detinfer.h")
    num = {k: re.search(rf"^#define DI_VERSION_{k} (\d+)$", h, re.M) for k in ("MAJOR", "MINOR", "PATCH")}
    string = re.search(r'^#define DI_VERSION_STRING "([^"]*)"$', h, re.M)
    abi = re.search(r"^#define DI_ABI_VERSION (\d+)$", h, re.M)
    if not all(num.values()) or not string or not abi:
        return None, None, ["include/detinfer.h: DI_VERSION_MAJOR/MINOR/PATCH, DI_VERSION_STRING or DI_ABI_VERSION missing"]
    parts = [num[k].group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    problems = []
    if string.group(1) != ".".join(parts):
        problems.append(f"include/detinfer.h: DI_VERSION_STRING {string.group(1)} is not "
                        f"DI_VERSION_MAJOR.MINOR.PATCH {'.'.join(parts)}")
    return ".".join(parts), f"{abi.group(1)}.{parts[1]}.{parts[2]}", problems


def expect(problems, rel, text, pattern, want, what):
    """Every match of pattern (one group) in text must be want; at least one."""
    found = re.findall(pattern, text, re.M)
    if not found:
        problems.append(f"{rel}: no {what} found")
    for got in found:
        if got != want:
            problems.append(f"{rel}: {what} is {got}, the release is {want}")


def check(root, installed=None):
    release, libfile, problems = header(root)
    if release is None:
        return problems
    expect(problems, SOURCES[1], read(root, SOURCES[1]), r'^__version__ = "([^"]*)"$', release, "__version__")
    for rel in SOURCES[2:4]:
        expect(problems, rel, read(root, rel), r'^version = "([^"]*)"$', release, "the package version")
    expect(problems, SOURCES[2], read(root, SOURCES[2]), r'^detinfer-sys = \{.*version = "([^"]*)"', release,
           "the detinfer-sys dependency's version")
    expect(problems, SOURCES[4], read(root, SOURCES[4]),
           r'^name = "detinfer(?:-sys)?"\nversion = "([^"]*)"$', release, "a crate's version")
    for rel in SOURCES[5:7]:
        if "@VERSION@" not in read(root, rel):
            problems.append(f"{rel}: does not take @VERSION@ from the Makefile (a version written in?)")
    readme = read(root, SOURCES[7])
    expect(problems, SOURCES[7], readme, r"^Status \(([^)]*)\)", release, "the status line's release")
    expect(problems, SOURCES[7], readme, r"`build/libdetinfer\.so\.([0-9.]+)`", libfile, "the built library's file")
    abi_md = read(root, SOURCES[8])
    expect(problems, SOURCES[8], abi_md, r"^\| release `([^`]*)`", release, "the release row")
    expect(problems, SOURCES[8], abi_md, r"so release ([0-9.]+) is", release, "the example's release")
    expect(problems, SOURCES[8], abi_md, r"release [0-9.]+ is `libdetinfer\.so\.([0-9.]+)`", libfile,
           "the example's file")
    expect(problems, SOURCES[8], abi_md, r"\(([0-9.]+) gives [0-9.]+\)", release, "the Makefile's example")
    expect(problems, SOURCES[8], abi_md, r"\([0-9.]+ gives ([0-9.]+)\)", libfile, "the Makefile's example's file")
    if installed:
        pc = os.path.join(installed, "lib/pkgconfig/detinfer.pc")
        cm = os.path.join(installed, "lib/cmake/detinfer/detinfer-config-version.cmake")
        expect(problems, pc, read("/", pc), r"^Version: (\S+)$", release, "Version")
        expect(problems, cm, read("/", cm), r'^set\(PACKAGE_VERSION "([^"]*)"\)$', release, "PACKAGE_VERSION")
        lib = os.path.join(installed, "lib", f"libdetinfer.so.{libfile}")
        if not os.path.isfile(lib):
            problems.append(f"{lib}: missing (the file is named libdetinfer.so.<ABI>.<minor>.<patch>)")
    return problems


def self_test():
    """Each place changed alone in a copy of the sources must fail the check."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    release, libfile, _ = header(root)
    wrong = "9.8.7"
    changes = [(SOURCES[0], f'DI_VERSION_STRING "{release}"', f'DI_VERSION_STRING "{wrong}"'),
               (SOURCES[1], f'"{release}"', f'"{wrong}"'),
               (SOURCES[2], f'version = "{release}"\n', f'version = "{wrong}"\n'),
               (SOURCES[2], f'version = "{release}" }}', f'version = "{wrong}" }}'),
               (SOURCES[3], f'version = "{release}"', f'version = "{wrong}"'),
               (SOURCES[4], f'name = "detinfer-sys"\nversion = "{release}"', f'name = "detinfer-sys"\nversion = "{wrong}"'),
               (SOURCES[5], "@VERSION@", release),
               (SOURCES[6], "@VERSION@", release),
               (SOURCES[7], f"Status ({release})", f"Status ({wrong})"),
               (SOURCES[7], f"`build/libdetinfer.so.{libfile}`", "`build/libdetinfer.so.1.8.7`"),
               (SOURCES[8], f"| release `{release}`", f"| release `{wrong}`"),
               (SOURCES[8], f"is `libdetinfer.so.{libfile}`", "is `libdetinfer.so.1.8.7`"),
               (SOURCES[8], f"({release} gives", f"({wrong} gives")]
    with tempfile.TemporaryDirectory() as tmp:
        for rel in SOURCES:
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            shutil.copy(os.path.join(root, rel), os.path.join(tmp, rel))
        if check(tmp):
            print("check_versions --self-test: the unchanged copy fails:", check(tmp))
            return 1
        for rel, old, new in changes:
            text = read(tmp, rel)
            if old not in text:
                print(f"check_versions --self-test: {rel} has no {old!r} to change")
                return 1
            with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
            found = check(tmp)
            if not any(p.startswith(rel) for p in found):
                print(f"check_versions --self-test: {rel} with {new!r} passed the check")
                return 1
            with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                f.write(text)
    print(f"check_versions --self-test: {len(changes)} changed places, each caught")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1]
    installed = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--installed" else None
    problems = check(root, installed)
    for p in problems:
        print(f"check_versions: {p}")
    if not problems:
        release, libfile, _ = header(root)
        print(f"check_versions: release {release} (libdetinfer.so.{libfile}) everywhere"
              + (f", {installed} included" if installed else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
