#!/usr/bin/env python3
"""Builds mccl's torch extension (mccl._C) for the torch of this interpreter
against a prebuilt libmccl, with torch.utils.cpp_extension, and lays out an
importable package: for a machine that has torch but not what mccl's CMake
build needs (CAF, Boost, Highway headers), such as the 16-core machine of
the 16-rank figures. bench/device_bundle.sh packs what it reads:

    python3 BUNDLE/torch/build_torch_ext.py     # writes BUNDLE/python/mccl
    PYTHONPATH=BUNDLE/python python3 -c "import mccl; print(mccl.TORCH_BACKEND)"

Where mccl's dependencies are installed, build with CMake or pip instead
(README.md, "Installing"): this is a benchmark aid, not a second build.
"""

import argparse
import glob
import os
import shutil
import sys


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", default=os.path.join(here, "src"),
                   help="a tree with python/src, python/mccl, include/mccl and api/process/ (default: the bundle's)")
    p.add_argument("--lib", default=os.path.dirname(here), help="the folder holding libmccl.so.0")
    p.add_argument("--out", help="where the package goes (default: LIB/python)")
    args = p.parse_args(argv)
    out = args.out or os.path.join(args.lib, "python")
    lib = os.path.abspath(args.lib)
    if not os.path.exists(os.path.join(lib, "libmccl.so.0")):
        sys.exit(f"build_torch_ext: no libmccl.so.0 in {lib}")

    import torch
    from torch.utils import cpp_extension

    pkg = os.path.join(out, "mccl")
    shutil.rmtree(pkg, ignore_errors=True)
    os.makedirs(pkg)
    for f in glob.glob(os.path.join(args.source, "python", "mccl", "*.py")):
        shutil.copy(f, pkg)
    build = os.path.join(out, "build-ext")
    os.makedirs(build, exist_ok=True)
    src = os.path.join(args.source, "python", "src")
    cpp_extension.load(
        name="_C",
        sources=sorted(glob.glob(os.path.join(src, "*.cpp"))),
        extra_include_paths=[src, os.path.join(args.source, "include"), args.source],
        extra_cflags=["-O2", "-std=c++17", "-Wno-unused-parameter"],
        extra_ldflags=[f"-L{lib}", "-l:libmccl.so.0", f"-Wl,-rpath,{lib}", f"-Wl,-rpath-link,{lib}"],
        build_directory=build,
        is_python_module=False,
        verbose=True)
    shutil.copy(os.path.join(build, "_C.so"), pkg)
    # What python/CMakeLists.txt generates: where libmccl is, relative to
    # the package, and the torch the extension was built against.
    with open(os.path.join(pkg, "_libpath.py"), "w") as f:
        f.write(f'LIBMCCL = "{os.path.relpath(os.path.join(lib, "libmccl.so.0"), pkg)}"\n')
    with open(os.path.join(pkg, "_torch_build.py"), "w") as f:
        f.write(f'TORCH_VERSION = "{torch.__version__}"\n')
    print(f"build_torch_ext: {pkg} for torch {torch.__version__}, libmccl from {lib}")


if __name__ == "__main__":
    main()
