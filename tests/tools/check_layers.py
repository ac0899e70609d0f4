#!/usr/bin/env python3
"""No file includes a header from a layer above its own (docs/ARCHITECTURE.md).

    check_layers.py ROOT DIR...      the library's folders, lowest layer first
                                     (the Makefile's DI_SRC_DIRS)
    check_layers.py --self-test      shows on a made-up tree that it can fail

Rules, all from the folder a file sits in:
  - a library folder may include headers of its own folder and of the folders
    before it in DIR... (and include/detinfer.h, the public contract);
  - kernels/cuda (the CUDA plugin) may include kernels/common, lib/base and the
    backend interface it implements, lib/forward/backend.h, with the model it
    is given;
  - tools/, examples/ and bindings/ use only include/detinfer.h.
A quoted include that names no file of the tree (a system header in quotes)
is ignored; an include of a header that exists in two folders is an error,
since -I order would then decide which one is meant.
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")

# Folders above the library and what they may include.
PUBLIC_ONLY = ("tools", "examples", "bindings")
CUDA_DIR = "kernels/cuda"
CUDA_MAY_INCLUDE = ("kernels/common", "lib/base", "lib/forward/backend.h", "lib/model/model.h",
                    "lib/format/gguf.h")


def sources(root, folder):
    top = os.path.join(root, folder)
    for dirpath, _, names in os.walk(top):
        for name in sorted(names):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), root)


def header_index(root, folders):
    """basename -> [folder, ...] for every header of the library and the plugin."""
    index = {}
    for folder in list(folders) + [CUDA_DIR]:
        for path in sources(root, folder):
            if path.endswith((".h", ".cuh")):
                index.setdefault(os.path.basename(path), []).append(os.path.dirname(path))
    return index


def check(root, folders):
    folders = [f.rstrip("/") for f in folders]
    rank = {f: i for i, f in enumerate(folders)}
    index = header_index(root, folders)
    errors = []
    for name, homes in sorted(index.items()):
        if len(homes) > 1:
            errors.append(f"{name} exists in {', '.join(homes)}: includes by name are ambiguous")

    def includes(path):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            return INCLUDE.findall(f.read())

    for folder in folders + [CUDA_DIR] + list(PUBLIC_ONLY):
        if not os.path.isdir(os.path.join(root, folder)):
            continue
        for path in sources(root, folder):
            here = os.path.dirname(path)
            for inc in includes(path):
                name = os.path.basename(inc)
                if name == "detinfer.h" or not index.get(name):
                    continue  # the public header, a tool's own header, or a system one
                target = index[name][0]
                target_file = f"{target}/{name}"
                if folder in PUBLIC_ONLY:
                    errors.append(f"{path}: includes {target_file}; {folder}/ uses only "
                                  "include/detinfer.h")
                elif folder == CUDA_DIR:
                    if target != CUDA_DIR and target not in CUDA_MAY_INCLUDE \
                            and target_file not in CUDA_MAY_INCLUDE:
                        errors.append(f"{path}: includes {target_file}; the CUDA plugin may "
                                      f"include only {', '.join(CUDA_MAY_INCLUDE)}")
                elif target == CUDA_DIR or rank[target] > rank[here]:
                    errors.append(f"{path}: includes {target_file}, a layer above {here}")
    return errors


def self_test():
    """A tree with one down-arrow and one up-arrow: exactly the up-arrow is reported."""
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        write("low/low.h", "int low(void);\n")
        write("low/low.c", '#include "low.h"\n#include "high.h"\n')   # up: an error
        write("high/high.h", '#include "low.h"\n')                    # down: fine
        write("tools/t.c", '#include "detinfer.h"\n#include "high.h"\n')  # tools: an error
        errors = check(root, ["low", "high"])
        expected = ["low/low.c: includes high/high.h, a layer above low",
                    "tools/t.c: includes high/high.h; tools/ uses only include/detinfer.h"]
        if errors != expected:
            print("check_layers self-test FAILED:\n  got      %s\n  expected %s" % (errors, expected))
            return 1
    print("check_layers self-test: an up-arrow and a tool's private include are caught")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 3:
        print(__doc__)
        return 2
    root, folders = argv[1], argv[2:]
    errors = check(root, folders)
    for e in errors:
        print("layers:", e)
    if errors:
        print(f"layers: {len(errors)} include(s) against the layer order "
              "(docs/ARCHITECTURE.md)")
        return 1
    print(f"layers: {len(folders)} library folders, lowest first, and kernels/cuda, "
          "tools, examples, bindings: no include against the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
