// Reductions (OpenMP). Any set of dims is mapped to M outputs x K reduced elements:
// the reduced dims are coalesced into one run with one stride (a contiguous copy in
// kept+reduced order when they do not coalesce). Three kernels then cover the cases:
//   inner  (stride 1):              each output reduces a contiguous run (SIMD), in parallel
//                                   over outputs, or split over threads when outputs are few;
//   outer  (kept dim of stride 1):  a block of adjacent outputs advances together row by row;
//   strided (anything else):        one output at a time.
#include "kernels/reduce.h"

#include <ATen/ATen.h>

#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa.h"

// The entry points run the widest copy of this file the CPU has (kernels/cpu/isa/reduce_*.cpp).
MYTORCH_ISA_DECLARE(reduce)
MYTORCH_ISA_DECLARE(mean)
MYTORCH_ISA_DECLARE(minmax_dim)
MYTORCH_ISA_DECLARE(var_mean)
MYTORCH_ISA_DECLARE(logsumexp)
MYTORCH_ISA_DECLARE(vector_norm)

namespace mytorch {
namespace cpu {
namespace {

// ---- the M x K view ----
struct Plan {
  int64_t M = 1, K = 1, rs = 1;      // outputs, reduced length, reduced stride (elements)
  std::vector<int64_t> ksize, kstride;  // kept dims (row-major over outputs)
  const char* base = nullptr;
  at::Tensor hold;                   // keeps a contiguous copy alive
  int64_t offset(int64_t o) const {  // element offset of output o's first input
    int64_t off = 0;
    for (int64_t d = (int64_t)ksize.size() - 1; d >= 0; --d) {
      off += (o % ksize[d]) * kstride[d];
      o /= ksize[d];
    }
    return off;
  }
};

using reduce::check_input;
using reduce::check_nonempty;
using reduce::out_shape;
using reduce::reduce_mask;

Plan make_plan(const at::Tensor& x_, const std::vector<bool>& mask) {
  Plan p;
  at::Tensor x = x_;
  int64_t nd = x.dim();
  std::vector<int64_t> kept, red;
  for (int64_t d = 0; d < nd; ++d) (mask[d] ? red : kept).push_back(d);
  // coalesce the reduced dims (size-1 dims ignored)
  std::vector<std::pair<int64_t, int64_t>> r;  // (size, stride)
  for (int64_t d : red)
    if (x.size(d) != 1) r.push_back({x.size(d), x.stride(d)});
  bool ok = true;
  for (size_t i = 0; i + 1 < r.size(); ++i)
    if (r[i].second != r[i + 1].second * r[i + 1].first) ok = false;
  if (!ok) {
    std::vector<int64_t> perm(kept);
    perm.insert(perm.end(), red.begin(), red.end());
    at::Tensor xp = x.permute(perm);
    at::Tensor c = at::empty(xp.sizes(), xp.options());
    copy_cast_(c, xp);
    // back to the original dim order, as a view of the contiguous copy
    std::vector<int64_t> inv(nd);
    for (int64_t i = 0; i < nd; ++i) inv[perm[i]] = i;
    x = c.permute(inv);
    p.hold = c;
    r.clear();
    for (int64_t d : red)
      if (x.size(d) != 1) r.push_back({x.size(d), x.stride(d)});
  }
  p.K = 1;
  for (auto& s : r) p.K *= s.first;
  p.rs = r.empty() ? 1 : r.back().second;
  for (int64_t d : kept) {
    p.ksize.push_back(x.size(d));
    p.kstride.push_back(x.stride(d));
  }
  p.M = 1;
  for (auto s : p.ksize) p.M *= s;
  p.base = static_cast<const char*>(x.const_data_ptr()) ;
  return p;
}

// ---- per-element maps for the sum family ----
enum class Map { Id, SqDev, ExpDev };
template <Map MAP, typename T>
inline double mapv(T v, double c) {
  if constexpr (MAP == Map::Id) {
    return static_cast<double>(static_cast<compute_t<T>>(v));
  } else if constexpr (MAP == Map::SqDev) {
    double d = static_cast<double>(static_cast<compute_t<T>>(v)) - c;
    return d * d;
  } else {
    if constexpr (std::is_same_v<compute_t<T>, float>)
      return fast_exp(static_cast<float>(v) - static_cast<float>(c));
    else
      return std::exp(static_cast<double>(v) - c);
  }
}

// Sum of map(x[k * rs]) for k < n.
template <Map MAP, typename T>
inline double sum_run(const T* x, int64_t n, int64_t rs, double c) {
  double s = 0;
  if (rs == 1) {
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; ++k) s += mapv<MAP, T>(x[k], c);
  } else {
    for (int64_t k = 0; k < n; ++k) s += mapv<MAP, T>(x[k * rs], c);
  }
  return s;
}

constexpr int64_t kBlock = 256;  // outputs per block in the outer kernel

// out[o] = sum_k map(x_o[k]) (double), for every output.
template <Map MAP, typename T>
void sum_kernel(const Plan& p, const double* c, double* out) {
  const T* x = reinterpret_cast<const T*>(p.base);
  const int64_t M = p.M, K = p.K, rs = p.rs;
  auto cval = [c](int64_t o) { return c ? c[o] : 0.0; };
  int nt = max_threads();
  if (K == 0) {
    for (int64_t o = 0; o < M; ++o) out[o] = 0;
    return;
  }
  if (rs == 1 && M < nt * 4 && K * M >= kElemGrain) {
    // few long runs: split each run over the threads
    for (int64_t o = 0; o < M; ++o) {
      const T* xo = x + p.offset(o);
      double co = cval(o), total = 0;
      std::vector<double> part(nt, 0.0);
      parallel_range(K, 1, [&](int64_t b, int64_t e) {
#ifdef _OPENMP
        int t = omp_get_thread_num();
#else
        int t = 0;
#endif
        part[t] = sum_run<MAP, T>(xo + b, e - b, 1, co);
      });
      for (double v : part) total += v;
      out[o] = total;
    }
    return;
  }
  bool outer = rs != 1 && !p.kstride.empty() && p.kstride.back() == 1 && p.ksize.back() > 1;
  if (outer) {
    const int64_t N = p.ksize.back(), Q = M / N;
    const int64_t nb = (N + kBlock - 1) / kBlock;
    parallel_range(Q * nb, K * kBlock, [&](int64_t b, int64_t e) {
      double acc[kBlock];
      for (int64_t w = b; w < e; ++w) {
        int64_t q = w / nb, j0 = (w % nb) * kBlock, jn = std::min(kBlock, N - j0);
        int64_t o0 = q * N + j0;
        const T* xo = x + p.offset(o0);
        for (int64_t j = 0; j < jn; ++j) acc[j] = 0;
        for (int64_t k = 0; k < K; ++k) {
          const T* row = xo + k * rs;
#pragma omp simd
          for (int64_t j = 0; j < jn; ++j) acc[j] += mapv<MAP, T>(row[j], c ? c[o0 + j] : 0.0);
        }
        for (int64_t j = 0; j < jn; ++j) out[o0 + j] = acc[j];
      }
    });
    return;
  }
  parallel_range(M, K, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) out[o] = sum_run<MAP, T>(x + p.offset(o), K, rs, cval(o));
  });
}

// Integer sum/prod in int64; float prod in double.
template <bool PROD, typename T, typename Acc>
void intlike_kernel(const Plan& p, Acc* out) {
  const T* x = reinterpret_cast<const T*>(p.base);
  parallel_range(p.M, p.K, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T* xo = x + p.offset(o);
      Acc s = PROD ? Acc(1) : Acc(0);
      for (int64_t k = 0; k < p.K; ++k) {
        Acc v = static_cast<Acc>(static_cast<compute_t<T>>(xo[k * p.rs]));
        s = PROD ? s * v : s + v;
      }
      out[o] = s;
    }
  });
}

// max/min (value and first index; NaN wins) of x_o.
template <bool MAX, typename T>
struct Ext {
  using C = compute_t<T>;
  static bool better(C v, C best) {
    if constexpr (std::is_floating_point_v<C>) {
      if (v != v) return best == best;
    }
    return MAX ? v > best : v < best;
  }
};

template <bool MAX, typename T>
void ext_run(const T* x, int64_t n, int64_t rs, compute_t<T>& val, int64_t& idx) {
  using C = compute_t<T>;
  if (rs == 1) {
    // vectorized pass for the value, then the first index holding it
    C m = static_cast<C>(x[0]);
    bool nan = false;
    if constexpr (std::is_floating_point_v<C>) {
      if (MAX) {
#pragma omp simd reduction(max : m) reduction(| : nan)
        for (int64_t k = 0; k < n; ++k) {
          C v = static_cast<C>(x[k]);
          nan |= v != v;
          m = v > m ? v : m;
        }
      } else {
#pragma omp simd reduction(min : m) reduction(| : nan)
        for (int64_t k = 0; k < n; ++k) {
          C v = static_cast<C>(x[k]);
          nan |= v != v;
          m = v < m ? v : m;
        }
      }
    } else {
      for (int64_t k = 0; k < n; ++k) {
        C v = static_cast<C>(x[k]);
        m = MAX ? (v > m ? v : m) : (v < m ? v : m);
      }
    }
    int64_t i = 0;
    if (nan) {
      while (!(static_cast<C>(x[i]) != static_cast<C>(x[i]))) ++i;
      val = static_cast<C>(x[i]);
    } else {
      while (static_cast<C>(x[i]) != m) ++i;
      val = m;
    }
    idx = i;
    return;
  }
  C best = static_cast<C>(x[0]);
  int64_t bi = 0;
  for (int64_t k = 1; k < n; ++k) {
    C v = static_cast<C>(x[k * rs]);
    if (Ext<MAX, T>::better(v, best)) {
      best = v;
      bi = k;
    }
  }
  val = best;
  idx = bi;
}

template <bool MAX, typename T>
void ext_kernel(const Plan& p, T* vout, int64_t* iout) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(p.base);
  const int64_t M = p.M, K = p.K, rs = p.rs;
  int nt = max_threads();
  if (rs == 1 && M < nt * 4 && K * M >= kElemGrain) {
    for (int64_t o = 0; o < M; ++o) {
      const T* xo = x + p.offset(o);
      std::vector<C> pv(nt);
      std::vector<int64_t> pi(nt, -1);
      parallel_range(K, 1, [&](int64_t b, int64_t e) {
#ifdef _OPENMP
        int t = omp_get_thread_num();
#else
        int t = 0;
#endif
        C v;
        int64_t i;
        ext_run<MAX, T>(xo + b, e - b, 1, v, i);
        pv[t] = v;
        pi[t] = i + b;
      });
      C best{};
      int64_t bi = -1;
      for (int t = 0; t < nt; ++t) {
        if (pi[t] < 0) continue;
        if (bi < 0 || Ext<MAX, T>::better(pv[t], best)) {
          best = pv[t];
          bi = pi[t];
        }
      }
      if (vout) vout[o] = T(best);
      if (iout) iout[o] = bi;
    }
    return;
  }
  bool outer = rs != 1 && !p.kstride.empty() && p.kstride.back() == 1 && p.ksize.back() > 1;
  if (outer) {
    const int64_t N = p.ksize.back(), Q = M / N;
    const int64_t nb = (N + kBlock - 1) / kBlock;
    parallel_range(Q * nb, K * kBlock, [&](int64_t b, int64_t e) {
      C val[kBlock];
      int64_t idx[kBlock];
      for (int64_t w = b; w < e; ++w) {
        int64_t q = w / nb, j0 = (w % nb) * kBlock, jn = std::min(kBlock, N - j0);
        int64_t o0 = q * N + j0;
        const T* xo = x + p.offset(o0);
        for (int64_t j = 0; j < jn; ++j) {
          val[j] = static_cast<C>(xo[j]);
          idx[j] = 0;
        }
        for (int64_t k = 1; k < K; ++k) {
          const T* row = xo + k * rs;
#pragma omp simd
          for (int64_t j = 0; j < jn; ++j) {
            C v = static_cast<C>(row[j]);
            bool take = Ext<MAX, T>::better(v, val[j]);
            val[j] = take ? v : val[j];
            idx[j] = take ? k : idx[j];
          }
        }
        for (int64_t j = 0; j < jn; ++j) {
          if (vout) vout[o0 + j] = T(val[j]);
          if (iout) iout[o0 + j] = idx[j];
        }
      }
    });
    return;
  }
  parallel_range(M, K, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      C v;
      int64_t i;
      ext_run<MAX, T>(x + p.offset(o), K, rs, v, i);
      if (vout) vout[o] = T(v);
      if (iout) iout[o] = i;
    }
  });
}

// ---- glue helpers ----
// Supported input dtypes: floating types and int64 directly, other integers/bool via int64.
at::Tensor normalize_int(const at::Tensor& x) {
  if (at::isFloatingType(x.scalar_type()) || x.scalar_type() == at::kLong) return x;
  return to_dtype(x, at::kLong);
}

// Runs the double-valued sum family and writes `scale * result` (+ optional sqrt) in dtype.
template <Map MAP>
at::Tensor sum_family(const char* op, const at::Tensor& x, const std::vector<bool>& mask,
                      bool keepdim, const double* c, double scale, bool take_sqrt, Plan* plan_io) {
  Plan local;
  Plan& p = plan_io ? *plan_io : local;
  if (!plan_io) p = make_plan(x, mask);
  at::Tensor acc = at::empty({p.M}, x.options().dtype(at::kDouble).device(at::kCPU));
  double* a = acc.mutable_data_ptr<double>();
  dispatch_floating(op, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_kernel<MAP, T>(p, c, a);
  });
  if (scale != 1.0 || take_sqrt) {
    for (int64_t o = 0; o < p.M; ++o) {
      a[o] *= scale;
      if (take_sqrt) a[o] = std::sqrt(a[o]);
    }
  }
  at::Tensor out = at::empty(out_shape(x, mask, keepdim), x.options());
  copy_cast_(out, acc.view(out.sizes()));
  return out;
}

}  // namespace

// ---- public entry points ----
at::Tensor reduce(Red op, const at::Tensor& x_, at::OptionalIntArrayRef dims, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  MYTORCH_ISA_DISPATCH(reduce, op, x_, dims, keepdim, dtype)
  const char* name = op == Red::Sum ? "mytorch::sum" : op == Red::Prod ? "mytorch::prod"
                     : op == Red::Max ? "mytorch::amax" : "mytorch::amin";
  check_input(name, x_);
  at::Tensor x = dtype ? to_dtype(x_, *dtype) : x_;
  auto mask = reduce_mask(name, x, dims);
  if (op == Red::Max || op == Red::Min) check_nonempty(name, x, mask);
  bool fl = at::isFloatingType(x.scalar_type());
  if ((op == Red::Sum) && fl) return sum_family<Map::Id>(name, x, mask, keepdim, nullptr, 1.0, false, nullptr);
  at::ScalarType odt = x.scalar_type();
  if ((op == Red::Sum || op == Red::Prod) && !fl) odt = at::kLong;
  at::Tensor xi = (op == Red::Max || op == Red::Min) ? normalize_int(x) : (fl ? x : to_dtype(x, at::kLong));
  Plan p = make_plan(xi, mask);
  at::Tensor out;
  if (op == Red::Prod) {
    if (fl) {
      at::Tensor acc = at::empty({p.M}, x.options().dtype(at::kDouble).device(at::kCPU));
      dispatch_floating(name, "x", xi.scalar_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        intlike_kernel<true, T, double>(p, acc.mutable_data_ptr<double>());
      });
      out = at::empty(out_shape(x, mask, keepdim), x.options().dtype(odt));
      copy_cast_(out, acc.view(out.sizes()));
      return out;
    }
    out = at::empty(out_shape(x, mask, keepdim), x.options().dtype(at::kLong));
    intlike_kernel<true, int64_t, int64_t>(p, out.mutable_data_ptr<int64_t>());
    return out;
  }
  if (op == Red::Sum) {
    out = at::empty(out_shape(x, mask, keepdim), x.options().dtype(at::kLong));
    intlike_kernel<false, int64_t, int64_t>(p, out.mutable_data_ptr<int64_t>());
    return out;
  }
  at::Tensor v = at::empty(out_shape(xi, mask, keepdim), xi.options());
  bool is_max = op == Red::Max;
  dispatch_all(name, "x", xi.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half> ||
                  std::is_same_v<T, int64_t>) {
      if (is_max) ext_kernel<true, T>(p, v.mutable_data_ptr<T>(), nullptr);
      else ext_kernel<false, T>(p, v.mutable_data_ptr<T>(), nullptr);
    }
  });
  return to_dtype(v, odt);
}

at::Tensor mean(const at::Tensor& x_, at::OptionalIntArrayRef dims, bool keepdim,
                std::optional<at::ScalarType> dtype) {
  MYTORCH_ISA_DISPATCH(mean, x_, dims, keepdim, dtype)
  const char* name = "mytorch::mean";
  at::Tensor x = dtype ? to_dtype(x_, *dtype) : x_;
  check_floating(name, "x", x);
  auto mask = reduce_mask(name, x, dims);
  int64_t K = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) K *= x.size(d);
  double scale = K == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / K;
  return sum_family<Map::Id>(name, x, mask, keepdim, nullptr, scale, false, nullptr);
}

std::tuple<at::Tensor, at::Tensor> minmax_dim(bool is_max, const at::Tensor& x_, int64_t dim,
                                              bool keepdim) {
  MYTORCH_ISA_DISPATCH(minmax_dim, is_max, x_, dim, keepdim)
  const char* name = is_max ? "mytorch::max" : "mytorch::min";
  check_input(name, x_);
  const std::vector<bool> mask = reduce::dim_mask(name, x_, dim);
  at::Tensor x = normalize_int(x_);
  Plan p = make_plan(x, mask);
  at::Tensor v = at::empty(out_shape(x, mask, keepdim), x.options());
  at::Tensor i = at::empty(out_shape(x, mask, keepdim), x.options().dtype(at::kLong));
  dispatch_all(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half> ||
                  std::is_same_v<T, int64_t>) {
      if (is_max) ext_kernel<true, T>(p, v.mutable_data_ptr<T>(), i.mutable_data_ptr<int64_t>());
      else ext_kernel<false, T>(p, v.mutable_data_ptr<T>(), i.mutable_data_ptr<int64_t>());
    }
  });
  return {to_dtype(v, x_.scalar_type()), i};
}

at::Tensor arg_minmax(bool is_max, const at::Tensor& x_, std::optional<int64_t> dim, bool keepdim) {
  const char* name = is_max ? "mytorch::argmax" : "mytorch::argmin";
  check_input(name, x_);
  if (dim) return std::get<1>(minmax_dim(is_max, x_, *dim, keepdim));
  at::Tensor flat = x_.reshape({-1});
  TORCH_CHECK(flat.numel() > 0, name, ": expected a non-empty tensor, got shape ", x_.sizes());
  at::Tensor i = std::get<1>(minmax_dim(is_max, flat, 0, false));
  if (keepdim) i = i.reshape(std::vector<int64_t>(x_.dim(), 1));
  return i;
}

std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& x, at::OptionalIntArrayRef dims,
                                            double correction, bool keepdim, bool take_sqrt) {
  MYTORCH_ISA_DISPATCH(var_mean, x, dims, correction, keepdim, take_sqrt)
  const char* name = take_sqrt ? "mytorch::std" : "mytorch::var";
  check_floating(name, "x", x);
  auto mask = reduce_mask(name, x, dims);
  Plan p = make_plan(x, mask);
  at::Tensor m = at::empty({p.M}, x.options().dtype(at::kDouble).device(at::kCPU));
  double* mp = m.mutable_data_ptr<double>();
  dispatch_floating(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_kernel<Map::Id, T>(p, nullptr, mp);
  });
  for (int64_t o = 0; o < p.M; ++o) mp[o] = p.K ? mp[o] / p.K : std::numeric_limits<double>::quiet_NaN();
  double denom = std::max<double>(0.0, p.K - correction);
  at::Tensor v = sum_family<Map::SqDev>(name, x, mask, keepdim, mp, 1.0 / denom, take_sqrt, &p);
  at::Tensor mo = at::empty(v.sizes(), x.options());
  copy_cast_(mo, m.view(v.sizes()));
  return {v, mo};
}

at::Tensor logsumexp(const at::Tensor& x_, at::IntArrayRef dims, bool keepdim) {
  MYTORCH_ISA_DISPATCH(logsumexp, x_, dims, keepdim)
  const char* name = "mytorch::logsumexp";
  check_input(name, x_);
  at::Tensor x = at::isFloatingType(x_.scalar_type()) ? x_ : to_dtype(x_, at::get_default_dtype_as_scalartype());
  auto mask = reduce_mask(name, x, dims);
  Plan p = make_plan(x, mask);
  at::Tensor mx = at::empty({p.M}, x.options().dtype(at::kDouble).device(at::kCPU));
  double* mp = mx.mutable_data_ptr<double>();
  dispatch_floating(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> tmp(p.M);
    if (p.K > 0) ext_kernel<true, T>(p, tmp.data(), nullptr);
    for (int64_t o = 0; o < p.M; ++o) {
      double v = p.K ? static_cast<double>(static_cast<compute_t<T>>(tmp[o])) : -INFINITY;
      mp[o] = std::isinf(v) ? 0.0 : v;  // keep exp(x - m) finite for +-inf maxima
    }
  });
  at::Tensor acc = at::empty({p.M}, x.options().dtype(at::kDouble).device(at::kCPU));
  double* a = acc.mutable_data_ptr<double>();
  dispatch_floating(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_kernel<Map::ExpDev, T>(p, mp, a);
  });
  for (int64_t o = 0; o < p.M; ++o) a[o] = std::log(a[o]) + mp[o];
  at::Tensor out = at::empty(out_shape(x, mask, keepdim), x.options());
  copy_cast_(out, acc.view(out.sizes()));
  return out;
}

at::Tensor vector_norm(const at::Tensor& x, double ord, at::OptionalIntArrayRef dims, bool keepdim) {
  MYTORCH_ISA_DISPATCH(vector_norm, x, ord, dims, keepdim)
  const char* name = "mytorch::vector_norm";
  check_floating(name, "x", x);
  if (std::isinf(ord)) {
    at::Tensor a = unary(Un::Abs, x, {});
    if (a.numel() == 0) return at::zeros(out_shape(x, reduce_mask(name, x, dims), keepdim), x.options());
    // cpu:: names this copy's namespace in an ISA build (isa/begin_*.h)
    return cpu::reduce(ord > 0 ? Red::Max : Red::Min, a, dims, keepdim, std::nullopt);
  }
  auto mask = reduce_mask(name, x, dims);
  if (ord == 2.0) return sum_family<Map::SqDev>(name, x, mask, keepdim, nullptr, 1.0, true, nullptr);
  TORCH_CHECK(ord == 1.0, name, ": expected ord in (1, 2, inf, -inf), got ", ord);
  return sum_family<Map::Id>(name, unary(Un::Abs, x, {}), mask, keepdim, nullptr, 1.0, false, nullptr);
}

}  // namespace cpu
}  // namespace mytorch

// ---- var / std, as the CUDA kernels take them: once, in the baseline build of this file ----
#ifndef MYTORCH_ISA_VARIANT
namespace mytorch {
namespace cpu {

at::Tensor var_std(const at::Tensor& x, at::OptionalIntArrayRef dims, double correction, bool keepdim,
                   bool take_sqrt) {
  return std::get<0>(var_mean(x, dims, correction, keepdim, take_sqrt));
}

}  // namespace cpu
}  // namespace mytorch
#endif  // MYTORCH_ISA_VARIANT
