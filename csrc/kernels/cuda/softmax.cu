// softmax and log_softmax over one dim, forward and backward (CUDA).
// One block per row; the row stays in registers as 16-byte vectors when it fits
// (up to kItems vectors per thread), otherwise it is streamed from memory.
#include <torch/library.h>

#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {
namespace {

constexpr int kItems = 8;

template <typename T, int VEC, bool LOG>
__global__ void __launch_bounds__(1024) softmax_fwd_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                          int64_t cols) {
  __shared__ float buf[33];
  const int64_t nv = cols / VEC;
  const bool cached = nv <= (int64_t)kItems * blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    Vec<T, VEC> xv[kItems];
    float mx = -INFINITY, s = 0.f;
    if (cached) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) {
          xv[i] = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
          for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, (float)xv[i].v[k]);
        }
      }
      mx = block_max(mx, buf);
#pragma unroll
      for (int i = 0; i < kItems; ++i)
        if (threadIdx.x + (int64_t)i * blockDim.x < nv)
#pragma unroll
          for (int k = 0; k < VEC; ++k) s += __expf((float)xv[i].v[k] - mx);
    } else {
      // one streaming pass: running max and rescaled sum
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        auto v = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          float f = (float)v.v[k];
          if (f > mx) {
            s = s * __expf(mx - f) + 1.f;
            mx = f;
          } else {
            s += __expf(f - mx);
          }
        }
      }
      float bm = block_max(mx, buf);
      s = mx == -INFINITY ? 0.f : s * __expf(mx - bm);
      mx = bm;
    }
    s = block_sum(s, buf);
    const float inv = 1.f / s, lse = mx + __logf(s);
    auto emit = [&](int64_t j, const Vec<T, VEC>& v) {
      Vec<T, VEC> o;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float f = (float)v.v[k];
        o.v[k] = LOG ? (T)(f - lse) : (T)(__expf(f - mx) * inv);
      }
      store_vec<T, VEC>(yr + j * VEC, o);
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) emit(j, xv[i]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) emit(j, load_vec<T, VEC>(xr + j * VEC));
    }
  }
}

// softmax:     dx = y * (g - sum(g * y))
// log_softmax: dx = g - exp(y) * sum(g)
template <typename T, int VEC, bool LOG>
__global__ void __launch_bounds__(1024) softmax_bwd_kernel(const T* __restrict__ g, const T* __restrict__ y,
                                                          T* __restrict__ dx, int64_t rows, int64_t cols) {
  __shared__ float buf[33];
  constexpr int kB = kItems / 2;
  const int64_t nv = cols / VEC;
  const bool cached = nv <= (int64_t)kB * blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * cols;
    const T* yr = y + row * cols;
    T* dr = dx + row * cols;
    Vec<T, VEC> gv[kB], yv[kB];
    float s = 0.f;
    auto accum = [&](const Vec<T, VEC>& gq, const Vec<T, VEC>& yq) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) s += LOG ? (float)gq.v[k] : (float)gq.v[k] * (float)yq.v[k];
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < kB; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) {
          gv[i] = load_vec<T, VEC>(gr + j * VEC);
          yv[i] = load_vec<T, VEC>(yr + j * VEC);
          accum(gv[i], yv[i]);
        }
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x)
        accum(load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(yr + j * VEC));
    }
    s = block_sum(s, buf);
    auto emit = [&](int64_t j, const Vec<T, VEC>& gq, const Vec<T, VEC>& yq) {
      Vec<T, VEC> o;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float gk = (float)gq.v[k], yk = (float)yq.v[k];
        o.v[k] = LOG ? (T)(gk - __expf(yk) * s) : (T)(yk * (gk - s));
      }
      store_vec<T, VEC>(dr + j * VEC, o);
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < kB; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) emit(j, gv[i], yv[i]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x)
        emit(j, load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(yr + j * VEC));
    }
  }
}

template <typename T>
int pick_vec(int64_t cols, std::initializer_list<const void*> ptrs) {
  constexpr int V = vec16<T>();
  if (cols % V != 0) return 1;
  for (auto p : ptrs)
    if (!aligned16(p)) return 1;
  return V;
}

int threads_for(int64_t nv, int items) {
  return std::min<int>(1024, std::max<int>(32, round_up((nv + items - 1) / items, 32)));
}

// Moves `dim` last and makes the rows contiguous.
at::Tensor rows_last(const at::Tensor& t, int64_t dim) {
  return (dim == t.dim() - 1 || t.dim() == 0) ? t.contiguous() : t.movedim(dim, -1).contiguous();
}

at::Tensor restore(const at::Tensor& t, int64_t dim, int64_t ndim) {
  return (dim == ndim - 1 || ndim == 0) ? t : t.movedim(-1, dim).contiguous();
}

template <bool LOG>
at::Tensor softmax_fwd(const char* op, const at::Tensor& x, int64_t dim) {
  check_cuda(op, "x", x);
  check_cuda_float(op, "x", x);
  int64_t d = wrap_dim(op, dim, x.dim());
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = rows_last(x, d);
  at::Tensor y = at::empty_like(xc);
  int64_t cols = x.dim() == 0 ? 1 : xc.size(-1);
  int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  if (rows > 0) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int grid = (int)std::min<int64_t>(rows, 1 << 30);
    MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_softmax_cuda", [&] {
      using T = scalar_t;
      const T* xp = xc.const_data_ptr<T>();
      T* yp = y.mutable_data_ptr<T>();
      constexpr int V = vec16<T>();
      if (pick_vec<T>(cols, {xp, yp}) > 1)
        softmax_fwd_kernel<T, V, LOG><<<grid, threads_for(cols / V, 2), 0, stream>>>(xp, yp, rows, cols);
      else
        softmax_fwd_kernel<T, 1, LOG><<<grid, threads_for(cols, 2), 0, stream>>>(xp, yp, rows, cols);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return restore(y, d, x.dim());
}

template <bool LOG>
at::Tensor softmax_bwd(const char* op, const at::Tensor& grad, const at::Tensor& out, int64_t dim) {
  check_cuda(op, "out", out);
  check_cuda_float(op, "out", out);
  check_same_shape(op, grad, "grad", out, "out");
  check_same_dtype(op, grad, "grad", out, "out");
  check_same_device(op, grad, "grad", out, "out");
  int64_t d = wrap_dim(op, dim, out.dim());
  c10::cuda::CUDAGuard guard(out.device());
  at::Tensor gc = rows_last(grad, d), yc = rows_last(out, d);
  at::Tensor dx = at::empty_like(yc);
  int64_t cols = out.dim() == 0 ? 1 : yc.size(-1);
  int64_t rows = cols == 0 ? 0 : yc.numel() / cols;
  if (rows > 0) {
    auto stream = at::cuda::getCurrentCUDAStream();
    int grid = (int)std::min<int64_t>(rows, 1 << 30);
    MYTORCH_DISPATCH_CUDA_FLOAT(out.scalar_type(), "mytorch_softmax_bwd_cuda", [&] {
      using T = scalar_t;
      const T* gp = gc.const_data_ptr<T>();
      const T* yp = yc.const_data_ptr<T>();
      T* dp = dx.mutable_data_ptr<T>();
      constexpr int V = vec16<T>();
      if (pick_vec<T>(cols, {gp, yp, dp}) > 1)
        softmax_bwd_kernel<T, V, LOG><<<grid, threads_for(cols / V, 2), 0, stream>>>(gp, yp, dp, rows, cols);
      else
        softmax_bwd_kernel<T, 1, LOG><<<grid, threads_for(cols, 2), 0, stream>>>(gp, yp, dp, rows, cols);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return restore(dx, d, out.dim());
}

at::Tensor softmax(const at::Tensor& x, int64_t dim) { return softmax_fwd<false>("mytorch::softmax", x, dim); }
at::Tensor log_softmax(const at::Tensor& x, int64_t dim) {
  return softmax_fwd<true>("mytorch::log_softmax", x, dim);
}
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim) {
  return softmax_bwd<false>("mytorch::softmax_backward", grad, out, dim);
}
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim) {
  return softmax_bwd<true>("mytorch::log_softmax_backward", grad, out, dim);
}

}  // namespace
}  // namespace cuda
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, CUDA, m) {
  m.impl("softmax", &mytorch::cuda::softmax);
  m.impl("softmax_backward", &mytorch::cuda::softmax_backward);
  m.impl("log_softmax", &mytorch::cuda::log_softmax);
  m.impl("log_softmax_backward", &mytorch::cuda::log_softmax_backward);
}
