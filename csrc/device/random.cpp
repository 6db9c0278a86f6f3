// Random sampling on the mytorch device, from the device's own generator (see
// generator.h): normal_, uniform_, bernoulli_/bernoulli, random_ (randint), randperm.
// randn, rand, randint, *_like are ATen composites over these. Samples are drawn one
// after another in row-major order, so a seed fixes every value.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/core/DistributionsHelper.h>

#include <limits>
#include <mutex>
#include <numeric>
#include <vector>

#include "device/generator.h"
#include "device/ops.h"

namespace mytorch {
namespace device {

namespace {

// Runs fill(contiguous tensor) on self, through a contiguous buffer if self is strided.
template <typename F>
at::Tensor& sample_into(at::Tensor& self, F fill) {
  if (self.numel() == 0) return self;
  if (self.is_contiguous()) {
    fill(self);
  } else {
    at::Tensor tmp = at::empty(self.sizes(), self.options());
    fill(tmp);
    self.copy_(tmp);
  }
  return self;
}

void check_floating(const char* op, const at::Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op,
              ": expected a floating point tensor, got ", self.scalar_type());
}

// ---- kernels: contiguous buffers, one generator ----
template <typename T, typename Dist>
void draw(T* out, int64_t n, at::CPUGeneratorImpl* gen, const Dist& dist) {
  std::lock_guard<std::mutex> lock(gen->mutex_);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(dist(gen));
}

// values in [from, from + range); range == 0 means the whole 64-bit range
template <typename T>
void draw_integers(T* out, int64_t n, at::CPUGeneratorImpl* gen, int64_t from, uint64_t range) {
  std::lock_guard<std::mutex> lock(gen->mutex_);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    if (range == 0) {
      v = static_cast<int64_t>(gen->random64());
    } else if (range >= (uint64_t(1) << 32)) {
      v = static_cast<int64_t>(static_cast<uint64_t>(from) + gen->random64() % range);
    } else {
      v = static_cast<int64_t>(static_cast<uint64_t>(from) + gen->random() % range);
    }
    out[i] = static_cast<T>(v);
  }
}

}  // namespace

at::Tensor& normal_(at::Tensor& self, double mean, double std,
                    std::optional<at::Generator> generator) {
  check_floating("normal_", self);
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  auto* gen = get_generator(generator, self.device());
  return sample_into(self, [&](at::Tensor& t) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t.scalar_type(), "mytorch_normal_", [&] {
      draw(t.data_ptr<scalar_t>(), t.numel(), gen, at::normal_distribution<double>(mean, std));
    });
  });
}

at::Tensor& uniform_(at::Tensor& self, double from, double to,
                     std::optional<at::Generator> generator) {
  check_floating("uniform_", self);
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  auto* gen = get_generator(generator, self.device());
  return sample_into(self, [&](at::Tensor& t) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t.scalar_type(), "mytorch_uniform_", [&] {
      using acc = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
      draw(t.data_ptr<scalar_t>(), t.numel(), gen,
           at::uniform_real_distribution<acc>(static_cast<acc>(from), static_cast<acc>(to)));
    });
  });
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  auto* gen = get_generator(generator, self.device());
  return sample_into(self, [&](at::Tensor& t) {
    AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, t.scalar_type(), "mytorch_bernoulli_", [&] {
      draw(t.data_ptr<scalar_t>(), t.numel(), gen, at::bernoulli_distribution<double>(p));
    });
  });
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p,
                              std::optional<at::Generator> generator) {
  auto* gen = get_generator(generator, self.device());
  // probabilities as float64, in self's element order
  at::Tensor probs = p.to(self.device(), at::kDouble).expand(self.sizes()).contiguous();
  return sample_into(self, [&](at::Tensor& t) {
    const double* pp = probs.const_data_ptr<double>();
    AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, t.scalar_type(), "mytorch_bernoulli_", [&] {
      scalar_t* out = t.data_ptr<scalar_t>();
      std::lock_guard<std::mutex> lock(gen->mutex_);
      for (int64_t i = 0; i < t.numel(); ++i) {
        TORCH_CHECK(0 <= pp[i] && pp[i] <= 1, "bernoulli_: expected all probabilities in [0, 1], got ", pp[i]);
        at::uniform_real_distribution<double> u(0.0, 1.0);
        out[i] = static_cast<scalar_t>(u(gen) < pp[i]);
      }
    });
  });
}

at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  bernoulli_tensor_(out, self, generator);
  return out;
}

namespace {

// [0, 2^digits] for floating types (every integer there is exact), [0, max] for integers
std::pair<int64_t, uint64_t> default_range(at::ScalarType t) {
  int64_t hi = 0;
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, t, "mytorch_random_range", [&] {
    if constexpr (std::is_same_v<scalar_t, bool>) {
      hi = 1;
    } else if constexpr (std::is_floating_point_v<scalar_t> || std::is_same_v<scalar_t, at::Half> ||
                         std::is_same_v<scalar_t, at::BFloat16>) {
      hi = int64_t(1) << std::numeric_limits<scalar_t>::digits;
    } else {
      hi = static_cast<int64_t>(std::numeric_limits<scalar_t>::max());
    }
  });
  return {0, static_cast<uint64_t>(hi) + 1};
}

at::Tensor& random_range(at::Tensor& self, int64_t from, uint64_t range,
                         const std::optional<at::Generator>& generator) {
  auto* gen = get_generator(generator, self.device());
  return sample_into(self, [&](at::Tensor& t) {
    AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, t.scalar_type(), "mytorch_random_", [&] {
      draw_integers(t.data_ptr<scalar_t>(), t.numel(), gen, from, range);
    });
  });
}

}  // namespace

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> generator) {
  auto r = default_range(self.scalar_type());
  return random_range(self, r.first, r.second, generator);
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator) {
  if (to.has_value()) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from,
                " >= to=", *to);
    return random_range(self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from),
                        generator);
  }
  auto r = default_range(self.scalar_type());
  uint64_t hi = static_cast<uint64_t>(r.first) + r.second;  // one past the largest value
  TORCH_CHECK(static_cast<int64_t>(hi - 1) >= from || self.scalar_type() == at::kLong,
              "random_ expects 'from' to be at most the largest value of ", self.scalar_type(),
              ", got from=", from);
  // int64 with no upper bound starting at its minimum: the whole 64-bit range (range 0)
  return random_range(self, from, hi - static_cast<uint64_t>(from), generator);
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  return random_from_(self, 0, to, generator);
}

at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1,
              "randperm: expected out on a mytorch device, got ", out.device());
  if (at::isFloatingType(out.scalar_type())) {
    int64_t digits = 0;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "mytorch_randperm", [&] {
      digits = std::numeric_limits<scalar_t>::digits;
    });
    TORCH_CHECK(n <= (int64_t(1) << digits), "randperm: n is too large for result dtype ",
                out.scalar_type(), ", got n=", n);
  } else {
    TORCH_CHECK(at::isIntegralType(out.scalar_type(), /*includeBool=*/false),
                "randperm: expected an integer or floating out dtype, got ", out.scalar_type());
  }
  auto* gen = get_generator(generator, out.device());
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), int64_t(0));
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    for (int64_t i = 0; i + 1 < n; ++i) {
      uint64_t left = static_cast<uint64_t>(n - i);
      uint64_t r = left >= (uint64_t(1) << 32) ? gen->random64() : gen->random();
      std::swap(perm[i], perm[i + static_cast<int64_t>(r % left)]);
    }
  }
  out.resize_({n});
  if (n > 0) out.copy_(at::from_blob(perm.data(), {n}, at::TensorOptions().dtype(at::kLong)));
  return out;
}

}  // namespace device
}  // namespace mytorch
