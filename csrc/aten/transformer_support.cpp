// Small aten ops that transformer models run on the mytorch device while building
// positions and masks: arange (position ids), triu/tril (causal masks), sin/cos
// (rotary embeddings). Native kernels, so training needs no CPU fallback.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/native/Resize.h>

#include <cmath>

#include "aten/ops.h"
#include "checks.h"

namespace mytorch {
namespace aten {
namespace {

constexpr int64_t kGrain = 1 << 15;

// upper (triu): keep j - i >= diagonal; lower (tril): keep j - i <= diagonal.
at::Tensor& tri_out(const char* op, const at::Tensor& self, int64_t diagonal, bool upper,
                    at::Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, op, ": expected a tensor of at least 2 dims, got ", self.dim(), "-D");
  mytorch::check_same_dtype(op, out, "out", self, "self");
  at::Tensor x = self.contiguous();
  at::native::resize_output(out, x.sizes());
  at::Tensor o = out.is_contiguous() ? out : at::empty_like(x);
  const int64_t R = x.size(-2), C = x.size(-1), B = R * C == 0 ? 0 : x.numel() / (R * C);
  AT_DISPATCH_ALL_TYPES_AND3(at::kBool, at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_tri", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* op_ = o.mutable_data_ptr<scalar_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) {
          const int64_t k = (b * R + i) * C + j;
          const bool keep = upper ? (j - i >= diagonal) : (j - i <= diagonal);
          op_[k] = keep ? xp[k] : scalar_t(0);
        }
  });
  if (!o.is_same(out)) out.copy_(o);
  return out;
}

}  // namespace


at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                       at::Tensor& out) {
  const char* op = "mytorch::arange";
  const double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  TORCH_CHECK(st != 0, op, ": expected a nonzero step, got 0");
  TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), op, ": upper bound ", e,
              " and lower bound ", s, " are inconsistent with step sign ", st);
  int64_t n;
  if (at::isIntegralType(out.scalar_type(), /*includeBool=*/false) && start.isIntegral(false) &&
      end.isIntegral(false) && step.isIntegral(false)) {
    const int64_t is = start.toLong(), ie = end.toLong(), ist = step.toLong();
    n = (ie - is + ist + (ist > 0 ? -1 : 1)) / ist;
  } else {
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  at::native::resize_output(out, {n});
  AT_DISPATCH_ALL_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "mytorch_arange", [&] {
    scalar_t* p = out.mutable_data_ptr<scalar_t>();
    const int64_t so = out.stride(0);
    if constexpr (std::is_integral<scalar_t>::value) {
      const int64_t is = start.toLong(), ist = step.toLong();
      for (int64_t i = 0; i < n; ++i) p[i * so] = static_cast<scalar_t>(is + i * ist);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i * so] = static_cast<scalar_t>(s + static_cast<double>(i) * st);
    }
  });
  return out;
}

at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return tri_out("mytorch::triu", self, diagonal, true, out);
}
at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return tri_out("mytorch::tril", self, diagonal, false, out);
}

template <bool kSin>
at::Tensor& sincos_out(const at::Tensor& self, at::Tensor& out) {
  const char* op = kSin ? "mytorch::sin" : "mytorch::cos";
  mytorch::check_floating(op, "self", self);
  mytorch::check_same_dtype(op, out, "out", self, "self");
  at::Tensor x = self.contiguous();
  at::native::resize_output(out, x.sizes());
  at::Tensor o = out.is_contiguous() ? out : at::empty_like(x);
  const int64_t n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_sincos", [&] {
    using A = at::opmath_type<scalar_t>;
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* op_ = o.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const A v = static_cast<A>(xp[i]);
        op_[i] = static_cast<scalar_t>(kSin ? std::sin(v) : std::cos(v));
      }
    });
  });
  if (!o.is_same(out)) out.copy_(o);
  return out;
}

template at::Tensor& sincos_out<true>(const at::Tensor&, at::Tensor&);
template at::Tensor& sincos_out<false>(const at::Tensor&, at::Tensor&);

}  // namespace aten
}  // namespace mytorch
