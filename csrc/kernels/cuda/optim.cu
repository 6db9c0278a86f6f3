// Multi-tensor AdamW and SGD steps (CUDA): one launch updates every parameter.
// The host builds a table of tensor pointers and a list of (tensor, chunk) work
// items; each block takes one chunk of one tensor. Math in fp32.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mytorch {
namespace cuda {
namespace {

// Elements per block. H100, AdamW over 495M fp32 elements (144 tensors), % of copy: 65536 a
// block (32 passes of one vector a thread) 95.7; 8192, one pass of 4 vectors, 99.6 (SGD 94.7 ->
// 100.3): finer work evens out the last wave, and every load of a thread is in flight at once.
constexpr int64_t kChunk = 8192;
constexpr int64_t kMaxBlocks = 1 << 18;
constexpr int kOptThreads = 512;
constexpr int kSlots = 4;  // param, grad, state1, state2

struct TensorRow {
  int64_t ptr[kSlots];
  int64_t numel;
};

struct AdamArgs {
  float lr, beta1, beta2, wd, eps, bc1, bc2_sqrt;
};

struct SgdArgs {
  float lr, momentum, dampening, wd;
  bool nesterov, first_step;
};

template <typename T>
__device__ __forceinline__ void adam_elem(T& p, const T g, T& m, T& v, const AdamArgs& a) {
  float pf = (float)p, gf = (float)g, mf = (float)m, vf = (float)v;
  pf *= 1.f - a.lr * a.wd;
  mf = a.beta1 * mf + (1.f - a.beta1) * gf;
  vf = a.beta2 * vf + (1.f - a.beta2) * gf * gf;
  float denom = sqrtf(vf) / a.bc2_sqrt + a.eps;
  pf -= (a.lr / a.bc1) * mf / denom;
  p = (T)pf;
  m = (T)mf;
  v = (T)vf;
}

// buf: the momentum buffer's element when has_buf.
template <typename T>
__device__ __forceinline__ void sgd_elem(T& p, const T g, T& buf, bool has_buf, const SgdArgs& a) {
  float pf = (float)p, gf = (float)g;
  if (a.wd != 0.f) gf += a.wd * pf;
  if (a.momentum != 0.f && has_buf) {
    float b = a.first_step ? gf : a.momentum * (float)buf + (1.f - a.dampening) * gf;
    buf = (T)b;
    gf = a.nesterov ? gf + a.momentum * b : b;
  }
  p = (T)(pf - a.lr * gf);
}

template <typename T, bool ADAM, int U>
__global__ void __launch_bounds__(kOptThreads) multi_tensor_kernel(const TensorRow* __restrict__ table,
                                                                  const int64_t* __restrict__ work, AdamArgs adam,
                                                                  SgdArgs sgd, int64_t chunk) {
  constexpr int V = vec16<T>();
  const int64_t t = work[2 * blockIdx.x], start = work[2 * blockIdx.x + 1] * chunk;
  const TensorRow row = table[t];
  const int64_t n = min(row.numel - start, chunk);
  T* p = reinterpret_cast<T*>(row.ptr[0]) + start;
  const T* g = reinterpret_cast<const T*>(row.ptr[1]) + start;
  T* s1 = row.ptr[2] ? reinterpret_cast<T*>(row.ptr[2]) + start : nullptr;
  T* s2 = row.ptr[3] ? reinterpret_cast<T*>(row.ptr[3]) + start : nullptr;
  bool aligned = ((uintptr_t)p | (uintptr_t)g | (uintptr_t)s1 | (uintptr_t)s2) % 16 == 0;
  int64_t nvec = aligned ? n / V : 0;
  // U vectors of each tensor a thread loaded before any store: more loads in flight
  for (int64_t i0 = threadIdx.x; i0 < nvec; i0 += U * blockDim.x) {
    Vec<T, V> pv[U], gv[U], mv[U], vv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = i0 + u * blockDim.x;
      if (i >= nvec) break;
      pv[u] = load_vec<T, V>(p + i * V);
      gv[u] = load_vec<T, V>(g + i * V);
      if (s1) mv[u] = load_vec<T, V>(s1 + i * V);
      if (ADAM) vv[u] = load_vec<T, V>(s2 + i * V);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = i0 + u * blockDim.x;
      if (i >= nvec) break;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (ADAM) adam_elem(pv[u].v[k], gv[u].v[k], mv[u].v[k], vv[u].v[k], adam);
        else sgd_elem(pv[u].v[k], gv[u].v[k], mv[u].v[k], s1 != nullptr, sgd);
      }
      store_vec<T, V>(p + i * V, pv[u]);
      if (s1) store_vec<T, V>(s1 + i * V, mv[u]);
      if (ADAM) store_vec<T, V>(s2 + i * V, vv[u]);
    }
  }
  for (int64_t i = nvec * V + threadIdx.x; i < n; i += blockDim.x) {
    if (ADAM) adam_elem(p[i], g[i], s1[i], s2[i], adam);
    else {
      T unused = T(0.f);
      sgd_elem(p[i], g[i], s1 ? s1[i] : unused, s1 != nullptr, sgd);
    }
  }
}

void check_list(const char* op, const char* name, at::TensorList ts, at::TensorList params, bool may_be_empty) {
  if (may_be_empty && ts.empty()) return;
  TORCH_CHECK(ts.size() == params.size(), op, ": expected ", name, " to have ", params.size(),
              " tensors (one per param), got ", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    const auto& p = params[i];
    TORCH_CHECK(t.device() == p.device() && t.scalar_type() == p.scalar_type() && t.sizes() == p.sizes(), op,
                ": expected ", name, "[", i, "] to match params[", i, "] (", p.scalar_type(), " ", p.sizes(), " on ",
                p.device(), "), got ", t.scalar_type(), " ", t.sizes(), " on ", t.device());
    TORCH_CHECK(t.is_contiguous(), op, ": expected ", name, "[", i, "] to be contiguous");
  }
}

template <bool ADAM>
void launch_multi_tensor(const char* op, at::TensorList params, at::TensorList grads, at::TensorList s1,
                         at::TensorList s2, const AdamArgs& adam, const SgdArgs& sgd) {
  if (params.empty()) return;
  const auto& p0 = params[0];
  check_cuda(op, "params[0]", p0);
  check_cuda_float(op, "params[0]", p0);
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].device() == p0.device() && params[i].scalar_type() == p0.scalar_type(), op,
                ": expected every param to be ", p0.scalar_type(), " on ", p0.device(), ", got params[", i, "] ",
                params[i].scalar_type(), " on ", params[i].device());
    TORCH_CHECK(params[i].is_contiguous(), op, ": expected params[", i, "] to be contiguous");
  }
  check_list(op, "grads", grads, params, false);
  check_list(op, ADAM ? "exp_avgs" : "momentum_buffers", s1, params, !ADAM);
  if (ADAM) check_list(op, "exp_avg_sqs", s2, params, false);
  c10::cuda::CUDAGuard guard(p0.device());

  int64_t nt = (int64_t)params.size();
  // kChunk elements a block; past kMaxBlocks blocks a multiple of it (each thread then makes
  // several passes), so the work list stays near 4 MB however large the model
  int64_t fine = 0;
  for (int64_t i = 0; i < nt; ++i) fine += (params[i].numel() + kChunk - 1) / kChunk;
  const int64_t chunk = kChunk * std::max<int64_t>(1, (fine + kMaxBlocks - 1) / kMaxBlocks);
  std::vector<int64_t> work;
  work.reserve(2 * std::min(fine, kMaxBlocks + nt));
  at::Tensor table = aten::empty({nt, (int64_t)(sizeof(TensorRow) / sizeof(int64_t))},
                               at::TensorOptions().dtype(at::kLong).pinned_memory(true));
  auto* rows = reinterpret_cast<TensorRow*>(table.mutable_data_ptr<int64_t>());
  for (int64_t i = 0; i < nt; ++i) {
    rows[i].ptr[0] = (int64_t)params[i].data_ptr();
    rows[i].ptr[1] = (int64_t)grads[i].data_ptr();
    rows[i].ptr[2] = s1.empty() ? 0 : (int64_t)s1[i].data_ptr();
    rows[i].ptr[3] = ADAM ? (int64_t)s2[i].data_ptr() : 0;
    rows[i].numel = params[i].numel();
    for (int64_t c = 0; c * chunk < rows[i].numel; ++c) {
      work.push_back(i);
      work.push_back(c);
    }
  }
  if (work.empty()) return;
  at::Tensor work_h = aten::empty({(int64_t)work.size()}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
  std::memcpy(work_h.mutable_data_ptr<int64_t>(), work.data(), work.size() * sizeof(int64_t));
  at::Tensor table_d = table.to(p0.device(), /*non_blocking=*/true);
  at::Tensor work_d = work_h.to(p0.device(), /*non_blocking=*/true);
  int64_t blocks = (int64_t)work.size() / 2;
  TORCH_CHECK(blocks < (int64_t(1) << 31), op, ": too many chunks (", blocks, ")");
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(p0.scalar_type(), "mytorch_multi_tensor_cuda", [&] {
    // one pass of U vectors a thread covers a chunk: 2048 fp32 / 1024 16-bit vectors
    constexpr int U = sizeof(scalar_t) == 4 ? 4 : 2;
    auto kernel = multi_tensor_kernel<scalar_t, ADAM, U>;
    kernel<<<(unsigned)blocks, kOptThreads, 0, stream>>>(
        reinterpret_cast<const TensorRow*>(table_d.const_data_ptr<int64_t>()), work_d.const_data_ptr<int64_t>(), adam,
        sgd, chunk);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void fused_adamw_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                  double lr, double beta1, double beta2, double weight_decay, double eps, int64_t step) {
  const char* op = "mytorch::fused_adamw_";
  TORCH_CHECK(step >= 1, op, ": expected step >= 1 (the count after this update), got ", step);
  AdamArgs a{(float)lr,
             (float)beta1,
             (float)beta2,
             (float)weight_decay,
             (float)eps,
             (float)(1.0 - std::pow(beta1, (double)step)),
             (float)std::sqrt(1.0 - std::pow(beta2, (double)step))};
  launch_multi_tensor<true>(op, params, grads, exp_avgs, exp_avg_sqs, a, SgdArgs{});
}

void fused_sgd_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) {
  const char* op = "mytorch::fused_sgd_";
  TORCH_CHECK(momentum != 0.0 || momentum_buffers.empty(), op,
              ": expected no momentum_buffers when momentum is 0, got ", momentum_buffers.size());
  TORCH_CHECK(momentum == 0.0 || !momentum_buffers.empty(), op,
              ": expected momentum_buffers (one per param) when momentum is ", momentum);
  SgdArgs s{(float)lr, (float)momentum, (float)dampening, (float)weight_decay, nesterov, first_step};
  launch_multi_tensor<false>(op, params, grads, momentum_buffers, {}, AdamArgs{}, s);
}

}  // namespace cuda
}  // namespace mytorch
