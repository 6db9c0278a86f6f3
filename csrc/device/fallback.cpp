// The boxed CPU fallback. For an op with no native kernel on the mytorch device:
//  1. every mytorch tensor argument becomes a CPU tensor over the same memory (one CPU
//     storage per mytorch storage, so views of one buffer stay views of one buffer);
//     a mytorch `device=` argument becomes "cpu"; mytorch generators lend their state
//     to a CPU generator and take it back afterwards (for a random op without a
//     generator argument, to the CPU default generator);
//  2. the op runs on the CPU;
//  3. in-place and out= arguments were written in place; if the CPU op had to grow one,
//     the result is copied back (resizing the mytorch tensor). A returned view of an
//     input becomes the same view of the mytorch storage; a fresh result is copied to
//     the device.
// It warns once per op (MYTORCH_FALLBACK=warn), stays quiet (silent) or refuses
// (error), and counts every op it serves (fallback_counts()).
#include "device/fallback.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/core/enum_tag.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "device/device.h"
#include "device/generator.h"

namespace mytorch {
namespace device {

// ---- mode and counters ----
FallbackMode parse_fallback_mode(const std::string& s) {
  if (s == "warn") return FallbackMode::Warn;
  if (s == "silent") return FallbackMode::Silent;
  if (s == "error") return FallbackMode::Error;
  TORCH_CHECK_VALUE(false, "mytorch: the fallback mode must be 'warn', 'silent' or 'error', got '",
                    s, "'");
}

std::string fallback_mode_name(FallbackMode mode) {
  switch (mode) {
    case FallbackMode::Warn: return "warn";
    case FallbackMode::Silent: return "silent";
    case FallbackMode::Error: return "error";
  }
  return "warn";
}

namespace {

std::atomic<FallbackMode>& mode_ref() {
  static std::atomic<FallbackMode> mode([] {
    const char* env = std::getenv("MYTORCH_FALLBACK");
    return (env == nullptr || *env == '\0') ? FallbackMode::Warn : parse_fallback_mode(env);
  }());
  return mode;
}

std::mutex counts_mu;
std::map<std::string, int64_t> counts;
std::unordered_set<std::string> warned;

std::string full_name(const c10::FunctionSchema& schema) {
  return schema.overload_name().empty() ? schema.name()
                                        : schema.name() + "." + schema.overload_name();
}

bool is_device_tensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

}  // namespace

FallbackMode fallback_mode() { return mode_ref().load(); }
void set_fallback_mode(FallbackMode mode) { mode_ref().store(mode); }

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(counts_mu);
  return counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(counts_mu);
  counts.clear();
}

namespace {

// ---- CPU aliases of mytorch memory ----
void release_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

class Aliases {
 public:
  at::Tensor to_cpu(const at::Tensor& t) {
    if (!is_device_tensor(t)) return t;
    c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    auto it = cpu_of_.find(key);
    if (it == cpu_of_.end()) {
      c10::Storage orig = t.storage();
      c10::DataPtr dp(key->mutable_data(), new c10::Storage(orig), &release_storage,
                      c10::Device(c10::kCPU));
      c10::Storage cpu(c10::make_intrusive<c10::StorageImpl>(
          c10::StorageImpl::use_byte_size_t(), key->nbytes(), std::move(dp),
          at::getCPUAllocator(), /*resizable=*/true));
      it = cpu_of_.emplace(key, cpu).first;
      orig_of_.emplace(cpu.unsafeGetStorageImpl(), orig);
    }
    at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(it->second), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
    out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    if (t.is_conj()) out._set_conj(true);
    if (t.is_neg()) out._set_neg(true);
    orig_tensor_.emplace(out.unsafeGetTensorImpl(), t);
    return out;
  }

  // The mytorch tensor that a CPU result stands for, if it is one of our aliases or a
  // view of one; an undefined tensor otherwise.
  at::Tensor to_device(const at::Tensor& r) const {
    if (!r.defined() || !r.device().is_cpu()) return at::Tensor();
    auto t = orig_tensor_.find(r.unsafeGetTensorImpl());
    if (t != orig_tensor_.end()) return t->second;
    if (!r.has_storage()) return at::Tensor();
    auto s = orig_of_.find(r.storage().unsafeGetStorageImpl());
    if (s == orig_of_.end() || r.storage().data() != s->second.data()) return at::Tensor();
    at::Tensor v = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(s->second), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), r.dtype());
    v.unsafeGetTensorImpl()->set_sizes_and_strides(r.sizes(), r.strides(), r.storage_offset());
    if (r.is_conj()) v._set_conj(true);
    if (r.is_neg()) v._set_neg(true);
    return v;
  }

 private:
  std::unordered_map<c10::StorageImpl*, c10::Storage> cpu_of_;  // mytorch -> cpu storage
  std::unordered_map<c10::StorageImpl*, c10::Storage> orig_of_;  // cpu -> mytorch storage
  std::unordered_map<c10::TensorImpl*, at::Tensor> orig_tensor_;  // cpu alias -> argument
};

// After the CPU op: make the mytorch tensor hold what its CPU alias now holds.
void write_back(const at::Tensor& orig, const at::Tensor& cpu) {
  if (!is_device_tensor(orig) || !cpu.defined()) return;
  if (cpu.storage().data() == orig.storage().data()) {
    // written in place; only the geometry may have changed (e.g. out= resized within capacity)
    if (cpu.sizes() != orig.sizes() || cpu.strides() != orig.strides() ||
        cpu.storage_offset() != orig.storage_offset())
      orig.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(),
                                                         cpu.storage_offset());
    return;
  }
  at::_copy_from_and_resize(cpu, orig);  // the CPU op reallocated: copy the result back
}

// ---- ops whose CPU kernel is not the right one ----
using Redirect = std::function<void(torch::jit::Stack*)>;

// The geometry arguments of convolution_overrideable and its backward, popped off the stack
// (last first: groups, output_padding, transposed, dilation, padding, stride).
struct ConvGeometry {
  int64_t groups;
  std::vector<int64_t> output_padding;
  bool transposed;
  std::vector<int64_t> dilation, padding, stride;

  static ConvGeometry pop(torch::jit::Stack* s) {
    ConvGeometry g;
    g.groups = torch::jit::pop(*s).toInt();
    g.output_padding = torch::jit::pop(*s).toIntVector();
    g.transposed = torch::jit::pop(*s).toBool();
    g.dilation = torch::jit::pop(*s).toIntVector();
    g.padding = torch::jit::pop(*s).toIntVector();
    g.stride = torch::jit::pop(*s).toIntVector();
    return g;
  }
};

// convolution_overrideable is how at::convolution reaches a PrivateUse1 device; on CPU
// tensors the same arguments go to at::convolution.
void conv_forward(torch::jit::Stack* s) {
  const ConvGeometry g = ConvGeometry::pop(s);
  auto bias = torch::jit::pop(*s).toOptional<at::Tensor>();
  at::Tensor weight = torch::jit::pop(*s).toTensor();
  at::Tensor input = torch::jit::pop(*s).toTensor();
  torch::jit::push(*s, at::convolution(input, weight, bias, g.stride, g.padding, g.dilation, g.transposed,
                                       g.output_padding, g.groups));
}

void conv_backward(torch::jit::Stack* s) {
  auto mask = torch::jit::pop(*s).toBoolList();
  const ConvGeometry g = ConvGeometry::pop(s);
  at::Tensor weight = torch::jit::pop(*s).toTensor();
  at::Tensor input = torch::jit::pop(*s).toTensor();
  at::Tensor grad = torch::jit::pop(*s).toTensor();
  std::array<bool, 3> m{mask.get(0), mask.get(1), mask.get(2)};
  int64_t out_channels = g.transposed ? weight.size(1) * g.groups : weight.size(0);
  std::vector<int64_t> bias_sizes{out_channels};
  auto r = at::convolution_backward(grad, input, weight, bias_sizes, g.stride, g.padding, g.dilation,
                                    g.transposed, g.output_padding, g.groups, m);
  torch::jit::push(*s, std::get<0>(r), std::get<1>(r), std::get<2>(r));
}

const std::unordered_map<std::string, Redirect>& redirects() {
  static const std::unordered_map<std::string, Redirect> table = {
      {"aten::convolution_overrideable", conv_forward},
      {"aten::convolution_backward_overrideable", conv_backward},
  };
  return table;
}

// Ops that legitimately take CPU index tensors next to device tensors (as on CUDA).
bool accepts_cpu_tensors(const std::string& name) {
  static const std::unordered_set<std::string> ok = {
      "aten::index.Tensor", "aten::index.Tensor_out", "aten::index_put_", "aten::index_put",
      "aten::_index_put_impl_", "aten::_index_put_impl",
      "aten::_unsafe_index.Tensor", "aten::_unsafe_index_put"};
  return ok.count(name) > 0;
}

void note_device(const at::Tensor& t, std::optional<c10::Device>& dev, bool& cpu_tensor,
                 const std::string& name) {
  if (!t.defined()) return;
  if (is_device_tensor(t)) {
    TORCH_CHECK(!dev.has_value() || *dev == t.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *dev, " and ", t.device(), "! (in ", name, ")");
    dev = t.device();
  } else if (t.dim() > 0) {
    cpu_tensor = true;
  }
}

bool is_generator_arg(const c10::Argument& a) {
  auto ty = a.type();
  if (ty->kind() == c10::TypeKind::OptionalType)
    ty = ty->expectRef<c10::OptionalType>().getElementType();
  return ty->kind() == c10::TypeKind::GeneratorType;
}

struct LentGenerator {
  at::Generator device;
  at::Generator cpu;
};

void count_and_warn(const std::string& name) {
  FallbackMode mode = fallback_mode();
  TORCH_CHECK_NOT_IMPLEMENTED(mode != FallbackMode::Error, "mytorch: ", name,
                              " has no native kernel on the mytorch device, and "
                              "MYTORCH_FALLBACK=error forbids running it on the CPU");
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(counts_mu);
    counts[name]++;
    first = warned.insert(name).second;
  }
  if (first && mode == FallbackMode::Warn)
    TORCH_WARN("mytorch: ", name,
               " has no native kernel on the mytorch device; it runs on the CPU through the "
               "fallback (MYTORCH_FALLBACK=silent hides this warning, =error forbids it)");
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::string name = full_name(schema);
  count_and_warn(name);

  const auto& sargs = schema.arguments();
  const size_t nargs = sargs.size();
  const size_t first = stack->size() - nargs;

  // 1. where the results live; refuse mixed devices
  std::optional<c10::Device> dev;
  bool cpu_tensor = false;
  for (size_t i = 0; i < nargs; ++i) {
    const c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      note_device(v.toTensor(), dev, cpu_tensor, name);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) note_device(t, dev, cpu_tensor, name);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) note_device(e.toTensor(), dev, cpu_tensor, name);
    }
  }
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
      c10::Device d = make_device(v.toDevice().index());
      if (!dev.has_value()) dev = d;
      v = c10::IValue(c10::Device(c10::kCPU));
    }
  }
  TORCH_CHECK(!(dev.has_value() && cpu_tensor) || accepts_cpu_tensors(name),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              dev.has_value() ? *dev : c10::Device(c10::kCPU), " and cpu! (in ", name, ")");
  const c10::Device target = dev.has_value() ? *dev : make_device(-1);
  c10::DeviceGuard guard(target);

  // 2. CPU aliases; remember the originals of mutable arguments
  Aliases aliases;
  std::vector<std::pair<at::Tensor, at::Tensor>> mutated;  // (mytorch, cpu alias)
  std::vector<LentGenerator> lent;
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[first + i];
    const auto* ai = sargs[i].alias_info();
    const bool writes = ai != nullptr && ai->isWrite();
    if (v.isTensor()) {
      at::Tensor t = v.toTensor();
      at::Tensor c = aliases.to_cpu(t);
      if (writes) mutated.emplace_back(t, c);
      v = c10::IValue(c);
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> ts = v.toTensorVector();
      std::vector<at::Tensor> cs;
      for (const at::Tensor& t : ts) {
        cs.push_back(aliases.to_cpu(t));
        if (writes) mutated.emplace_back(t, cs.back());
      }
      v = c10::IValue(c10::List<at::Tensor>(cs));
    } else if (v.isList() && sargs[i].type()->kind() == c10::TypeKind::ListType) {
      auto elem = sargs[i].type()->expectRef<c10::ListType>().getElementType();
      if (elem->kind() == c10::TypeKind::OptionalType &&
          elem->expectRef<c10::OptionalType>().getElementType()->kind() ==
              c10::TypeKind::TensorType) {
        c10::List<std::optional<at::Tensor>> cs;
        for (const c10::IValue& e : v.toListRef())
          cs.push_back(e.isTensor() ? std::optional<at::Tensor>(aliases.to_cpu(e.toTensor()))
                                    : std::nullopt);
        v = c10::IValue(cs);
      }
    } else if (is_generator_arg(sargs[i])) {
      at::Generator g = v.isGenerator() ? v.toGenerator() : default_generator(target.index());
      if (g.device().type() == c10::DeviceType::PrivateUse1) {
        at::Generator c = at::make_generator<at::CPUGeneratorImpl>();
        {
          std::lock_guard<std::mutex> lock(g.mutex());
          c.set_state(g.get_state());
        }
        lent.push_back({g, c});
        v = c10::IValue(c);
      }
    }
  }

  // Random ops without a generator argument (e.g. native_dropout) draw from the CPU
  // default generator: lend it the mytorch generator's state for the call.
  std::optional<LentGenerator> lent_default;
  at::Tensor cpu_default_state;
  if (op.hasTag(at::Tag::nondeterministic_seeded)) {
    at::Generator g = default_generator(target.index());
    at::Generator c = at::detail::getDefaultCPUGenerator();
    std::scoped_lock lock(g.mutex(), c.mutex());
    cpu_default_state = c.get_state();
    c.set_state(g.get_state());
    lent_default = LentGenerator{g, c};
  }

  // 3. run on the CPU
  auto redirect = redirects().find(name);
  try {
    if (redirect != redirects().end()) {
      redirect->second(stack);
    } else {
      op.callBoxed(stack);
    }
  } catch (...) {
    if (lent_default) {
      std::lock_guard<std::mutex> lock(lent_default->cpu.mutex());
      lent_default->cpu.set_state(cpu_default_state);
    }
    throw;
  }
  if (lent_default) {
    std::scoped_lock lock(lent_default->device.mutex(), lent_default->cpu.mutex());
    lent_default->device.set_state(lent_default->cpu.get_state());
    lent_default->cpu.set_state(cpu_default_state);
  }

  // 4. generators take their state back; in-place and out= arguments are written back
  for (auto& l : lent) {
    std::lock_guard<std::mutex> lock(l.device.mutex());
    l.device.set_state(l.cpu.get_state());
  }
  for (auto& m : mutated) write_back(m.first, m.second);

  // 5. results on the device
  const size_t nret = schema.returns().size();
  const size_t rfirst = stack->size() - nret;
  auto to_device = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined() || !r.device().is_cpu()) return r;
    at::Tensor a = aliases.to_device(r);
    return a.defined() ? a : r.to(target);
  };
  for (size_t i = 0; i < nret; ++i) {
    c10::IValue& v = (*stack)[rfirst + i];
    if (v.isTensor()) {
      v = c10::IValue(to_device(v.toTensor()));
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorVector()) out.push_back(to_device(t));
      v = c10::IValue(c10::List<at::Tensor>(out));
    }
  }
}

}  // namespace

}  // namespace device
}  // namespace mytorch

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&mytorch::device::cpu_fallback>());
}

