// 2-D (and 1-D) convolution kernels (OpenMP).
//
// General case: im2col over a tile of output positions, then one GEMM per tile
//   y[n, g, :, tile] = W_g (O/G x K) @ col (K x tile),   K = C/G * kH * kW
// which keeps the column buffer in cache. 1x1 / stride-1 / no-padding convolutions
// skip im2col and multiply the input in place. Backward runs the same tiles:
//   grad_input:  col = W_g^T @ grad[n, g, :, tile], then col2im adds it back
//   grad_weight: dW_g += grad[n, g, :, tile] @ col^T  (per-thread partial sums)
// Depthwise convolutions (one input channel per group) use a direct kernel.
//
// Threads: when there are at least as many (image, group, tile) tasks as threads,
// each thread runs whole tasks with a single-threaded GEMM; otherwise the tasks run
// in order and the GEMM uses the thread pool.
#include "kernels/conv.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/gemm.h"

namespace mytorch {
namespace cpu {
namespace {

// Target size of one im2col tile. Measured on a 2-core AVX-512 VM, ResNet-18 3x3 layers,
// N=2: 512 KB 117-120 GFLOP/s forward, 1 MB 142, 2 MB 145-150, 4 MB 149-152 (larger GEMMs
// amortize the packing of W).
constexpr int64_t kColBytes = 2048 * 1024;
constexpr int64_t kParallelGrain = 1 << 14;

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// The shared geometry (kernels/conv.h) plus the CPU kernels' tiling.
struct ConvShape : conv::ConvGeometry {
  bool depthwise() const { return Cg() == 1 && G > 1; }
  int64_t tile() const {
    int64_t t = kColBytes / std::max<int64_t>(1, K() * 8);
    t = std::max<int64_t>(64, t / 16 * 16);
    return std::min(t, std::max<int64_t>(1, OHW()));
  }
};

// ---- GEMM over raw pointers (gemm.h) ----
inline void gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rsa,
                 int64_t csa, const float* b, int64_t rsb, int64_t csb, float beta, float* c,
                 int64_t rsc, int64_t csc) {
  sgemm(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}
inline void gemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t rsa,
                 int64_t csa, const double* b, int64_t rsb, int64_t csb, double beta, double* c,
                 int64_t rsc, int64_t csc) {
  dgemm(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

// Output positions o in [lo, hi) whose input position o * stride + off lies in [0, size).
inline void valid_range(int64_t off, int64_t stride, int64_t size, int64_t out, int64_t& lo,
                        int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  hi = (size - 1 - off) < 0 ? 0 : (size - 1 - off) / stride + 1;
  hi = std::min(hi, out);
  lo = std::min(lo, hi);
}

// col (K x cols) = the input patches of output positions [p0, p1) of one group.
template <typename T>
void im2col(const T* x, const ConvShape& s, int64_t p0, int64_t p1, T* col) {
  const int64_t cols = p1 - p0;
  for (int64_t c = 0; c < s.Cg(); ++c) {
    for (int64_t i = 0; i < s.KH; ++i) {
      for (int64_t j = 0; j < s.KW; ++j) {
        T* dst = col + ((c * s.KH + i) * s.KW + j) * cols;
        const int64_t offw = j * s.dw - s.pw;
        int64_t lo, hi;
        valid_range(offw, s.sw, s.W, s.OW, lo, hi);
        int64_t p = p0;
        while (p < p1) {
          const int64_t oh = p / s.OW, a = p % s.OW, e = std::min(s.OW, a + (p1 - p));
          const int64_t ih = oh * s.sh - s.ph + i * s.dh;
          if (ih < 0 || ih >= s.H) {
            std::fill(dst, dst + (e - a), T(0));
          } else {
            const T* src = x + (c * s.H + ih) * s.W + offw;
            const int64_t l = std::max(a, lo), h = std::max(l, std::min(e, hi));
            T* d = dst - a;
            for (int64_t ow = a; ow < l; ++ow) d[ow] = T(0);
            if (s.sw == 1) {
              std::memcpy(d + l, src + l, (h - l) * sizeof(T));
            } else {
              for (int64_t ow = l; ow < h; ++ow) d[ow] = src[ow * s.sw];
            }
            for (int64_t ow = h; ow < e; ++ow) d[ow] = T(0);
          }
          dst += e - a;
          p += e - a;
        }
      }
    }
  }
}

// The adjoint of im2col: x += the patches in col, for output positions [p0, p1).
template <typename T>
void col2im_add(const T* col, const ConvShape& s, int64_t p0, int64_t p1, T* x) {
  const int64_t cols = p1 - p0;
  for (int64_t c = 0; c < s.Cg(); ++c) {
    for (int64_t i = 0; i < s.KH; ++i) {
      for (int64_t j = 0; j < s.KW; ++j) {
        const T* src = col + ((c * s.KH + i) * s.KW + j) * cols;
        const int64_t offw = j * s.dw - s.pw;
        int64_t lo, hi;
        valid_range(offw, s.sw, s.W, s.OW, lo, hi);
        int64_t p = p0;
        while (p < p1) {
          const int64_t oh = p / s.OW, a = p % s.OW, e = std::min(s.OW, a + (p1 - p));
          const int64_t ih = oh * s.sh - s.ph + i * s.dh;
          if (ih >= 0 && ih < s.H) {
            T* dst = x + (c * s.H + ih) * s.W + offw;
            const T* sp = src - a;
            const int64_t l = std::max(a, lo), h = std::min(e, hi);
            if (s.sw == 1) {
#pragma omp simd
              for (int64_t ow = l; ow < h; ++ow) dst[ow] += sp[ow];
            } else {
              for (int64_t ow = l; ow < h; ++ow) dst[ow * s.sw] += sp[ow];
            }
          }
          src += e - a;
          p += e - a;
        }
      }
    }
  }
}

// Runs fn(task, buffer) for every task. Parallel over tasks (one buffer per thread,
// single-threaded GEMMs) when there are enough of them; otherwise in order.
template <typename T, typename F>
void run_tasks(int64_t ntasks, int64_t buf_elems, const F& fn) {
  const int nt = max_threads();
  if (nt > 1 && ntasks >= nt) {
#pragma omp parallel
    {
      std::unique_ptr<T[]> buf(new T[std::max<int64_t>(1, buf_elems)]);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntasks; ++t) fn(t, buf.get());
    }
  } else {
    std::unique_ptr<T[]> buf(new T[std::max<int64_t>(1, buf_elems)]);
    for (int64_t t = 0; t < ntasks; ++t) fn(t, buf.get());
  }
}

// ---- depthwise (one input channel per group): direct kernels ----
template <typename T>
void depthwise_forward(const T* x, const T* w, const T* b, T* y, const ConvShape& s) {
  const int64_t mult = s.Og(), NO = s.N * s.O;
#pragma omp parallel for schedule(static) if (NO * s.OHW() * s.KH * s.KW > kParallelGrain)
  for (int64_t no = 0; no < NO; ++no) {
    const int64_t n = no / s.O, o = no % s.O, c = o / mult;
    const T* xp = x + (n * s.C + c) * s.HW();
    const T* wp = w + o * s.KH * s.KW;
    T* yp = y + no * s.OHW();
    const T bias = b ? b[o] : T(0);
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      T* yr = yp + oh * s.OW;
      for (int64_t ow = 0; ow < s.OW; ++ow) yr[ow] = bias;
      for (int64_t i = 0; i < s.KH; ++i) {
        const int64_t ih = oh * s.sh - s.ph + i * s.dh;
        if (ih < 0 || ih >= s.H) continue;
        for (int64_t j = 0; j < s.KW; ++j) {
          const int64_t offw = j * s.dw - s.pw;
          int64_t lo, hi;
          valid_range(offw, s.sw, s.W, s.OW, lo, hi);
          const T wv = wp[i * s.KW + j];
          const T* xr = xp + ih * s.W + offw;
          if (s.sw == 1) {
#pragma omp simd
            for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * s.sw];
          }
        }
      }
    }
  }
}

template <typename T>
void depthwise_backward_input(const T* gy, const T* w, T* gx, const ConvShape& s) {
  const int64_t mult = s.Og(), NC = s.N * s.C;
#pragma omp parallel for schedule(static) if (NC * s.OHW() * s.KH * s.KW > kParallelGrain)
  for (int64_t nc = 0; nc < NC; ++nc) {
    const int64_t n = nc / s.C, c = nc % s.C;
    T* xp = gx + nc * s.HW();
    std::fill(xp, xp + s.HW(), T(0));
    for (int64_t m = 0; m < mult; ++m) {
      const int64_t o = c * mult + m;
      const T* gp = gy + (n * s.O + o) * s.OHW();
      const T* wp = w + o * s.KH * s.KW;
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        const T* gr = gp + oh * s.OW;
        for (int64_t i = 0; i < s.KH; ++i) {
          const int64_t ih = oh * s.sh - s.ph + i * s.dh;
          if (ih < 0 || ih >= s.H) continue;
          for (int64_t j = 0; j < s.KW; ++j) {
            const int64_t offw = j * s.dw - s.pw;
            int64_t lo, hi;
            valid_range(offw, s.sw, s.W, s.OW, lo, hi);
            const T wv = wp[i * s.KW + j];
            T* xr = xp + ih * s.W + offw;
            if (s.sw == 1) {
#pragma omp simd
              for (int64_t ow = lo; ow < hi; ++ow) xr[ow] += wv * gr[ow];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) xr[ow * s.sw] += wv * gr[ow];
            }
          }
        }
      }
    }
  }
}

template <typename T>
void depthwise_backward_weight(const T* gy, const T* x, T* gw, const ConvShape& s) {
  const int64_t mult = s.Og();
#pragma omp parallel for schedule(static) if (s.N * s.O * s.OHW() * s.KH * s.KW > kParallelGrain)
  for (int64_t o = 0; o < s.O; ++o) {
    const int64_t c = o / mult;
    for (int64_t i = 0; i < s.KH; ++i) {
      for (int64_t j = 0; j < s.KW; ++j) {
        const int64_t offw = j * s.dw - s.pw;
        int64_t lo, hi;
        valid_range(offw, s.sw, s.W, s.OW, lo, hi);
        T acc = 0;
        for (int64_t n = 0; n < s.N; ++n) {
          const T* xp = x + (n * s.C + c) * s.HW();
          const T* gp = gy + (n * s.O + o) * s.OHW();
          for (int64_t oh = 0; oh < s.OH; ++oh) {
            const int64_t ih = oh * s.sh - s.ph + i * s.dh;
            if (ih < 0 || ih >= s.H) continue;
            const T* xr = xp + ih * s.W + offw;
            const T* gr = gp + oh * s.OW;
            if (s.sw == 1) {
#pragma omp simd reduction(+ : acc)
              for (int64_t ow = lo; ow < hi; ++ow) acc += gr[ow] * xr[ow];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) acc += gr[ow] * xr[ow * s.sw];
            }
          }
        }
        gw[(o * s.KH + i) * s.KW + j] = acc;
      }
    }
  }
}

// ---- general case: im2col + GEMM ----
template <typename T>
void conv_forward_kernel(const T* x, const T* w, const T* b, T* y, const ConvShape& s) {
  if (s.depthwise()) return depthwise_forward(x, w, b, y, s);
  const int64_t K = s.K(), OHW = s.OHW(), HW = s.HW(), Og = s.Og(), G = s.G;
  const int64_t tile = s.tile(), ntiles = (OHW + tile - 1) / tile;
  const bool pw = s.pointwise();
  run_tasks<T>(s.N * G * ntiles, pw ? 0 : K * tile, [&](int64_t task, T* col) {
    const int64_t n = task / (G * ntiles), g = task / ntiles % G, t = task % ntiles;
    const int64_t p0 = t * tile, p1 = std::min(OHW, p0 + tile), cols = p1 - p0;
    const T* xg = x + (n * s.C + g * s.Cg()) * HW;
    T* yg = y + (n * s.O + g * Og) * OHW + p0;
    const T* B = xg + p0;
    int64_t rsb = HW;
    if (!pw) {
      im2col(xg, s, p0, p1, col);
      B = col;
      rsb = cols;
    }
    gemm(Og, cols, K, T(1), w + g * Og * K, K, 1, B, rsb, 1, T(0), yg, OHW, 1);
    if (b) {
      for (int64_t o = 0; o < Og; ++o) {
        const T bv = b[g * Og + o];
        T* yr = yg + o * OHW;
#pragma omp simd
        for (int64_t q = 0; q < cols; ++q) yr[q] += bv;
      }
    }
  });
}

template <typename T>
void conv_backward_input_kernel(const T* gy, const T* w, T* gx, const ConvShape& s) {
  if (s.depthwise()) return depthwise_backward_input(gy, w, gx, s);
  const int64_t K = s.K(), OHW = s.OHW(), HW = s.HW(), Og = s.Og(), G = s.G;
  if (s.pointwise()) {  // gx[n, g] = W_g^T @ gy[n, g], tiled over positions
    const int64_t tile = std::min<int64_t>(std::max<int64_t>(1, OHW), 1024);
    const int64_t ntiles = (OHW + tile - 1) / tile;
    run_tasks<T>(s.N * G * ntiles, 0, [&](int64_t task, T*) {
      const int64_t n = task / (G * ntiles), g = task / ntiles % G, t = task % ntiles;
      const int64_t p0 = t * tile, cols = std::min(OHW, p0 + tile) - p0;
      gemm(K, cols, Og, T(1), w + g * Og * K, 1, K, gy + (n * s.O + g * Og) * OHW + p0, OHW, 1,
           T(0), gx + (n * s.C + g * s.Cg()) * HW + p0, HW, 1);
    });
    return;
  }
  // Tiles of one (image, group) overlap in gx, so a task owns a whole (image, group).
  const int64_t tile = s.tile(), ntiles = (OHW + tile - 1) / tile;
  run_tasks<T>(s.N * G, K * tile, [&](int64_t task, T* col) {
    const int64_t n = task / G, g = task % G;
    T* xg = gx + (n * s.C + g * s.Cg()) * HW;
    std::fill(xg, xg + s.Cg() * HW, T(0));
    for (int64_t t = 0; t < ntiles; ++t) {
      const int64_t p0 = t * tile, p1 = std::min(OHW, p0 + tile), cols = p1 - p0;
      gemm(K, cols, Og, T(1), w + g * Og * K, 1, K, gy + (n * s.O + g * Og) * OHW + p0, OHW, 1,
           T(0), col, cols, 1);
      col2im_add(col, s, p0, p1, xg);
    }
  });
}

template <typename T>
void conv_backward_weight_kernel(const T* gy, const T* x, T* gw, const ConvShape& s) {
  if (s.depthwise()) return depthwise_backward_weight(gy, x, gw, s);
  const int64_t K = s.K(), OHW = s.OHW(), HW = s.HW(), Og = s.Og(), G = s.G;
  const int64_t tile = s.tile(), ntiles = (OHW + tile - 1) / tile;
  const int64_t ntasks = s.N * G * ntiles, wsize = s.O * K;
  const bool pw = s.pointwise();
  const int nt = max_threads();
  const bool parallel = nt > 1 && ntasks >= nt;
  // Partial sums: one per thread when tasks run in parallel.
  const int nacc = parallel ? nt : 1;
  std::unique_ptr<T[]> partial(new T[nacc > 1 ? nacc * wsize : 1]);
  auto acc_of = [&](int tid) { return nacc > 1 ? partial.get() + tid * wsize : gw; };
  for (int a = 0; a < nacc; ++a) std::fill(acc_of(a), acc_of(a) + wsize, T(0));
  auto body = [&](int64_t task, T* col, T* acc) {
    const int64_t n = task / (G * ntiles), g = task / ntiles % G, t = task % ntiles;
    const int64_t p0 = t * tile, p1 = std::min(OHW, p0 + tile), cols = p1 - p0;
    const T* xg = x + (n * s.C + g * s.Cg()) * HW;
    const T* B = xg + p0;
    int64_t csb = HW;
    if (!pw) {
      im2col(xg, s, p0, p1, col);
      B = col;
      csb = cols;
    }
    gemm(Og, K, cols, T(1), gy + (n * s.O + g * Og) * OHW + p0, OHW, 1, B, 1, csb, T(1),
         acc + g * Og * K, K, 1);
  };
  const int64_t buf = pw ? 1 : K * tile;
  if (parallel) {
#pragma omp parallel num_threads(nt)
    {
      std::unique_ptr<T[]> col(new T[buf]);
      T* acc = acc_of(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntasks; ++t) body(t, col.get(), acc);
    }
#pragma omp parallel for schedule(static) if (wsize * nacc > kParallelGrain)
    for (int64_t i = 0; i < wsize; ++i) {
      T v = 0;
      for (int a = 0; a < nacc; ++a) v += partial[a * wsize + i];
      gw[i] = v;
    }
  } else {
    std::unique_ptr<T[]> col(new T[buf]);
    for (int64_t t = 0; t < ntasks; ++t) body(t, col.get(), gw);
  }
}

template <typename T>
void conv_backward_bias_kernel(const T* gy, T* gb, const ConvShape& s) {
  const int64_t OHW = s.OHW();
#pragma omp parallel for schedule(static) if (s.N * s.O * OHW > kParallelGrain)
  for (int64_t o = 0; o < s.O; ++o) {
    T acc = 0;
    for (int64_t n = 0; n < s.N; ++n) {
      const T* gp = gy + (n * s.O + o) * OHW;
#pragma omp simd reduction(+ : acc)
      for (int64_t q = 0; q < OHW; ++q) acc += gp[q];
    }
    gb[o] = acc;
  }
}

// ---- ATen glue ----
using conv::is_half;

// Checks input/weight/bias/params; returns the geometry.
ConvShape conv_shape(const char* op, const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor* bias, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, int64_t groups, int64_t spatial_dims) {
  return {conv::conv_geometry(op, input, weight, bias, stride, padding, dilation, groups, spatial_dims)};
}

}  // namespace

at::Tensor convolution(const char* op, const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                       int64_t spatial_dims) {
  const at::Tensor* b = bias.has_value() && bias->defined() ? &*bias : nullptr;
  ConvShape s = conv_shape(op, input, weight, b, stride, padding, dilation, groups, spatial_dims);
  if (is_half(input))  // bf16 / fp16 (autocast)
    return conv::forward_in_float(convolution, op, input, weight, b, stride, padding, dilation, groups, spatial_dims);
  at::Tensor x = input.contiguous(), w = weight.contiguous();
  at::Tensor bc = b ? b->contiguous() : at::Tensor();
  at::Tensor y = at::empty(conv::out_shape(s, spatial_dims),
                           input.options().memory_format(at::MemoryFormat::Contiguous));
  if (y.numel() == 0) return y;
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "mytorch_conv", [&] {
    conv_forward_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                                  b ? bc.const_data_ptr<scalar_t>() : nullptr,
                                  y.mutable_data_ptr<scalar_t>(), s);
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const char* op, const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    std::array<bool, 3> mask, int64_t spatial_dims) {
  ConvShape s = conv_shape(op, input, weight, nullptr, stride, padding, dilation, groups,
                           spatial_dims);
  conv::check_grad(op, grad, input, s, spatial_dims);
  if (is_half(input))
    return conv::backward_in_float(convolution_backward, op, grad, input, weight, stride, padding, dilation, groups,
                                   mask, spatial_dims);
  at::Tensor gy = grad.contiguous(), x = input.contiguous(), w = weight.contiguous();
  auto opts = input.options().memory_format(at::MemoryFormat::Contiguous);
  at::Tensor gx, gw, gb;
  if (mask[0]) gx = at::empty(input.sizes(), opts);
  if (mask[1]) gw = at::empty(weight.sizes(), opts);
  if (mask[2]) gb = at::empty({s.O}, opts);
  const bool empty = gy.numel() == 0;
  if (empty) {  // no output positions: every gradient is zero
    if (gx.defined()) gx.zero_();
    if (gw.defined()) gw.zero_();
    if (gb.defined()) gb.zero_();
    return {gx, gw, gb};
  }
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "mytorch_conv_backward", [&] {
    const scalar_t* gyp = gy.const_data_ptr<scalar_t>();
    if (gx.defined())
      conv_backward_input_kernel<scalar_t>(gyp, w.const_data_ptr<scalar_t>(),
                                           gx.mutable_data_ptr<scalar_t>(), s);
    if (gw.defined())
      conv_backward_weight_kernel<scalar_t>(gyp, x.const_data_ptr<scalar_t>(),
                                            gw.mutable_data_ptr<scalar_t>(), s);
    if (gb.defined()) conv_backward_bias_kernel<scalar_t>(gyp, gb.mutable_data_ptr<scalar_t>(), s);
  });
  return {gx, gw, gb};
}

}  // namespace cpu
}  // namespace mytorch
