// Dropout (OpenMP): out = x * mask / (1 - p), mask ~ Bernoulli(1 - p).
//
// Each call draws one 64-bit key from the generator of the tensor's device (the
// CPU generator or the mytorch device's, under its lock); element i keeps iff hash(key, i) < (1 - p). The mask is a pure function
// of the key, so the same seed gives the same mask for any thread count.
#include "kernels/dropout.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/DistributionsHelper.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "device/generator.h"

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t draw_key(const c10::optional<at::Generator>& gen, const at::Tensor& t) {
  at::CPUGeneratorImpl* g =
      t.device().type() == c10::DeviceType::PrivateUse1
          ? mytorch::device::get_generator(gen, t.device())
          : at::get_generator_or_default<at::CPUGeneratorImpl>(gen, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->random64();
}

template <typename T>
void dropout_kernel(const T* x, T* y, bool* mask, int64_t n, double p, uint64_t key) {
  using A = at::opmath_type<T>;
  const A scale = p >= 1.0 ? A(0) : A(1.0 / (1.0 - p));
  // keep iff u < 1 - p with u uniform on [0, 1) in 2^-53 steps
  const double keep = 1.0 - p;
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix64(key ^ (static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull)) >> 11) *
                     (1.0 / 9007199254740992.0);
    const bool k = u < keep;
    mask[i] = k;
    y[i] = k ? static_cast<T>(static_cast<A>(x[i]) * scale) : T(0);
  }
}

template <typename T>
void dropout_backward_kernel(const T* g, const bool* mask, T* gx, int64_t n, double scale) {
  using A = at::opmath_type<T>;
  const A s = static_cast<A>(scale);
#pragma omp parallel for simd schedule(static) if (n > kGrain)
  // g * (mask * scale), as ATen: a dropped Inf or NaN gradient stays NaN, not 0
  for (int64_t i = 0; i < n; ++i) gx[i] = static_cast<T>(static_cast<A>(g[i]) * (mask[i] ? s : A(0)));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> dropout(const at::Tensor& input, double p, bool train,
                                           const c10::optional<at::Generator>& generator) {
  const char* op = "mytorch::dropout";
  dropout::check_forward(op, input, p);
  at::Tensor x = input.contiguous();
  at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  if (!train || p == 0.0) {
    bool* mp = mask.mutable_data_ptr<bool>();
    std::fill(mp, mp + n, true);
    if (n > 0) std::memcpy(y.mutable_data_ptr(), x.const_data_ptr(), n * x.element_size());
    return {y, mask};
  }
  const uint64_t key = draw_key(generator, x);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_dropout", [&] {
    dropout_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
                             mask.mutable_data_ptr<bool>(), n, p, key);
  });
  return {y, mask};
}

at::Tensor dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  const char* op = "mytorch::dropout_backward";
  dropout::check_backward(op, grad, mask);
  at::Tensor g = grad.contiguous(), m = mask.contiguous();
  at::Tensor gx = at::empty_like(g, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, g.scalar_type(), "mytorch_dropout_bwd", [&] {
    dropout_backward_kernel<scalar_t>(g.const_data_ptr<scalar_t>(), m.const_data_ptr<bool>(),
                                      gx.mutable_data_ptr<scalar_t>(), g.numel(), scale);
  });
  return gx;
}

}  // namespace cpu
}  // namespace mytorch
