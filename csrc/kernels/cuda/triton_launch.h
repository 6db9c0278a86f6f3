// Launching Triton-compiled kernels from C++, without Python on the call.
//
// Triton compiles a @triton.jit function once per specialization: the constexpr values and,
// for each runtime argument, what Triton reads off its value (an int equal to 1 becomes a
// constant and leaves the parameter list; ints and pointers divisible by 16 are compiled
// with that hint; ints past 32 bits become i64). A `Kernel` is one such compilation: its
// CUfunction, launch geometry and the parameter type of each positional argument, as the
// Python side (mytorch_ext/triton/launch_record.py) read them off the CompiledKernel.
// `launch` packs the arguments the way Triton's own launcher does (the kernel parameters,
// then the global and profile scratch pointers) and calls cuLaunchKernelEx.
//
// `spec_key` appends the specialization class of each argument to a cache key, so that a
// Kernel found under a key is valid for every argument list with that key.
//
// `Plans` caches, per op, a call's plan (which kernels, compiled for which specialization)
// under a key its launcher builds from everything that picks the plan. The first call with
// a new key runs the op's Python launcher through mytorch_ext/triton/launch_record.py, which
// compiles, launches and reports each launch's compiled kernel; later calls with that key
// launch the kernels from C++. A kernel C++ cannot replay (a Triton whose compiled kernels
// it does not understand) keeps the Python launcher for its key, with one warning per op.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/FunctionRef.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mytorch {
namespace cuda {
namespace triton {

// One positional argument of a Triton kernel, as the C++ launcher computes it.
struct Arg {
  enum Kind : uint8_t { kPtr, kInt, kFloat, kDesc } kind;
  int64_t i = 0;         // kInt; kPtr / kDesc: the address
  double f = 0.0;        // kFloat
  int64_t shape[4]{};    // kDesc: a host-side tensor descriptor of rank 4 (elements)
  int64_t strides[4]{};  // kDesc (elements)

  static Arg ptr(const void* p) { return {kPtr, reinterpret_cast<int64_t>(p)}; }
  static Arg ptr(const at::Tensor& t) { return ptr(t.data_ptr()); }
  static Arg integer(int64_t v) { return {kInt, v}; }
  static Arg real(double v) {
    Arg a{kFloat};
    a.f = v;
    return a;
  }
  static Arg desc(const at::Tensor& t);  // rank-4 tensor, last stride 1
};

// The type Triton compiled a positional argument with.
enum class Param : uint8_t { kConst, kPtr, kI1, kI32, kI64, kU64, kF32, kDesc };

struct TmaMeta {  // per descriptor argument: how the kernel expects its CUtensorMap
  int swizzle = 0, elem_size = 0, elem_type = 0;
  uint32_t block[4]{};
};

struct Kernel {
  void* function = nullptr;  // CUfunction, loaded in the device's primary context
  int num_warps = 4, num_ctas = 1, shared = 0;
  int64_t global_scratch = 0, global_scratch_align = 1;
  bool cooperative = false, pdl = false;
  int block_m = 0, block_n = 0;  // the launch configuration the grid is computed from
  int grid_cap = 0;  // > 0: a 1-D grid of at most this many programs (persistent when below the tiles)
  std::vector<Param> params;     // one per positional argument
  std::vector<TmaMeta> tma;      // one per kDesc argument, in order
};

// Appends a pointer argument per tensor, an integer argument per value.
inline void push_ptrs(std::vector<Arg>& a, std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts) a.push_back(Arg::ptr(*t));
}
inline void push_ints(std::vector<Arg>& a, std::initializer_list<int64_t> xs) {
  for (int64_t x : xs) a.push_back(Arg::integer(x));
}

// Appends the specialization class of each argument (see above) to key.
void spec_key(std::string& key, const std::vector<Arg>& args);

// Launches kernel on the current stream of device with grid (x, y, z).
void launch(const Kernel& kernel, int64_t x, int64_t y, int64_t z, const std::vector<Arg>& args,
            const at::Device& device);

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// triton.next_power_of_2: the smallest power of 2 >= n (1 for n <= 1).
inline int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

struct Plan {
  bool python_only = false;                         // served by the Python launcher
  std::unordered_map<std::string, Kernel> kernels;  // by the kind its launch site reports
};

class Plans {
 public:
  // require_triton: before the first Python launch of each key, mytorch_ext._info.require_triton
  // checks that Triton can run the op (a one-line error naming it otherwise).
  explicit Plans(const char* op, bool require_triton = false) : op_(op), require_triton_(require_triton) {}

  // The plan kept under key, to launch from C++; or null, when the Python launcher
  // launch_record.<fn>(*args()) served the call (under the GIL; args() builds the arguments)
  // and `outputs` holds what it returned. Its first call with a key keeps the plan it reports
  // under key: python_only when a kernel cannot be replayed or a kind in `required` (null
  // entries aside) is missing from the report, so that later calls take the Python launcher.
  std::shared_ptr<const Plan> find_or_run(const std::string& key, const char* fn,
                                          c10::function_ref<pybind11::tuple()> args,
                                          std::vector<at::Tensor>& outputs,
                                          std::initializer_list<const char*> required = {});

 private:
  std::shared_ptr<const Plan> find(const std::string& key) const;
  // Runs the Python launcher and returns the call's outputs; with store, keeps its plan.
  pybind11::tuple record(const std::string& key, bool store, const char* fn, const pybind11::tuple& args,
                         const std::vector<const char*>& required);

  const char* op_;
  bool require_triton_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_;
  std::once_flag warned_;
};

// An optional tensor as a Python launcher takes it: the tensor, or None. With the GIL held.
pybind11::object py_optional(const std::optional<at::Tensor>& t);

}  // namespace triton
}  // namespace cuda
}  // namespace mytorch
