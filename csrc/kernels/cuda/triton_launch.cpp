// Launching Triton-compiled kernels from C++ (see triton_launch.h).
#ifdef MYTORCH_WITH_CUDA
#include "kernels/cuda/triton_launch.h"

#include <ATen/cuda/CUDAContext.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace mytorch {
namespace cuda {
namespace triton {
namespace {

using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
using ErrorString = CUresult (*)(CUresult, const char**);

// Driver entry points through the runtime, so that the extension does not link libcuda.
struct Driver {
  LaunchEx launch_ex = nullptr;
  EncodeTiled encode_tiled = nullptr;
  ErrorString error_string = nullptr;
};

template <typename F>
void entry_point(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const cudaError_t err = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
  TORCH_CHECK(err == cudaSuccess && q == cudaDriverEntryPointSuccess && p != nullptr,
              "mytorch: the CUDA driver has no ", name, " (", cudaGetErrorString(err), ")");
  fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    entry_point("cuLaunchKernelEx", d.launch_ex);
    entry_point("cuTensorMapEncodeTiled", d.encode_tiled);
    entry_point("cuGetErrorString", d.error_string);
  });
  return d;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* msg = nullptr;
  driver().error_string(r, &msg);
  TORCH_CHECK(false, "mytorch: ", what, " failed: ", msg ? msg : "unknown CUDA driver error");
}

// Parameter storage: each value at its alignment, one pointer per kernel parameter.
struct Params {
  alignas(64) unsigned char buf[4096];
  size_t used = 0;
  void* ptrs[160];
  int n = 0;

  template <typename T>
  void push(const T& v, size_t align = alignof(T)) {
    used = (used + align - 1) / align * align;
    TORCH_CHECK(used + sizeof(T) <= sizeof(buf) && n < 160, "mytorch: too many Triton kernel parameters");
    std::memcpy(buf + used, &v, sizeof(T));
    ptrs[n++] = buf + used;
    used += sizeof(T);
  }
};

CUtensorMap encode(const Arg& a, const TmaMeta& m) {
  // dims innermost first, as the driver wants them; strides in bytes, the innermost implied
  cuuint64_t dims[4], strides[3];
  cuuint32_t box[4], elem_strides[4] = {1, 1, 1, 1};
  for (int i = 0; i < 4; ++i) {
    dims[i] = static_cast<cuuint64_t>(a.shape[3 - i]);
    box[i] = m.block[3 - i];
  }
  for (int i = 0; i < 3; ++i) strides[i] = static_cast<cuuint64_t>(a.strides[2 - i] * m.elem_size);
  CUtensorMap map;
  check(driver().encode_tiled(&map, static_cast<CUtensorMapDataType>(m.elem_type), 4,
                              reinterpret_cast<void*>(a.i), dims, strides, box, elem_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, static_cast<CUtensorMapSwizzle>(m.swizzle),
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled");
  return map;
}

namespace py = pybind11;

// One compiled kernel as launch_record.describe() reports it.
Kernel parse_kernel(const py::tuple& d) {
  Kernel k;
  k.function = reinterpret_cast<void*>(d[1].cast<uint64_t>());
  k.num_warps = d[2].cast<int>();
  k.num_ctas = d[3].cast<int>();
  k.shared = d[4].cast<int>();
  k.global_scratch = d[5].cast<int64_t>();
  k.global_scratch_align = std::max<int64_t>(1, d[6].cast<int64_t>());
  k.cooperative = d[7].cast<bool>();
  k.pdl = d[8].cast<bool>();
  k.block_m = d[9].cast<int>();
  k.block_n = d[10].cast<int>();
  for (auto p : d[11].cast<py::list>()) k.params.push_back(static_cast<Param>(p.cast<int>()));
  for (auto t : d[12].cast<py::list>()) {
    auto m = t.cast<py::tuple>();
    TmaMeta meta;
    meta.swizzle = m[0].cast<int>();
    meta.elem_size = m[1].cast<int>();
    meta.elem_type = m[2].cast<int>();
    auto block = m[3].cast<std::vector<int64_t>>();
    TORCH_CHECK(block.size() == 4, "mytorch: a TMA block of rank ", block.size());
    for (int i = 0; i < 4; ++i) meta.block[i] = static_cast<uint32_t>(block[i]);
    k.tma.push_back(meta);
  }
  if (d.size() > 13) k.grid_cap = d[13].cast<int>();
  return k;
}

}  // namespace

std::shared_ptr<const Plan> Plans::find_or_run(const std::string& key, const char* fn,
                                               c10::function_ref<py::tuple()> args,
                                               std::vector<at::Tensor>& outputs,
                                               std::initializer_list<const char*> required) {
  auto plan = find(key);
  if (plan && !plan->python_only) return plan;
  std::vector<const char*> kinds;
  for (const char* kind : required)
    if (kind != nullptr) kinds.push_back(kind);
  py::gil_scoped_acquire gil;
  if (!plan && require_triton_) py::module_::import("mytorch_ext._info").attr("require_triton")(op_);
  py::tuple r = record(key, !plan, fn, args(), kinds);
  outputs.clear();
  for (auto item : r) outputs.push_back(item.cast<at::Tensor>());
  return nullptr;
}

py::object py_optional(const std::optional<at::Tensor>& t) { return t.has_value() ? py::cast(*t) : py::none(); }

std::shared_ptr<const Plan> Plans::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second;
}

py::tuple Plans::record(const std::string& key, bool store, const char* fn, const py::tuple& args,
                        const std::vector<const char*>& required) {
  static py::object* module = new py::object(py::module_::import("mytorch_ext.triton.launch_record"));
  py::tuple res = module->attr(fn)(*args);
  if (!store) return res[0].cast<py::tuple>();
  auto plan = std::make_shared<Plan>();
  std::string why;
  for (auto item : res[1].cast<py::list>()) {
    if (item.is_none()) {
      plan->python_only = true;
      why = res[2].cast<std::string>();
      continue;
    }
    auto d = item.cast<py::tuple>();
    plan->kernels.emplace(d[0].cast<std::string>(), parse_kernel(d));
  }
  for (const char* kind : required) {
    if (!plan->python_only && plan->kernels.count(kind) == 0) {
      plan->python_only = true;
      why = std::string("no compiled kernel reported for ") + kind;
    }
  }
  if (plan->python_only)
    std::call_once(warned_, [&] {
      TORCH_WARN(op_, ": this Triton's compiled kernels cannot be launched from C++ (", why,
                 "); the Python launcher serves them");
    });
  std::lock_guard<std::mutex> lock(mutex_);
  plans_.emplace(key, std::move(plan));
  return res[0].cast<py::tuple>();
}

Arg Arg::desc(const at::Tensor& t) {
  Arg a{kDesc, reinterpret_cast<int64_t>(t.data_ptr())};
  for (int i = 0; i < 4; ++i) {
    a.shape[i] = t.size(i);
    a.strides[i] = t.stride(i);
  }
  return a;
}

void spec_key(std::string& key, const std::vector<Arg>& args) {
  for (const Arg& a : args) {
    switch (a.kind) {
      case Arg::kPtr:
        key += a.i % 16 == 0 ? 'P' : 'p';
        break;
      case Arg::kInt:
        if (a.i == 1) {
          key += '1';
        } else {
          const bool i32 = a.i >= INT32_MIN && a.i <= INT32_MAX;
          key += i32 ? (a.i % 16 == 0 ? 'I' : 'i') : (a.i % 16 == 0 ? 'L' : 'l');
        }
        break;
      case Arg::kFloat:
        key += 'f';
        break;
      case Arg::kDesc:
        key += 'T';
        break;
    }
  }
}

void launch(const Kernel& k, int64_t x, int64_t y, int64_t z, const std::vector<Arg>& args,
            const at::Device& device) {
  TORCH_CHECK(k.params.size() == args.size(), "mytorch: a Triton kernel of ", k.params.size(),
              " arguments launched with ", args.size());
  if (x * y * z == 0) return;
  Params p;
  size_t desc_index = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    switch (k.params[i]) {
      case Param::kConst:
        break;
      case Param::kPtr:
      case Param::kU64:
        p.push(static_cast<uint64_t>(a.i));
        break;
      case Param::kI1:
        p.push(static_cast<int8_t>(a.i != 0));
        break;
      case Param::kI32:
        p.push(static_cast<int32_t>(a.i));
        break;
      case Param::kI64:
        p.push(static_cast<int64_t>(a.i));
        break;
      case Param::kF32:
        p.push(static_cast<float>(a.kind == Arg::kFloat ? a.f : static_cast<double>(a.i)));
        break;
      case Param::kDesc: {
        TORCH_CHECK(desc_index < k.tma.size(), "mytorch: a Triton kernel has no layout for descriptor ",
                    desc_index);
        p.push(encode(a, k.tma[desc_index++]), 64);
        for (int d = 0; d < 4; ++d) p.push(static_cast<int32_t>(a.shape[d]));
        for (int d = 0; d < 4; ++d) p.push(static_cast<int64_t>(a.strides[d]));
        break;
      }
    }
  }
  // scratch: Triton's launcher passes a global and a profile scratch pointer last
  at::Tensor scratch;
  void* global_scratch = nullptr;
  if (k.global_scratch > 0) {
    const int64_t bytes = x * y * z * k.num_ctas * k.global_scratch + k.global_scratch_align;
    scratch = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
    const auto base = reinterpret_cast<uintptr_t>(scratch.data_ptr());
    const auto al = static_cast<uintptr_t>(k.global_scratch_align);
    global_scratch = reinterpret_cast<void*>((base + al - 1) / al * al);
  }
  p.push(global_scratch);
  p.push(static_cast<void*>(nullptr));

  CUlaunchAttribute attrs[4];
  unsigned n_attrs = 0;
  if (k.pdl) {
    attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n_attrs++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (k.cooperative) {
    attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n_attrs++].value.cooperative = 1;
  }
  if (k.num_ctas != 1) {
    attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n_attrs].value.clusterDim.x = k.num_ctas;
    attrs[n_attrs].value.clusterDim.y = 1;
    attrs[n_attrs++].value.clusterDim.z = 1;
  }
  CUlaunchConfig cfg{};
  cfg.gridDimX = static_cast<unsigned>(x * k.num_ctas);
  cfg.gridDimY = static_cast<unsigned>(y);
  cfg.gridDimZ = static_cast<unsigned>(z);
  cfg.blockDimX = 32 * k.num_warps;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = k.shared;
  cfg.hStream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  cfg.attrs = attrs;
  cfg.numAttrs = n_attrs;
  check(driver().launch_ex(&cfg, static_cast<CUfunction>(k.function), p.ptrs, nullptr), "cuLaunchKernelEx");
}

}  // namespace triton
}  // namespace cuda
}  // namespace mytorch
#endif  // MYTORCH_WITH_CUDA
