// RMSNorm and LayerNorm over the trailing `normalized_shape` dims (CUDA).
// Forward: one block per row, the row held in registers as 16-byte vectors.
// Backward: a persistent grid; each block walks many rows, keeps its share of the
// weight/bias gradient in registers and writes one fp32 partial row; a second
// kernel sums the partials over blocks (two-stage reduction, no atomics).
#include <torch/library.h>

#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {
namespace {

constexpr int kFwdItems = 8;  // vectors per thread held in registers (forward)
constexpr int kBwdItems = 4;  // same, backward (it also holds g and two accumulators)
constexpr int kBwdThreads = 512;  // caps the block so the accumulators stay in registers

// ---- kernels ----
template <typename T, int VEC, bool RMS>
__global__ void __launch_bounds__(1024) norm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                       const T* __restrict__ b, T* __restrict__ y,
                                                       float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                                       int64_t rows, int64_t cols, float eps) {
  __shared__ float buf[33];
  const int64_t nv = cols / VEC;
  const bool cached = nv <= (int64_t)kFwdItems * blockDim.x;
  const float inv_cols = 1.f / (float)cols;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    Vec<T, VEC> xv[kFwdItems];
    float mean = 0.f, rstd;
    if (cached) {
#pragma unroll
      for (int i = 0; i < kFwdItems; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) xv[i] = load_vec<T, VEC>(xr + j * VEC);
      }
      float s = 0.f;
      if (!RMS) {
#pragma unroll
        for (int i = 0; i < kFwdItems; ++i)
          if (threadIdx.x + (int64_t)i * blockDim.x < nv)
#pragma unroll
            for (int k = 0; k < VEC; ++k) s += (float)xv[i].v[k];
        mean = block_sum(s, buf) * inv_cols;
        s = 0.f;
      }
#pragma unroll
      for (int i = 0; i < kFwdItems; ++i)
        if (threadIdx.x + (int64_t)i * blockDim.x < nv)
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            float d = (float)xv[i].v[k] - mean;
            s += d * d;
          }
      rstd = rsqrtf(block_sum(s, buf) * inv_cols + eps);
    } else {
      float s = 0.f;
      if (!RMS) {
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
          auto v = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
          for (int k = 0; k < VEC; ++k) s += (float)v.v[k];
        }
        mean = block_sum(s, buf) * inv_cols;
        s = 0.f;
      }
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        auto v = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          float d = (float)v.v[k] - mean;
          s += d * d;
        }
      }
      rstd = rsqrtf(block_sum(s, buf) * inv_cols + eps);
    }
    if (threadIdx.x == 0) {
      rstd_out[row] = rstd;
      if (!RMS) mean_out[row] = mean;
    }
    auto emit = [&](int64_t j, const Vec<T, VEC>& v) {
      Vec<T, VEC> o;
      Vec<T, VEC> wv, bv;
      if (w) wv = load_vec<T, VEC>(w + j * VEC);
      if (!RMS && b) bv = load_vec<T, VEC>(b + j * VEC);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float r = ((float)v.v[k] - mean) * rstd;
        if (w) r *= (float)wv.v[k];
        if (!RMS && b) r += (float)bv.v[k];
        o.v[k] = (T)r;
      }
      store_vec<T, VEC>(yr + j * VEC, o);
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < kFwdItems; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) emit(j, xv[i]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) emit(j, load_vec<T, VEC>(xr + j * VEC));
    }
  }
}

// dx for one row, and this row's contribution to dw (g * xhat) and db (g).
// partial_w/partial_b: this block's fp32 row of partial sums (cols wide).
template <typename T, int VEC, bool RMS>
__global__ void __launch_bounds__(kBwdThreads) norm_bwd_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                       const T* __restrict__ w, const float* __restrict__ mean_in,
                                                       const float* __restrict__ rstd_in, T* __restrict__ dx,
                                                       float* __restrict__ partial_w, float* __restrict__ partial_b,
                                                       int64_t rows, int64_t cols) {
  __shared__ float buf[33];
  const int64_t nv = cols / VEC;
  const bool cached = nv <= (int64_t)kBwdItems * blockDim.x;
  const float inv_cols = 1.f / (float)cols;
  const bool want_w = partial_w != nullptr, want_b = partial_b != nullptr;
  float* pw = want_w ? partial_w + blockIdx.x * cols : nullptr;
  float* pb = want_b ? partial_b + blockIdx.x * cols : nullptr;
  float acc_w[kBwdItems][VEC], acc_b[kBwdItems][VEC];
#pragma unroll
  for (int i = 0; i < kBwdItems; ++i)
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc_w[i][k] = acc_b[i][k] = 0.f;
  if (!cached) {  // partial rows accumulate in place: zero them first
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      if (want_w) pw[j] = 0.f;
      if (want_b) pb[j] = 0.f;
    }
    __syncthreads();
  }

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * cols;
    const T* xr = x + row * cols;
    T* dxr = dx + row * cols;
    const float mean = RMS ? 0.f : mean_in[row];
    const float rstd = rstd_in[row];
    // Pass 1: sum(gw * xhat) and, for LayerNorm, sum(gw).
    float s_gx = 0.f, s_g = 0.f;
    Vec<T, VEC> gv[kBwdItems], xv[kBwdItems];
    auto accum = [&](const Vec<T, VEC>& gq, const Vec<T, VEC>& xq, int64_t j) {
      Vec<T, VEC> wv;
      if (w) wv = load_vec<T, VEC>(w + j * VEC);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float gw = (float)gq.v[k] * (w ? (float)wv.v[k] : 1.f);
        float xh = ((float)xq.v[k] - mean) * rstd;
        s_gx += gw * xh;
        s_g += gw;
      }
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < kBwdItems; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) {
          gv[i] = load_vec<T, VEC>(gr + j * VEC);
          xv[i] = load_vec<T, VEC>(xr + j * VEC);
        }
      }
#pragma unroll
      for (int i = 0; i < kBwdItems; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) accum(gv[i], xv[i], j);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x)
        accum(load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(xr + j * VEC), j);
    }
    const float c_gx = block_sum(s_gx, buf) * inv_cols;
    const float c_g = RMS ? 0.f : block_sum(s_g, buf) * inv_cols;
    // Pass 2: dx, and the weight/bias contributions.
    auto emit = [&](const Vec<T, VEC>& gq, const Vec<T, VEC>& xq, int64_t j, float* aw, float* ab) {
      Vec<T, VEC> wv, o;
      if (w) wv = load_vec<T, VEC>(w + j * VEC);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float gk = (float)gq.v[k];
        float gw = gk * (w ? (float)wv.v[k] : 1.f);
        float xh = ((float)xq.v[k] - mean) * rstd;
        o.v[k] = (T)(rstd * (gw - c_g - xh * c_gx));
        aw[k] += gk * xh;
        if (!RMS) ab[k] += gk;
      }
      store_vec<T, VEC>(dxr + j * VEC, o);
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < kBwdItems; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) emit(gv[i], xv[i], j, acc_w[i], acc_b[i]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        float aw[VEC], ab[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) aw[k] = ab[k] = 0.f;
        emit(load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(xr + j * VEC), j, aw, ab);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // this thread owns these columns: no race
          if (want_w) pw[j * VEC + k] += aw[k];
          if (want_b) pb[j * VEC + k] += ab[k];
        }
      }
    }
  }
  if (cached) {
#pragma unroll
    for (int i = 0; i < kBwdItems; ++i) {
      int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
      if (j < nv)
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          if (want_w) pw[j * VEC + k] = acc_w[i][k];
          if (want_b) pb[j * VEC + k] = acc_b[i][k];
        }
    }
  }
}

}  // namespace

// Stage 2 of the column reduction: out[c] = sum_p partial[p, c]. Block (32, 8):
// 32 columns, 8 row groups, combined in shared memory. Shared with other families.
template <typename T>
__global__ void column_sum_kernel(const float* __restrict__ partial, T* __restrict__ out, int64_t parts,
                                  int64_t cols) {
  __shared__ float s[8][33];
  int64_t c = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (c < cols)
    for (int64_t p = threadIdx.y; p < parts; p += 8) acc += partial[p * cols + c];
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r) t += s[r][threadIdx.x];
    out[c] = (T)t;
  }
}

void column_sum(const at::Tensor& partial, at::Tensor& out) {
  int64_t parts = partial.size(0), cols = partial.size(1);
  if (cols == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  dim3 block(32, 8);
  int grid = static_cast<int>((cols + 31) / 32);
  MYTORCH_DISPATCH_CUDA_FLOAT(out.scalar_type(), "mytorch_column_sum", [&] {
    column_sum_kernel<scalar_t><<<grid, block, 0, stream>>>(partial.const_data_ptr<float>(),
                                                            out.mutable_data_ptr<scalar_t>(), parts, cols);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

namespace {

// ---- ATen glue ----
struct RowShape {
  int64_t rows, cols;
  std::vector<int64_t> stat_shape;  // leading dims
};

RowShape check_norm_input(const char* op, const at::Tensor& x, at::IntArrayRef normalized_shape,
                          const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias) {
  check_cuda(op, "x", x);
  check_cuda_float(op, "x", x);
  int64_t k = (int64_t)normalized_shape.size();
  TORCH_CHECK(k >= 1 && x.dim() >= k, op, ": expected normalized_shape to name 1..", x.dim(),
              " trailing dims of x, got normalized_shape ", normalized_shape, " for x of shape ", x.sizes());
  TORCH_CHECK(x.sizes().slice(x.dim() - k) == normalized_shape, op, ": expected the trailing dims of x to equal ",
              "normalized_shape ", normalized_shape, ", got x of shape ", x.sizes());
  for (auto* t : {&weight, &bias}) {
    if (!t->has_value()) continue;
    const char* name = t == &weight ? "weight" : "bias";
    const at::Tensor& p = t->value();
    check_same_device(op, x, "x", p, name);
    check_same_dtype(op, x, "x", p, name);
    TORCH_CHECK(p.sizes() == normalized_shape, op, ": expected ", name, " of shape ", normalized_shape, ", got ",
                p.sizes());
  }
  RowShape r;
  r.cols = c10::multiply_integers(normalized_shape);
  r.rows = r.cols == 0 ? 0 : x.numel() / r.cols;
  r.stat_shape.assign(x.sizes().begin(), x.sizes().end() - k);
  return r;
}

template <typename T>
int pick_vec(int64_t cols, std::initializer_list<const void*> ptrs) {
  constexpr int V = vec16<T>();
  if (cols % V != 0) return 1;
  for (auto p : ptrs)
    if (p && !aligned16(p)) return 1;
  return V;
}

int fwd_threads(int64_t nv) { return std::min<int>(1024, std::max<int>(32, round_up((nv + 1) / 2, 32))); }
int bwd_threads(int64_t nv) { return std::min<int>(kBwdThreads, std::max<int>(32, round_up((nv + kBwdItems - 1) / kBwdItems, 32))); }

template <bool RMS>
void launch_norm_fwd(const at::Tensor& x, const at::Tensor* w, const at::Tensor* b, at::Tensor& y, at::Tensor* mean,
                     at::Tensor& rstd, int64_t rows, int64_t cols, double eps) {
  if (rows == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  int grid = (int)std::min<int64_t>(rows, 1 << 30);
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_norm_fwd_cuda", [&] {
    using T = scalar_t;
    const T* xp = x.const_data_ptr<T>();
    const T* wp = w ? w->const_data_ptr<T>() : nullptr;
    const T* bp = b ? b->const_data_ptr<T>() : nullptr;
    T* yp = y.mutable_data_ptr<T>();
    float* mp = mean ? mean->mutable_data_ptr<float>() : nullptr;
    float* rp = rstd.mutable_data_ptr<float>();
    int vec = pick_vec<T>(cols, {xp, wp, bp, yp});
    if (vec > 1) {
      constexpr int V = vec16<T>();
      norm_fwd_kernel<T, V, RMS><<<grid, fwd_threads(cols / V), 0, stream>>>(xp, wp, bp, yp, mp, rp, rows, cols,
                                                                              (float)eps);
    } else {
      norm_fwd_kernel<T, 1, RMS><<<grid, fwd_threads(cols), 0, stream>>>(xp, wp, bp, yp, mp, rp, rows, cols,
                                                                          (float)eps);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <bool RMS>
void launch_norm_bwd(const at::Tensor& g, const at::Tensor& x, const at::Tensor* w, const at::Tensor* mean,
                     const at::Tensor& rstd, at::Tensor& dx, at::Tensor* dw, at::Tensor* db, int64_t rows,
                     int64_t cols) {
  if (rows == 0) {
    if (dw) dw->zero_();
    if (db) db->zero_();
    return;
  }
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_norm_bwd_cuda", [&] {
    using T = scalar_t;
    const T* gp = g.const_data_ptr<T>();
    const T* xp = x.const_data_ptr<T>();
    const T* wp = w ? w->const_data_ptr<T>() : nullptr;
    T* dxp = dx.mutable_data_ptr<T>();
    int vec = pick_vec<T>(cols, {gp, xp, wp, dxp});
    constexpr int V = vec16<T>();
    auto kernel = vec > 1 ? norm_bwd_kernel<T, V, RMS> : norm_bwd_kernel<T, 1, RMS>;
    int threads = bwd_threads(cols / vec);
    int per_sm = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    int64_t grid = std::min<int64_t>(rows, (int64_t)std::max(per_sm, 1) * num_sms());
    at::Tensor pw, pb;
    auto fopts = x.options().dtype(at::kFloat);
    if (dw) pw = at::empty({grid, cols}, fopts);
    if (db) pb = at::empty({grid, cols}, fopts);
    kernel<<<(int)grid, threads, 0, stream>>>(gp, xp, wp, mean ? mean->const_data_ptr<float>() : nullptr,
                                              rstd.const_data_ptr<float>(), dxp,
                                              dw ? pw.mutable_data_ptr<float>() : nullptr,
                                              db ? pb.mutable_data_ptr<float>() : nullptr, rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (dw) column_sum(pw, *dw);
    if (db) column_sum(pb, *db);
  });
}

std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,
                                            const c10::optional<at::Tensor>& weight, c10::optional<double> eps) {
  const char* op = "mytorch::rms_norm";
  auto rs = check_norm_input(op, x, normalized_shape, weight, c10::nullopt);
  c10::cuda::CUDAGuard guard(x.device());
  double e = eps.has_value() ? eps.value() : (double)std::numeric_limits<float>::epsilon();
  if (!eps.has_value() && x.scalar_type() == at::kBFloat16) e = 0.0078125;
  if (!eps.has_value() && x.scalar_type() == at::kHalf) e = 0.0009765625;
  at::Tensor xc = x.contiguous();
  at::Tensor wc = weight.has_value() ? weight->contiguous() : at::Tensor();
  at::Tensor y = at::empty_like(xc);
  at::Tensor rstd = at::empty(rs.stat_shape, x.options().dtype(at::kFloat));
  launch_norm_fwd<true>(xc, weight.has_value() ? &wc : nullptr, nullptr, y, nullptr, rstd, rs.rows, rs.cols, e);
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                     at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                     const c10::optional<at::Tensor>& weight) {
  const char* op = "mytorch::rms_norm_backward";
  auto rs = check_norm_input(op, x, normalized_shape, weight, c10::nullopt);
  check_same_shape(op, grad, "grad", x, "x");
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  check_dtype(op, "rstd", rstd, {at::kFloat});
  TORCH_CHECK(rstd.numel() == rs.rows, op, ": expected rstd with ", rs.rows, " elements, got shape ", rstd.sizes());
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), rc = rstd.contiguous();
  at::Tensor wc = weight.has_value() ? weight->contiguous() : at::Tensor();
  at::Tensor dx = at::empty_like(xc);
  at::Tensor dw = weight.has_value() ? at::empty_like(wc) : at::empty({0}, x.options());
  launch_norm_bwd<true>(gc, xc, weight.has_value() ? &wc : nullptr, nullptr, rc, dx,
                        weight.has_value() ? &dw : nullptr, nullptr, rs.rows, rs.cols);
  return {dx, dw};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,
                                                          const c10::optional<at::Tensor>& weight,
                                                          const c10::optional<at::Tensor>& bias, double eps) {
  const char* op = "mytorch::layer_norm";
  auto rs = check_norm_input(op, x, normalized_shape, weight, bias);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor wc = weight.has_value() ? weight->contiguous() : at::Tensor();
  at::Tensor bc = bias.has_value() ? bias->contiguous() : at::Tensor();
  at::Tensor y = at::empty_like(xc);
  auto fopts = x.options().dtype(at::kFloat);
  at::Tensor mean = at::empty(rs.stat_shape, fopts), rstd = at::empty(rs.stat_shape, fopts);
  launch_norm_fwd<false>(xc, weight.has_value() ? &wc : nullptr, bias.has_value() ? &bc : nullptr, y, &mean, rstd,
                         rs.rows, rs.cols, eps);
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias) {
  const char* op = "mytorch::layer_norm_backward";
  auto rs = check_norm_input(op, x, normalized_shape, weight, bias);
  check_same_shape(op, grad, "grad", x, "x");
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  check_dtype(op, "mean", mean, {at::kFloat});
  check_dtype(op, "rstd", rstd, {at::kFloat});
  TORCH_CHECK(rstd.numel() == rs.rows && mean.numel() == rs.rows, op, ": expected mean and rstd with ", rs.rows,
              " elements, got shapes ", mean.sizes(), " and ", rstd.sizes());
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), mc = mean.contiguous(), rc = rstd.contiguous();
  at::Tensor wc = weight.has_value() ? weight->contiguous() : at::Tensor();
  at::Tensor dx = at::empty_like(xc);
  at::Tensor dw = weight.has_value() ? at::empty_like(wc) : at::empty({0}, x.options());
  at::Tensor db = bias.has_value() ? at::empty_like(*bias, at::MemoryFormat::Contiguous) : at::empty({0}, x.options());
  launch_norm_bwd<false>(gc, xc, weight.has_value() ? &wc : nullptr, &mc, rc, dx, weight.has_value() ? &dw : nullptr,
                         bias.has_value() ? &db : nullptr, rs.rows, rs.cols);
  return {dx, dw, db};
}

}  // namespace
}  // namespace cuda
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, CUDA, m) {
  m.impl("rms_norm", &mytorch::cuda::rms_norm);
  m.impl("rms_norm_backward", &mytorch::cuda::rms_norm_backward);
  m.impl("layer_norm", &mytorch::cuda::layer_norm);
  m.impl("layer_norm_backward", &mytorch::cuda::layer_norm_backward);
}
