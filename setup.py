"""Builds the csdkit wheel through the project's CMake.

The package's Python files come from python/csdkit; the extension csdkit._csdkit and the csdkit
command (as csdkit/bin/csdkit) are built by CMake (target csdkit_wheel_parts) and installed into
the wheel's tree (install component `python`, python/CMakeLists.txt). Only what the package
ships is built: no tests, benchmarks, RTL or fuzzing. The interpreter that runs this file is the
one the module is built for.

Environment: CSDKIT_MARCH (the -march of host code, CMake's default x86-64-v3), CMAKE_ARGS
(more -D options, e.g. -DCSDKIT_WITH_OPENCL=OFF), CMAKE_BUILD_PARALLEL_LEVEL (build jobs).
CSDKIT_CMAKE_BUILD_DIR: an existing, configured build tree of this source (scripts/build's
build/release) to package from instead of configuring a new one: it is not reconfigured, only
the package's targets are brought up to date there and installed (scripts/wheel-check in CI,
where the tree was just built); its Python must be the one running this file.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version():
    """CMakeLists.txt's project(csdkit VERSION x.y.z): the one place the version is written."""
    return project_version_of(ROOT)


def project_version_of(root):
    text = (root / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*csdkit\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", text)
    if not m:
        raise RuntimeError("CMakeLists.txt: expected 'project(csdkit VERSION x.y.z ...)', "
                           "found none")
    return m.group(1)


def pybind11_args():
    """pybind11's CMake package when pip installed it (Debian's is found by CMake itself)."""
    try:
        import pybind11
        cmake_dir = Path(pybind11.get_cmake_dir())
    except (ImportError, AttributeError, RuntimeError):
        return []
    return ["-Dpybind11_DIR=" + str(cmake_dir)] if cmake_dir.is_dir() else []


class CMakeExtension(Extension):
    """An extension that CMake builds (no sources for setuptools to compile)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # <prefix>/csdkit/_csdkit<suffix>: the component installs into <prefix>.
        prefix = Path(self.get_ext_fullpath(ext.name)).resolve().parent.parent
        reuse = os.environ.get("CSDKIT_CMAKE_BUILD_DIR")
        if reuse:
            build = Path(reuse).resolve()
            self.check_reused_tree(build)
        else:
            build = Path(self.build_temp).resolve() / "cmake"
            build.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DCSDKIT_WHEEL=ON",
            "-DPython_EXECUTABLE=" + sys.executable,
            "-DCSDKIT_BUILD_TESTS=OFF",
            "-DCSDKIT_BUILD_BENCH=OFF",
            "-DCSDKIT_WITH_RTL=OFF",
            "-DCSDKIT_FUZZ=OFF",
            "-DBUILD_TESTING=OFF",
        ]
        if shutil.which("ninja") and not (build / "CMakeCache.txt").exists():
            configure += ["-G", "Ninja"]
        if os.environ.get("CSDKIT_MARCH") is not None:
            configure.append("-DCSDKIT_MARCH=" + os.environ["CSDKIT_MARCH"])
        configure += pybind11_args() + shlex.split(os.environ.get("CMAKE_ARGS", ""))
        compile_ = ["cmake", "--build", str(build), "--target", "csdkit_wheel_parts"]
        if self.parallel:
            compile_ += ["--parallel", str(self.parallel)]
        install = ["cmake", "--install", str(build), "--component", "python",
                   "--prefix", str(prefix)]
        for cmd in ([] if reuse else [configure]) + [compile_, install]:
            print(" ".join(shlex.quote(c) for c in cmd), flush=True)
            subprocess.run(cmd, check=True)

    @staticmethod
    def check_reused_tree(build):
        """CSDKIT_CMAKE_BUILD_DIR must be a configured tree of this source, for this Python."""
        cache = build / "CMakeCache.txt"
        if not cache.is_file():
            raise RuntimeError("CSDKIT_CMAKE_BUILD_DIR '{}': expected a configured CMake build "
                               "tree, found no CMakeCache.txt".format(build))
        values = dict(re.findall(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", cache.read_text(), re.M))
        source = values.get("CMAKE_HOME_DIRECTORY", "")
        if not source or not (Path(source) / "setup.py").is_file() or \
                project_version_of(Path(source)) != project_version():
            raise RuntimeError("CSDKIT_CMAKE_BUILD_DIR '{}': expected a build of csdkit {}, "
                               "found one of '{}'".format(build, project_version(), source))
        # (scripts/build leaves Python_EXECUTABLE a plain variable: FindPython's record of it.)
        python = values.get("Python_EXECUTABLE") or values.get("_Python_EXECUTABLE", "")
        if not python or Path(python).resolve() != Path(sys.executable).resolve():
            raise RuntimeError("CSDKIT_CMAKE_BUILD_DIR '{}': expected a tree configured for "
                               "this Python ({}), found Python_EXECUTABLE '{}'"
                               .format(build, sys.executable, python))


setup(
    version=project_version(),
    ext_modules=[CMakeExtension("csdkit._csdkit")],
    cmdclass={"build_ext": CMakeBuild},
)
