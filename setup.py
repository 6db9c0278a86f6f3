"""Build mytorch_ext._C from csrc/.

Environment knobs:
  MYTORCH_CUDA=auto|0|1     compile the CUDA sources (auto: when nvcc, a CUDA build of torch
                            and a GPU are all present; 1 compiles them without a GPU too)
  MYTORCH_CPU_FLAGS=...     CPU code-generation flags (default on x86-64: -march=x86-64-v2, a
                            baseline every x86-64 CPU since about 2009 runs; the GEMM and
                            attention kernels are also built for AVX2 and AVX-512 and picked at
                            load time). "native" for -march=native (a binary for this CPU
                            only), "none" for the compiler's default
  TORCH_CUDA_ARCH_LIST=...  GPU targets (default: 8.0 9.0+PTX)
  MYTORCH_SANITIZE=...      e.g. "address,undefined": build with sanitizers
  MYTORCH_DEBUG=1           -O0 -g, not stripped (release builds: -O3 -g0, linked with -s)
  MYTORCH_PCH=0             no precompiled torch headers (on by default: a faster clean build)
  MYTORCH_CUDA_ONLY=1       compile only the CUDA code (csrc/kernels/cuda): a compile check,
                            the library it links is not importable

torch must be installed first: build with `pip install --no-build-isolation .` so that the
extension is compiled against the torch it will run with.
"""
import glob
import hashlib
import os
import platform
import shlex
import shutil
import site
import subprocess
import sys

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def _fail(msg):
    sys.stderr.write(f"mytorch build: {msg}\n")
    sys.exit(1)


def _find_nvcc():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
        return home
    nvcc = shutil.which("nvcc")
    if nvcc:  # a toolkit has its headers beside bin/ (a wrapper script on PATH does not)
        home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        if os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    if os.path.exists("/usr/local/cuda/bin/nvcc"):
        return "/usr/local/cuda"
    return None


def _gpu_visible(torch):
    """A GPU this build could run on: torch sees one, or nvidia-smi lists one."""
    try:
        if torch.cuda.is_available():
            return True
    except Exception:  # a broken driver install: fall through to nvidia-smi
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def _want_cuda(torch):
    """(compile the CUDA sources?, CUDA_HOME, why not) for MYTORCH_CUDA=auto|0|1."""
    mode = os.environ.get("MYTORCH_CUDA", "auto").strip().lower()
    if mode not in ("auto", "0", "1"):
        _fail(f"MYTORCH_CUDA must be auto, 0 or 1, got {mode!r}")
    if mode == "0":
        return False, None, "MYTORCH_CUDA=0"
    cuda_home = _find_nvcc()
    torch_has_cuda = torch.version.cuda is not None
    if mode == "1":
        if cuda_home is None:
            _fail("MYTORCH_CUDA=1 but no nvcc was found (set CUDA_HOME or put nvcc on PATH)")
        if not torch_has_cuda:
            _fail(f"MYTORCH_CUDA=1 but torch {torch.__version__} is a CPU-only build")
        return True, cuda_home, ""
    # auto: only where the CUDA code can run; a machine without a GPU would spend minutes
    # compiling kernels it cannot use.
    if cuda_home is None:
        return False, None, "no nvcc found"
    if not torch_has_cuda:
        return False, None, f"torch {torch.__version__} is a CPU-only build"
    if not _gpu_visible(torch):
        return False, None, "no GPU visible (MYTORCH_CUDA=1 compiles the CUDA sources anyway)"
    return True, cuda_home, ""


def _pip_cuda_includes():
    """Headers that only the pip CUDA packages ship (nvidia/cu13/include, nvidia/*/include)."""
    dirs = []
    for sp in site.getsitepackages() + [site.getusersitepackages()]:
        for pattern in ("nvidia/cu*/include", "nvidia/*/include"):
            dirs += sorted(glob.glob(os.path.join(sp, pattern)))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _cpu_flags():
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    flags = os.environ.get("MYTORCH_CPU_FLAGS", "-march=x86-64-v2" if x86 else "none").strip()
    if flags.lower() in ("portable", "none", ""):
        return []
    if flags.lower() == "native":
        return ["-march=native"]
    return shlex.split(flags)


PRECOMPILED = os.path.join(ROOT, "csrc", "precompiled.h")


def _precompile_header(cpp_extension, torch_version, build):
    """Compile csrc/precompiled.h with the exact flags of the C++ sources, then force-include
    it in each of them (gcc falls back to the plain header if the two ever disagree)."""
    cflags, post = build["cflags"], build["post_cflags"]
    pch_dir = os.path.join(build["build_directory"], "pch")
    header = os.path.join(pch_dir, "mytorch_precompiled.h")
    with open(PRECOMPILED) as f:
        text = f.read()
    cmd = " ".join([shlex.quote(cpp_extension.get_cxx_compiler())] + cflags
                   + ["-x", "c++-header", shlex.quote(header), "-o", shlex.quote(header + ".gch")]
                   + post)
    stamp = hashlib.sha256((cmd + torch_version + text).encode()).hexdigest()
    stamp_file = header + ".stamp"
    current = open(stamp_file).read() if os.path.exists(stamp_file) else ""
    if current != stamp or not os.path.exists(header + ".gch"):
        os.makedirs(pch_dir, exist_ok=True)
        with open(header, "w") as f:
            f.write(text)
        print("mytorch build: precompiling the torch headers", file=sys.stderr)
        subprocess.run(cmd, shell=True, check=True)
        # Objects built against other headers or flags go: ninja's depfiles do not list
        # what came in through the precompiled header.
        for obj in build["objects"]:
            if os.path.exists(obj):
                os.remove(obj)
        with open(stamp_file, "w") as f:
            f.write(stamp)
    build["post_cflags"] = post + ["-include", shlex.quote(header), "-Winvalid-pch"]


def _use_precompiled_header(cpp_extension, torch_version):
    """Hook the step where torch writes build.ninja, which knows the final C++ flags."""
    write_and_compile = cpp_extension._write_ninja_file_and_compile_objects

    def with_precompiled_header(*args, **kwargs):
        if not args and {"cflags", "post_cflags", "build_directory", "objects"} <= kwargs.keys():
            try:
                _precompile_header(cpp_extension, torch_version, kwargs)
            except (OSError, subprocess.CalledProcessError) as e:
                print(f"mytorch build: no precompiled header ({e})", file=sys.stderr)
        return write_and_compile(*args, **kwargs)

    cpp_extension._write_ninja_file_and_compile_objects = with_precompiled_header


def main():
    import torch
    from torch.utils import cpp_extension

    cuda, cuda_home, no_cuda_reason = _want_cuda(torch)
    if cuda:
        os.environ["CUDA_HOME"] = cuda_home
        cpp_extension.CUDA_HOME = cuda_home
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0 9.0+PTX")

    cpu_flags = _cpu_flags()
    sanitize = os.environ.get("MYTORCH_SANITIZE", "").strip()
    debug = os.environ.get("MYTORCH_DEBUG", "0") == "1"
    # Sanitized builds: -O1 -g, as the sanitizers recommend (usable speed, exact stacks).
    # Release builds: no debug info (-g0 after the -g of Python's own flags), stripped at link.
    release = not debug and not sanitize
    opt = ["-O0", "-g"] if debug else (["-O1", "-g"] if sanitize else ["-O3"])

    sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
    cuda_sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cu"), recursive=True))

    info = {
        "MYTORCH_CPU_FLAGS": " ".join(cpu_flags) or "portable",
        "MYTORCH_CUDA_ARCHS": os.environ.get("TORCH_CUDA_ARCH_LIST", "") if cuda else "",
        "MYTORCH_SANITIZE": sanitize,
    }
    defines = [f'-D{k}="{v}"' for k, v in info.items()]
    # -fno-trapping-math: lets gcc if-convert and vectorize the branchy float math (exp, log,
    # tanh, erfc); results stay IEEE (no reassociation), FP exception flags are not kept.
    cxx = opt + ["-fopenmp", "-fno-trapping-math", "-Wno-unused-function"] + cpu_flags + defines
    if release:
        cxx.append("-g0")
    # The shared C++ runtime, the one torch uses: a toolchain that links libstdc++ statically
    # by default would give the extension a second copy whose locale is never set up (number
    # formatting in error messages then crashes).
    ldflags = ["-fopenmp", "-l:libstdc++.so.6"] + (["-s"] if release else [])
    if sanitize:
        san = [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer"]
        cxx += san
        ldflags += san
    include_dirs = [os.path.join(ROOT, "csrc")]

    if os.environ.get("MYTORCH_CUDA_ONLY", "0") == "1":
        if not cuda:
            _fail(f"MYTORCH_CUDA_ONLY=1 needs the CUDA sources compiled, but CUDA is off ({no_cuda_reason})")
        cuda_dir = os.path.join("csrc", "kernels", "cuda") + os.sep
        sources = [s for s in sources if s.startswith(cuda_dir)]
    if cuda:
        sources += cuda_sources
        include_dirs += _pip_cuda_includes()
        cxx.append("-DMYTORCH_WITH_CUDA")
        # No build-info defines here: torch adds the -gencode flags only when no nvcc flag
        # mentions "arch" (and MYTORCH_CUDA_ARCHS / -march=native would).
        nvcc = opt + ["-lineinfo", "-DMYTORCH_WITH_CUDA", "--expt-relaxed-constexpr"]
        # The toolkit's own libraries (cudart), also when CUDA_HOME was not set beforehand.
        cuda_libs = [d for d in (os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib"))
                     if os.path.isdir(d)]
        ext = cpp_extension.CUDAExtension(
            "mytorch_ext._C", sources, include_dirs=include_dirs, library_dirs=cuda_libs,
            extra_compile_args={"cxx": cxx, "nvcc": nvcc}, extra_link_args=ldflags)
    else:
        ext = cpp_extension.CppExtension(
            "mytorch_ext._C", sources, include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx}, extra_link_args=ldflags)

    cuda_state = "on" if cuda else f"off ({no_cuda_reason})"
    print(f"mytorch build: {len(sources)} sources, CUDA {cuda_state}, "
          f"CPU flags {info['MYTORCH_CPU_FLAGS']!r}", file=sys.stderr)
    if os.environ.get("MYTORCH_PCH", "1") != "0":
        _use_precompiled_header(cpp_extension, torch.__version__)
    base = cpp_extension.BuildExtension.with_options(use_ninja=True)

    class BuildExt(base):
        """Keep objects in ./build/temp so every build path (pip -e, build_ext) is incremental."""

        def finalize_options(self):
            super().finalize_options()
            self.build_temp = os.path.join(ROOT, "build", "temp")

    setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})


if __name__ == "__main__":
    main()
