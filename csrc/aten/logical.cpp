// Boolean and bitwise ops, any / all, cumsum and isin on the mytorch device: what a
// Hugging Face generate() runs between its model calls (stopping criteria, padding masks,
// position ids), so that generation needs no CPU fallback. Operands are brought to one
// contiguous dtype with copy_cast_ (which also broadcasts and takes CPU scalars), then
// simple OpenMP loops compute.
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "aten/ops.h"
#include "checks.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace aten {
namespace {

namespace mc = mytorch::cpu;

constexpr int64_t kGrain = 1 << 15;

// `t` in `dtype` with `shape` (broadcast), contiguous, on `device`.
Tensor materialize(const Tensor& t, at::IntArrayRef shape, at::ScalarType dtype,
                   const c10::Device& device) {
  Tensor r = at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
  mc::copy_cast_(r, t);
  return r;
}

// Writes `r` (the result, in its own dtype) into `out` as an ATen out= argument.
Tensor& write_out(const Tensor& r, Tensor& out) {
  if (r.is_same(out)) return out;
  at::native::resize_output(out, r.sizes());
  mc::copy_cast_(out, r);
  return out;
}

bool is_cpu_scalar(const Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

c10::Device device_of(const char* op, const Tensor& a, const Tensor& b) {
  return mc::common_device(op, {a, b});
}

// x's truth values as a contiguous bool tensor.
Tensor truth(const Tensor& x) {
  return materialize(x, x.sizes(), at::kBool, x.device());
}

// ATen: any / all return uint8 for uint8 input, bool otherwise.
at::ScalarType reduce_dtype(const Tensor& x) {
  return x.scalar_type() == at::kByte ? at::kByte : at::kBool;
}

}  // namespace

// ---- bitwise and / or / xor ----
template <Bit kOp>
Tensor& bitwise_out(const Tensor& self, const Tensor& other, Tensor& out) {
  const char* op = kOp == Bit::And ? "mytorch::bitwise_and"
                   : kOp == Bit::Or ? "mytorch::bitwise_or" : "mytorch::bitwise_xor";
  const at::ScalarType dt = at::result_type(self, other);
  TORCH_CHECK(at::isIntegralType(dt, /*includeBool=*/true), op,
              ": expected integer or bool operands, got ", self.scalar_type(), " and ",
              other.scalar_type());
  const c10::Device dev = device_of(op, self, other);
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  Tensor a = materialize(self, shape, dt, dev), b = materialize(other, shape, dt, dev);
  TORCH_CHECK(at::canCast(dt, out.scalar_type()), op, ": result type ", dt,
              " can't be cast to the desired output type ", out.scalar_type());
  const int64_t n = a.numel();
  AT_DISPATCH_INTEGRAL_TYPES_AND(at::kBool, dt, "mytorch_bitwise", [&] {
    scalar_t* ap = a.mutable_data_ptr<scalar_t>();
    const scalar_t* bp = b.const_data_ptr<scalar_t>();
    at::parallel_for(0, n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        if constexpr (kOp == Bit::And) ap[i] = static_cast<scalar_t>(ap[i] & bp[i]);
        else if constexpr (kOp == Bit::Or) ap[i] = static_cast<scalar_t>(ap[i] | bp[i]);
        else ap[i] = static_cast<scalar_t>(ap[i] ^ bp[i]);
      }
    });
  });
  return write_out(a, out);
}

Tensor& bitwise_not_out(const Tensor& self, Tensor& out) {
  const char* op = "mytorch::bitwise_not";
  const at::ScalarType dt = self.scalar_type();
  TORCH_CHECK(at::isIntegralType(dt, /*includeBool=*/true), op,
              ": expected an integer or bool tensor, got ", dt);
  Tensor a = materialize(self, self.sizes(), dt, self.device());
  const int64_t n = a.numel();
  AT_DISPATCH_INTEGRAL_TYPES_AND(at::kBool, dt, "mytorch_bitwise_not", [&] {
    scalar_t* ap = a.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        if constexpr (std::is_same_v<scalar_t, bool>) ap[i] = !ap[i];
        else ap[i] = static_cast<scalar_t>(~ap[i]);
      }
    });
  });
  return write_out(a, out);
}

// ---- any / all ----
template <bool kAny>
Tensor& any_all_out(const Tensor& self, Tensor& out) {
  const char* op = kAny ? "mytorch::any" : "mytorch::all";
  Tensor t = truth(self);
  const bool* p = t.const_data_ptr<bool>();
  const int64_t n = t.numel();
  bool r = !kAny;
  for (int64_t i = 0; i < n; ++i)
    if (p[i] == kAny) {
      r = kAny;
      break;
    }
  Tensor res = at::empty({}, self.options().dtype(reduce_dtype(self)));
  res.fill_(r);
  return write_out(res, out);
}

template <bool kAny>
Tensor& any_dims_out(const Tensor& self, OptDims dims_, bool keepdim, Tensor& out) {
  const char* op = kAny ? "mytorch::any" : "mytorch::all";
  const int64_t nd = self.dim();
  std::vector<bool> reduce(std::max<int64_t>(nd, 1), false);
  if (!dims_.has_value() || dims_->empty()) {
    if (!dims_.has_value()) std::fill(reduce.begin(), reduce.end(), true);
  } else {
    for (int64_t d : *dims_) reduce[mytorch::wrap_dim(op, d, nd)] = true;
  }
  Tensor t = truth(self);
  // permute: kept dims first, reduced dims last; then rows of `inner` reduced elements
  std::vector<int64_t> order, kept_shape, out_shape;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduce[d]) {
      order.push_back(d);
      kept_shape.push_back(t.size(d));
    }
  for (int64_t d = 0; d < nd; ++d)
    if (reduce[d]) order.push_back(d);
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduce[d]) out_shape.push_back(t.size(d));
    else if (keepdim) out_shape.push_back(1);
  }
  Tensor p = nd == 0 ? t.reshape({1}) : t.permute(order).contiguous();
  int64_t rows = 1;
  for (int64_t s : kept_shape) rows *= s;
  const int64_t inner = rows == 0 ? 0 : p.numel() / rows;
  Tensor res = at::empty(out_shape, self.options().dtype(reduce_dtype(self)));
  Tensor rb = at::empty({rows}, self.options().dtype(at::kBool));
  const bool* pp = p.const_data_ptr<bool>();
  bool* rp = rb.mutable_data_ptr<bool>();
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)),
                   [&](int64_t s, int64_t e) {
                     for (int64_t r = s; r < e; ++r) {
                       bool v = !kAny;
                       for (int64_t k = 0; k < inner; ++k)
                         if (pp[r * inner + k] == kAny) {
                           v = kAny;
                           break;
                         }
                       rp[r] = v;
                     }
                   });
  mc::copy_cast_(res, rb.view(res.sizes()));
  return write_out(res, out);
}

template <bool kAny>
Tensor& any_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  return any_dims_out<kAny>(self, at::IntArrayRef{dim}, keepdim, out);
}

// ---- cumsum ----
Tensor& cumsum_out(const Tensor& self, int64_t dim, OptType dtype, Tensor& out) {
  const char* op = "mytorch::cumsum";
  const int64_t d = mytorch::wrap_dim(op, dim, self.dim());
  at::ScalarType dt = dtype.has_value() ? *dtype
                      : at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                          ? at::kLong
                          : self.scalar_type();
  TORCH_CHECK(!at::isComplexType(dt), op, ": complex dtypes are not supported, got ", dt);
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor c = materialize(x, x.sizes(), dt, self.device());
  int64_t outer = 1, inner = 1;
  const int64_t len = c.size(d);
  for (int64_t k = 0; k < d; ++k) outer *= c.size(k);
  for (int64_t k = d + 1; k < c.dim(); ++k) inner *= c.size(k);
  AT_DISPATCH_ALL_TYPES_AND2(at::kBFloat16, at::kHalf, dt, "mytorch_cumsum", [&] {
    using acc_t = std::conditional_t<std::is_integral_v<scalar_t>, int64_t, double>;
    scalar_t* p = c.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, outer * inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(len, 1)),
                     [&](int64_t s, int64_t e) {
                       for (int64_t w = s; w < e; ++w) {
                         scalar_t* q = p + (w / inner) * len * inner + (w % inner);
                         acc_t acc = 0;
                         for (int64_t i = 0; i < len; ++i) {
                           acc += static_cast<acc_t>(q[i * inner]);
                           q[i * inner] = static_cast<scalar_t>(acc);
                         }
                       }
                     });
  });
  if (self.dim() == 0) c = c.reshape({});
  return write_out(c, out);
}

// ---- isin ----
Tensor& isin_out(const Tensor& elements, const Tensor& test_elements, bool assume_unique,
                 bool invert, Tensor& out) {
  (void)assume_unique;
  const char* op = "mytorch::isin";
  const at::ScalarType dt = at::result_type(elements, test_elements);
  TORCH_CHECK(!at::isComplexType(dt), op, ": complex dtypes are not supported, got ", dt);
  const c10::Device dev = device_of(op, elements, test_elements);
  Tensor e = materialize(elements, elements.sizes(), dt, dev);
  Tensor t = materialize(test_elements, test_elements.sizes(), dt, dev);
  Tensor res = at::empty(elements.sizes(), e.options().dtype(at::kBool));
  AT_DISPATCH_ALL_TYPES_AND3(at::kBool, at::kBFloat16, at::kHalf, dt, "mytorch_isin", [&] {
    const scalar_t* tp = t.const_data_ptr<scalar_t>();
    std::vector<scalar_t> sorted(tp, tp + t.numel());
    auto less = [](scalar_t a, scalar_t b) { return static_cast<double>(a) < static_cast<double>(b); };
    // NaN is in no set (NaN != NaN): leave NaNs out of the sorted list
    sorted.erase(std::remove_if(sorted.begin(), sorted.end(),
                                [](scalar_t v) { return std::isnan(static_cast<double>(v)); }),
                 sorted.end());
    std::sort(sorted.begin(), sorted.end(), less);
    const scalar_t* ep = e.const_data_ptr<scalar_t>();
    bool* rp = res.mutable_data_ptr<bool>();
    at::parallel_for(0, e.numel(), 1 << 12, [&](int64_t s, int64_t f) {
      for (int64_t i = s; i < f; ++i) {
        const bool found = !std::isnan(static_cast<double>(ep[i])) &&
                           std::binary_search(sorted.begin(), sorted.end(), ep[i], less);
        rp[i] = found != invert;
      }
    });
  });
  return write_out(res, out);
}

Tensor& isin_tensor_scalar_out(const Tensor& elements, const at::Scalar& test_element,
                               bool assume_unique, bool invert, Tensor& out) {
  return isin_out(elements, mc::wrap_scalar(test_element), assume_unique, invert, out);
}

Tensor& isin_scalar_tensor_out(const at::Scalar& element, const Tensor& test_elements,
                               bool assume_unique, bool invert, Tensor& out) {
  return isin_out(mc::wrap_scalar(element), test_elements,
                  assume_unique, invert, out);
}

template Tensor& bitwise_out<Bit::And>(const Tensor&, const Tensor&, Tensor&);
template Tensor& bitwise_out<Bit::Or>(const Tensor&, const Tensor&, Tensor&);
template Tensor& bitwise_out<Bit::Xor>(const Tensor&, const Tensor&, Tensor&);
#define MYTORCH_ANY_ALL_INSTANTIATE(ANY)                                         \
  template Tensor& any_all_out<ANY>(const Tensor&, Tensor&);                     \
  template Tensor& any_dim_out<ANY>(const Tensor&, int64_t, bool, Tensor&);      \
  template Tensor& any_dims_out<ANY>(const Tensor&, OptDims, bool, Tensor&);
MYTORCH_ANY_ALL_INSTANTIATE(true)
MYTORCH_ANY_ALL_INSTANTIATE(false)
#undef MYTORCH_ANY_ALL_INSTANTIATE

}  // namespace aten
}  // namespace mytorch
