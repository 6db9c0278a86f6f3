// The Python module mytorch_ext._C. Ops register themselves through TORCH_LIBRARY
// at load time; this file only adds the few plain-Python helpers.
#include <torch/extension.h>

#include "device/bindings.h"
#include "eager_calls.h"
#include "kernels/attention_checks.h"
#include "kernels/attention_sdpa.h"
#include "kernels/cpu/attention_amx.h"
#include "kernels/cpu/isa.h"
#include "patching/aten.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef MYTORCH_CPU_FLAGS
#define MYTORCH_CPU_FLAGS "unknown"
#endif
#ifndef MYTORCH_CUDA_ARCHS
#define MYTORCH_CUDA_ARCHS ""
#endif
#ifndef MYTORCH_SANITIZE
#define MYTORCH_SANITIZE ""
#endif

static pybind11::dict build_info() {
  pybind11::dict d;
#ifdef MYTORCH_WITH_CUDA
  d["cuda"] = true;
#else
  d["cuda"] = false;
#endif
  d["cuda_archs"] = std::string(MYTORCH_CUDA_ARCHS);
  d["cpu_flags"] = std::string(MYTORCH_CPU_FLAGS);
  d["sanitize"] = std::string(MYTORCH_SANITIZE);
#ifdef _OPENMP
  d["openmp"] = _OPENMP;
  d["omp_max_threads"] = omp_get_max_threads();
#else
  d["openmp"] = 0;
  d["omp_max_threads"] = 1;
#endif
  d["cpu_isa"] = mytorch::cpu::isa_description();  // the variant chosen at load time
  d["cpu_amx_attention"] = mytorch::cpu::amx_attention_available();  // bf16 forward on AMX tiles
  d["compiler"] = std::string(__VERSION__);
  return d;
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "mytorch native kernels";
  m.def("build_info", &build_info, "What this build of mytorch_ext._C contains");
  mytorch::device::init_bindings(m);
  mytorch::patching::init_bindings(m);
  mytorch::eager_calls::init_bindings(m);
  auto attention = m.def_submodule("_attention", "The attention contracts shared by every layer");
  attention.def("softmax_scale", &mytorch::attention::softmax_scale, pybind11::arg("softmax_scale"),
                pybind11::arg("head_dim"), "softmax_scale, or 1/sqrt(head_dim) when it is None");
  attention.def("sdpa_supported", &mytorch::attention::sdpa_supported, pybind11::arg("query"),
                pybind11::arg("key"), pybind11::arg("value"), pybind11::arg("attn_mask"),
                pybind11::arg("dropout_p"), pybind11::arg("is_causal"), pybind11::arg("enable_gqa"),
                pybind11::arg("mask_grad") = false,
                "Whether mytorch::flash_attn serves this F.scaled_dot_product_attention call");
  attention.def("cpu_amx", &mytorch::cpu::amx_attention_available,
                "Whether the CPU forward runs bfloat16 on AMX tiles here (MYTORCH_CPU_AMX=0: never)");
  m.def("set_num_threads", [](int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
  });
}
