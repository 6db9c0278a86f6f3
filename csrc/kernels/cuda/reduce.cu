// Reductions over any set of dims (CUDA): sum, mean, prod, amax/amin, max/min along a dim,
// argmax/argmin, var/std, logsumexp. Same semantics as the CPU kernels (reduce.cpp), with the
// checks of kernels/reduce.h: floating sums accumulate in double, integer sum/prod in int64
// (wrapping), max/min keep the first extreme with NaN winning. The input is viewed as
// [outer, K, inner]: directly when it is contiguous and the reduced dims are adjacent, else
// after a contiguous copy with the reduced dims last; the engine is in reduce.cuh.
#include <limits>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/reduce.h"

namespace mytorch {
namespace cuda {
namespace {

using red::Map;
using red::compute_t;

// ---- output writers: out(o, acc) ----
// scale * acc (then sqrt) in To; integer accumulators are stored as they are.
template <typename To, typename A>
struct WriteScaled {
  To* out;
  double scale;
  bool take_sqrt;
  __device__ void operator()(int64_t o, A a) const {
    if constexpr (std::is_floating_point_v<A>) {
      double v = a * scale;
      if (take_sqrt) v = sqrt(v);
      out[o] = static_cast<To>(static_cast<compute_t<To>>(v));
    } else {
      out[o] = static_cast<To>(a);
    }
  }
};

template <typename T>
struct WriteExt {
  T* values;        // may be null
  int64_t* index;   // may be null
  __device__ void operator()(int64_t o, red::ValIdx<compute_t<T>> a) const {
    if (values) values[o] = static_cast<T>(a.v);
    if (index) index[o] = a.i;
  }
};

// logsumexp's shift: the max, or 0 when it is +-inf or there are no elements (keeps
// exp(x - m) finite, as the CPU kernel).
template <typename C>
struct WriteLseMax {
  double* m;
  __device__ void operator()(int64_t o, red::ValIdx<C> a) const {
    const double v = static_cast<double>(a.v);
    m[o] = (a.i < 0 || isinf(v)) ? 0.0 : v;
  }
};

template <typename T>
struct WriteLse {
  T* out;
  const double* m;
  __device__ void operator()(int64_t o, double a) const {
    out[o] = static_cast<T>(static_cast<compute_t<T>>(log(a) + m[o]));
  }
};

// ---- shapes and checks (kernels/reduce.h) ----
using reduce::check_input;
using reduce::check_nonempty;
using reduce::out_shape;
using reduce::reduce_mask;
using reduce::Red;

// Floating types and int64 as they are, other integers and bool as int64 (as the CPU kernel).
at::Tensor normalize_int(const at::Tensor& x) {
  if (at::isFloatingType(x.scalar_type()) || x.scalar_type() == at::kLong) return x;
  return x.to(at::kLong);
}

// Guards the device of x for the rest of the scope.
struct OnDevice {
  c10::cuda::CUDAGuard guard;
  OnDevice(const char* op, const at::Tensor& x) : guard(red::common_cuda_device(op, {x})) {}
};

// ---- the [outer, K, inner] view ----
struct View {
  at::Tensor x;  // contiguous
  int64_t outer = 1, K = 1, inner = 1;
  int64_t outputs() const { return outer * inner; }
};

View make_view(const at::Tensor& x, const std::vector<bool>& mask) {
  View v;
  std::vector<int64_t> kept, reduced;
  for (int64_t d = 0; d < x.dim(); ++d) (mask[d] ? reduced : kept).push_back(d);
  for (int64_t d : reduced) v.K *= x.size(d);
  if (x.is_contiguous()) {
    // the reduced dims (size-1 dims aside) one run: kept dims before it are `outer`, after it `inner`
    int64_t outer = 1, inner = 1;
    int state = 0;  // 0 before the run, 1 in it, 2 after it
    bool one_run = true;
    for (int64_t d = 0; d < x.dim(); ++d) {
      const int64_t s = x.size(d);
      if (s == 1) continue;
      if (mask[d]) {
        if (state == 2) one_run = false;
        state = 1;
      } else {
        if (state == 1) state = 2;
        (state == 0 ? outer : inner) *= s;
      }
    }
    if (one_run) {
      v.x = x;
      v.outer = outer;
      v.inner = inner;
      return v;
    }
  }
  std::vector<int64_t> perm(kept);
  perm.insert(perm.end(), reduced.begin(), reduced.end());
  v.x = x.permute(perm).contiguous();
  for (int64_t d : kept) v.outer *= x.size(d);
  return v;
}

template <typename T, typename Op, typename Out>
void run(const View& v, const Op& op, const Out& out) {
  red::launch_reduce<T>(v.x.const_data_ptr<T>(), v.outer, v.K, v.inner, op, out, v.x.options());
}

// out <- scale * sum_k map(x) (sqrt'ed on request), out in x's floating dtype.
template <Map MAP>
void sum_into(const char* op, const View& v, const double* centre, double scale, bool take_sqrt,
              const at::Tensor& out) {
  cpu::dispatch_floating(op, "x", v.x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    run<T>(v, red::SumOp<T, double, MAP>{centre}, WriteScaled<T, double>{out.mutable_data_ptr<T>(), scale, take_sqrt});
  });
}

// Values and/or positions of the max (min) per output; x floating or int64.
void extreme_into(const char* op, bool is_max, const View& v, const at::Tensor& values, const at::Tensor& index) {
  cpu::dispatch_all(op, "x", v.x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, c10::BFloat16> ||
                  std::is_same_v<T, c10::Half> || std::is_same_v<T, int64_t>) {
      WriteExt<T> w{values.defined() ? values.mutable_data_ptr<T>() : nullptr,
                    index.defined() ? index.mutable_data_ptr<int64_t>() : nullptr};
      if (is_max) run<T>(v, red::ExtOp<T, true>{}, w);
      else run<T>(v, red::ExtOp<T, false>{}, w);
    } else {
      TORCH_CHECK(false, op, ": internal error, unexpected dtype ", v.x.scalar_type());
    }
  });
}

}  // namespace

at::Tensor reduce(Red kind, const at::Tensor& x_, at::OptionalIntArrayRef dims, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  const char* name = kind == Red::Sum ? "mytorch::sum" : kind == Red::Prod ? "mytorch::prod"
                     : kind == Red::Max ? "mytorch::amax" : "mytorch::amin";
  check_input(name, x_);
  OnDevice g(name, x_);
  at::Tensor x = dtype ? x_.to(*dtype) : x_;
  auto mask = reduce_mask(name, x, dims);
  if (kind == Red::Max || kind == Red::Min) check_nonempty(name, x, mask);
  const auto shape = out_shape(x, mask, keepdim);
  const bool fl = at::isFloatingType(x.scalar_type());
  if (kind == Red::Sum || kind == Red::Prod) {
    if (!fl) {  // integers and bool: int64, wrapping as the CPU kernel
      View v = make_view(x.to(at::kLong), mask);
      at::Tensor out = aten::empty(shape, x.options().dtype(at::kLong));
      WriteScaled<int64_t, uint64_t> w{out.mutable_data_ptr<int64_t>(), 1.0, false};
      if (kind == Red::Sum) run<int64_t>(v, red::SumOp<int64_t, uint64_t, Map::Id>{nullptr}, w);
      else run<int64_t>(v, red::ProdOp<int64_t, uint64_t>{}, w);
      return out;
    }
    View v = make_view(x, mask);
    at::Tensor out = aten::empty(shape, x.options());
    if (kind == Red::Sum) {
      sum_into<Map::Id>(name, v, nullptr, 1.0, false, out);
    } else {
      cpu::dispatch_floating(name, "x", x.scalar_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run<T>(v, red::ProdOp<T, double>{}, WriteScaled<T, double>{out.mutable_data_ptr<T>(), 1.0, false});
      });
    }
    return out;
  }
  at::Tensor xi = normalize_int(x);
  View v = make_view(xi, mask);
  at::Tensor values = aten::empty(shape, xi.options());
  extreme_into(name, kind == Red::Max, v, values, at::Tensor());
  return values.to(x.scalar_type());
}


at::Tensor mean(const at::Tensor& x_, at::OptionalIntArrayRef dims, bool keepdim,
                std::optional<at::ScalarType> dtype) {
  const char* name = "mytorch::mean";
  OnDevice g(name, x_);
  at::Tensor x = dtype ? x_.to(*dtype) : x_;
  check_floating(name, "x", x);
  auto mask = reduce_mask(name, x, dims);
  View v = make_view(x, mask);
  const double scale = v.K == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / v.K;
  at::Tensor out = aten::empty(out_shape(x, mask, keepdim), x.options());
  sum_into<Map::Id>(name, v, nullptr, scale, false, out);
  return out;
}

namespace {

// (values, indices) of the max (min) along dim; values skipped when not wanted.
std::tuple<at::Tensor, at::Tensor> minmax(bool is_max, const at::Tensor& x_, int64_t dim, bool keepdim,
                                          bool want_values) {
  const char* name = is_max ? "mytorch::max" : "mytorch::min";
  check_input(name, x_);
  OnDevice g(name, x_);
  const std::vector<bool> mask = reduce::dim_mask(name, x_, dim);
  at::Tensor x = normalize_int(x_);
  View v = make_view(x, mask);
  const auto shape = out_shape(x, mask, keepdim);
  at::Tensor values = want_values ? aten::empty(shape, x.options()) : at::Tensor();
  at::Tensor index = aten::empty(shape, x.options().dtype(at::kLong));
  extreme_into(name, is_max, v, values, index);
  return {want_values ? values.to(x_.scalar_type()) : values, index};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> minmax_dim(bool is_max, const at::Tensor& x, int64_t dim, bool keepdim) {
  return minmax(is_max, x, dim, keepdim, true);
}

at::Tensor arg_minmax(bool is_max, const at::Tensor& x_, std::optional<int64_t> dim, bool keepdim) {
  const char* name = is_max ? "mytorch::argmax" : "mytorch::argmin";
  check_input(name, x_);
  if (dim) return std::get<1>(minmax(is_max, x_, *dim, keepdim, false));
  at::Tensor flat = x_.reshape({-1});
  TORCH_CHECK(flat.numel() > 0, name, ": expected a non-empty tensor, got shape ", x_.sizes());
  at::Tensor i = std::get<1>(minmax(is_max, flat, 0, false, false));
  if (keepdim) i = i.reshape(std::vector<int64_t>(x_.dim(), 1));
  return i;
}

// Two passes in double: the mean, then the sum of squared deviations from it.
at::Tensor var_std(const at::Tensor& x, at::OptionalIntArrayRef dims, double correction, bool keepdim,
                   bool take_sqrt) {
  const char* name = take_sqrt ? "mytorch::std" : "mytorch::var";
  check_floating(name, "x", x);
  OnDevice g(name, x);
  auto mask = reduce_mask(name, x, dims);
  View v = make_view(x, mask);
  at::Tensor mu = aten::empty({v.outputs()}, x.options().dtype(at::kDouble));
  double* mp = mu.mutable_data_ptr<double>();
  const double inv_k = v.K ? 1.0 / v.K : std::numeric_limits<double>::quiet_NaN();
  cpu::dispatch_floating(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    run<T>(v, red::SumOp<T, double, Map::Id>{nullptr}, WriteScaled<double, double>{mp, inv_k, false});
  });
  const double denom = std::max<double>(0.0, v.K - correction);
  at::Tensor out = aten::empty(out_shape(x, mask, keepdim), x.options());
  sum_into<Map::SqDev>(name, v, mp, 1.0 / denom, take_sqrt, out);
  return out;
}

// log(sum exp(x - m)) + m with m the max (NaN propagates, +-inf maxima shift by 0).
at::Tensor logsumexp(const at::Tensor& x_, at::IntArrayRef dims, bool keepdim) {
  const char* name = "mytorch::logsumexp";
  check_input(name, x_);
  OnDevice g(name, x_);
  at::Tensor x = at::isFloatingType(x_.scalar_type()) ? x_ : x_.to(at::get_default_dtype_as_scalartype());
  auto mask = reduce_mask(name, x, dims);
  View v = make_view(x, mask);
  at::Tensor mx = aten::empty({v.outputs()}, x.options().dtype(at::kDouble));
  at::Tensor out = aten::empty(out_shape(x, mask, keepdim), x.options());
  double* mp = mx.mutable_data_ptr<double>();
  cpu::dispatch_floating(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    run<T>(v, red::ExtOp<T, true>{}, WriteLseMax<compute_t<T>>{mp});
    run<T>(v, red::SumOp<T, double, Map::ExpDev>{mp}, WriteLse<T>{out.mutable_data_ptr<T>(), mp});
  });
  return out;
}

}  // namespace cuda
}  // namespace mytorch
