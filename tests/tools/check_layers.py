#!/usr/bin/env python3
"""No include runs up the layers, and the public calls live in lib/api
(docs/ARCHITECTURE.md, "The layers").

    check_layers.py ROOT LAYER...    the layers, lowest first (the Makefile's
                                     DI_LAYERS); "a,b" is one layer of peers
    check_layers.py --self-test      shows on a made-up tree that each rule can fail

Rules:
  - in the library (lib/, kernels/), a quoted include names a header by its
    path from the root ("lib/base/errors.h"), or is "detinfer.h";
  - a file of a layer includes headers of its own folder and of the layers
    below it: never one above, never a peer's (the CPU and CUDA backends, or
    their kernels, include nothing of each other). A file belongs to the
    deepest layer folder holding it (lib/backend/cpu/x.c is in lib/backend/cpu);
  - a backend's kernels (kernels/X for X a backend) are included only by that
    backend (lib/backend/X) and by kernels/: the layers above reach them
    through their backend, never around it;
  - every function of the version script (lib/detinfer.map) is defined in
    lib/api, and nothing else there is DI_API: the contract's edge is one folder;
  - docs/ARCHITECTURE.md's "Files" lists every file of the layer folders, and
    only those;
  - within a folder of lib/, kernels/ or tools/, the files' calls make no
    circle: when a.c calls a function b.c defines, nothing b.c calls (even
    through other files of the folder) is defined in a.c;
  - tools/, examples/ and bindings/ include nothing of lib/ or kernels/ (only
    include/detinfer.h); in tools/, a command's folder (tools/X/) includes
    tools/cli/ and itself (but for TOOL_EXCEPTIONS), tools/cli/ only itself,
    and tools/*.c (the entry) any of them.
A quoted include that names no file of the tree (a system header in quotes)
is ignored.
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
LIBRARY_TOPS = ("lib", "kernels")
PUBLIC_ONLY = ("tools", "examples", "bindings")
API = "lib/api"
MAP = "lib/detinfer.map"
DOC = "docs/ARCHITECTURE.md"
MAP_SYMBOL = re.compile(r"^\s+(di_\w+);", re.M)
# The kernel folders that belong to one backend each (kernels/common is shared).
BACKEND_KERNELS = {"kernels/cpu": "lib/backend/cpu", "kernels/cuda": "lib/backend/cuda"}
# A command's include of another command's header, allowed on purpose (the
# reasons are in tools/detinfer.mk's head comment).
TOOL_EXCEPTIONS = {("tools/commands/replay.c", "serve/serve.h")}


def sources(root, top):
    for dirpath, dirnames, names in os.walk(os.path.join(root, top)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("build", ".")) and d != "target")
        for name in sorted(names):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def layer_of(path, ranks):
    """The deepest layer folder holding path, or None."""
    folder = os.path.dirname(path)
    while folder:
        if folder in ranks:
            return folder
        folder = os.path.dirname(folder)
    return None


def includes(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return INCLUDE.findall(f.read())


def check_library(root, layers):
    ranks = {}
    for i, layer in enumerate(layers):
        for folder in layer.split(","):
            ranks[folder.rstrip("/")] = i
    errors = []
    for top in LIBRARY_TOPS:
        for path in sources(root, top):
            here = layer_of(path, ranks)
            if here is None:
                errors.append(f"{path}: in no layer (add its folder to the Makefile's DI_LAYERS)")
                continue
            for inc in includes(root, path):
                if inc == "detinfer.h":
                    continue
                if not os.path.isfile(os.path.join(root, inc)):
                    if any(p.endswith("/" + os.path.basename(inc)) for p in sources(root, top)):
                        errors.append(f"{path}: includes \"{inc}\" by name; name it by its path "
                                      "from the root")
                    continue  # a system header in quotes
                there = layer_of(inc, ranks)
                if there is None:
                    errors.append(f"{path}: includes {inc}, which is in no layer")
                elif there != here and ranks[there] == ranks[here]:
                    errors.append(f"{path}: includes {inc}, a peer of {here}")
                elif ranks[there] > ranks[here]:
                    errors.append(f"{path}: includes {inc}, a layer above {here}")
                elif (there in BACKEND_KERNELS and not here.startswith("kernels/")
                      and here != BACKEND_KERNELS[there]):
                    errors.append(f"{path}: includes {inc} around its backend; only "
                                  f"{BACKEND_KERNELS[there]} includes {there}")
    return errors


def definitions(text, name):
    """Whether text defines function name (a body follows its parameter list)."""
    for m in re.finditer(r"^[A-Za-z_][\w \t\*]*\b%s\s*\(" % re.escape(name), text, re.M):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        if text[i:].lstrip().startswith("{"):
            return True
    return False


def check_api(root):
    """Every exported function is defined in lib/api; no DI_API definition elsewhere."""
    with open(os.path.join(root, MAP), encoding="utf-8") as f:
        exported = MAP_SYMBOL.findall(f.read())
    errors = []
    texts = {p: open(os.path.join(root, p), encoding="utf-8", errors="replace").read()
             for top in LIBRARY_TOPS for p in sources(root, top) if p.endswith((".c", ".cu"))}
    for name in exported:
        homes = [p for p, t in texts.items() if definitions(t, name)]
        if not homes:
            errors.append(f"{name}: exported by {MAP} but defined in no file of lib/ or kernels/")
        for p in homes:
            if not p.startswith(API + "/"):
                errors.append(f"{p}: defines {name}, a public call, outside {API}")
    for p, t in texts.items():
        if not p.startswith(API + "/") and re.search(r"^DI_API\b", t, re.M):
            errors.append(f"{p}: has a DI_API definition outside {API}")
    return errors


def check_public_only(root):
    library_headers = {p for top in LIBRARY_TOPS for p in sources(root, top)}
    names = {os.path.basename(p) for p in library_headers}
    errors = []
    for top in PUBLIC_ONLY:
        for path in sources(root, top):
            own = os.path.dirname(path)
            for inc in includes(root, path):
                if inc == "detinfer.h":
                    continue
                here_file = os.path.normpath(os.path.join(own, inc)).replace(os.sep, "/")
                tool_file = f"tools/{inc}"
                if inc in library_headers or (os.path.basename(inc) in names and not
                                              os.path.isfile(os.path.join(root, here_file)) and not
                                              os.path.isfile(os.path.join(root, tool_file))):
                    errors.append(f"{path}: includes {inc}; {top}/ uses only include/detinfer.h")
                elif top == "tools":
                    errors += check_tool_include(root, path, inc)
    return errors


def check_tool_include(root, path, inc):
    """tools/X/ (a command) includes tools/cli/ and tools/X/; tools/cli/ only itself."""
    target = inc if os.path.isfile(os.path.join(root, "tools", inc)) else \
        os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(path), inc)), "tools")
    if not os.path.isfile(os.path.join(root, "tools", target)):
        return []  # a system header in quotes
    here = os.path.relpath(os.path.dirname(path), "tools").split(os.sep)[0]
    there = os.path.dirname(target).split(os.sep)[0] or "."
    if here == "." or there == here or (path, target) in TOOL_EXCEPTIONS:
        return []
    if here == "cli":
        return [f"{path}: includes tools/{target}; tools/cli/ includes only itself"]
    if there == "cli":
        return []
    return [f"{path}: includes tools/{target}; tools/{here}/ includes only tools/cli/ and itself"]


def check_doc(root, layers):
    """docs/ARCHITECTURE.md's "Files" names every file of each layer folder, and
    nothing else: a folder's line "- **F/**", then "  - `name` — ..." per file."""
    path = os.path.join(root, DOC)
    if not os.path.isfile(path):
        return [f"{DOC}: missing"]
    listed, folder = set(), None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"- \*\*([\w/]+)/\*\*\s*$", line)
            if m:
                folder = m.group(1)
                continue
            m = re.match(r"  - `([^`]+)` — ", line)
            if m and folder:
                listed.add(f"{folder}/{m.group(1)}")
            elif not line.startswith("  "):
                folder = None
    present = set()
    for layer in layers:
        for folder in layer.split(","):
            d = os.path.join(root, folder)
            if os.path.isdir(d):
                present |= {f"{folder}/{n}" for n in os.listdir(d) if os.path.isfile(os.path.join(d, n))}
    return ([f"{p}: not in {DOC}, \"Files\"" for p in sorted(present - listed)] +
            [f"{p}: in {DOC}, \"Files\", but not in the tree" for p in sorted(listed - present)])


# A function defined at the top of a file (not static): its name.
DEFINED = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M)


def code_only(text):
    """text without its comments and string literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def reach(calls, start):
    """The files start's calls lead to, through any number of files."""
    seen, todo = set(), list(calls[start])
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(calls[f])
    return seen


def check_circles(root):
    """No circle of calls among the C files of one folder of lib/, kernels/ or tools/."""
    errors = []
    folders = {}
    for top in LIBRARY_TOPS + ("tools",):
        for path in sources(root, top):
            if path.endswith((".c", ".cu")):
                folders.setdefault(os.path.dirname(path), []).append(path)
    for _, files in sorted(folders.items()):
        texts = {p: code_only(open(os.path.join(root, p), encoding="utf-8", errors="replace").read())
                 for p in files}
        homes = {}
        for p, t in texts.items():
            for name in DEFINED.findall(t):
                homes.setdefault(name, set()).add(p)
        # a name defined in two files is each file's own (an INLINE helper): no edge
        home = {name: next(iter(ps)) for name, ps in homes.items() if len(ps) == 1}
        calls = {p: sorted({h for name, h in home.items()
                            if h != p and re.search(r"\b%s\s*\(" % re.escape(name), t)}) for p, t in texts.items()}
        # a file in a circle reaches itself through the others
        for start in files:
            mates = sorted(f for f in reach(calls, start) if f != start and start in reach(calls, f))
            if mates:
                errors.append(f"{start}: in a circle of calls with {', '.join(mates)}")
    return errors


def check(root, layers):
    return (check_library(root, layers) + check_api(root) + check_public_only(root) +
            check_circles(root) + check_doc(root, layers))


def self_test():
    """A tree with one arrow of each kind: exactly the wrong ones are reported."""
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        write(MAP, "DETINFER_1.0 {\n    global:\n        di_open;\n        di_close;\n};\n")
        write("lib/base/low.h", "int low(void);\n")
        write("lib/base/low.c", '#include "lib/base/low.h"\n#include "lib/api/high.h"\n')  # up
        write("kernels/cpu/k.h", '#include "lib/base/low.h"\n')                             # down: fine
        write("kernels/cuda/g.h", '#include "kernels/cpu/k.h"\n')                           # a peer
        write("kernels/cpu/k.c", '#include "k.h"\n')                                        # by name
        write("lib/api/high.h", '#include "lib/base/low.h"\n')
        write("lib/api/skip.c", '#include "kernels/cpu/k.h"\n')                           # around the backend
        write("lib/backend/cpu/b.c", '#include "kernels/cpu/k.h"\n')                      # its backend: fine
        write("lib/api/open.c", "DI_API int di_open(void)\n{\n    return shut(1);\n}\n"
              "int opened(int x)\n{\n    return x;\n}\n")                                   # a circle:
        write("lib/api/shut.c", "int shut(int x)\n{\n    return opened(x);\n}\n")          # open <-> shut
        write("lib/api/twin_a.c", "INLINE int twin(void)\n{\n    return 1;\n}\nint a(void)\n{\n    return b();\n}\n")
        write("lib/api/twin_b.c", "INLINE int twin(void)\n{\n    return 2;\n}\nint b(void)\n{\n    return twin();\n}\n")
        # twin is each file's own: b() calling its twin is no edge back to twin_a.c, so no circle
        write("kernels/cpu/close.c", "int di_close(void) { return 1; }\n")                  # not in api
        write("tools/t.c", '#include "detinfer.h"\n#include "lib/api/high.h"\n')            # private
        write("tools/cli/c.h", '#include "serve/s.h"\n')                                    # cli up
        write("tools/serve/s.h", '#include "cli/c.h"\n')                                    # fine
        write("tools/verify/v.c", '#include "serve/s.h"\n')                                 # a sibling
        write(DOC, "## Files\n\n- **lib/base/**\n  - `low.h` — x\n  - `gone.c` — y\n- **kernels/cpu/**\n"
              "  - `k.h` — a\n  - `k.c` — b\n  - `close.c` — c\n- **kernels/cuda/**\n  - `g.h` — d\n"
              "- **lib/backend/cpu/**\n  - `b.c` — j\n"
              "- **lib/api/**\n  - `high.h` — e\n  - `skip.c` — k\n  - `open.c` — f\n  - `shut.c` — g\n  - `twin_a.c` — h\n"
              "  - `twin_b.c` — i\n")   # low.c left out
        errors = check(root, ["lib/base", "kernels/cpu,kernels/cuda", "lib/backend/cpu", "lib/api"])
        expected = [
            'kernels/cpu/k.c: includes "k.h" by name; name it by its path from the root',
            "kernels/cuda/g.h: includes kernels/cpu/k.h, a peer of kernels/cuda",
            "lib/base/low.c: includes lib/api/high.h, a layer above lib/base",
            "lib/api/skip.c: includes kernels/cpu/k.h around its backend; only lib/backend/cpu includes kernels/cpu",
            "kernels/cpu/close.c: defines di_close, a public call, outside lib/api",
            "lib/api/open.c: in a circle of calls with lib/api/shut.c",
            "lib/api/shut.c: in a circle of calls with lib/api/open.c",
            "tools/cli/c.h: includes tools/serve/s.h; tools/cli/ includes only itself",
            "tools/t.c: includes lib/api/high.h; tools/ uses only include/detinfer.h",
            "tools/verify/v.c: includes tools/serve/s.h; tools/verify/ includes only tools/cli/ and itself",
            'lib/base/low.c: not in docs/ARCHITECTURE.md, "Files"',
            'lib/base/gone.c: in docs/ARCHITECTURE.md, "Files", but not in the tree',
        ]
        if sorted(errors) != sorted(expected):
            print("check_layers self-test FAILED:\n  got      %s\n  expected %s" % (errors, expected))
            return 1
    print("check_layers self-test: an up-arrow, a peer's include, an include around a backend, an include by name, a public "
          "call outside lib/api, a circle of calls, a tool's private include, a command's sibling and an "
          "out-of-date file list are caught")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 3:
        print(__doc__)
        return 2
    root, layers = argv[1], argv[2:]
    errors = check(root, layers)
    for e in errors:
        print("layers:", e)
    if errors:
        print(f"layers: {len(errors)} problem(s) against the layer rules (docs/ARCHITECTURE.md)")
        return 1
    print(f"layers: {len(layers)} layers, lowest first; no include runs up, across or around a backend, no circle of calls "
          "in a folder, every public call is defined in lib/api, and tools, examples, bindings use only "
          "include/detinfer.h")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
