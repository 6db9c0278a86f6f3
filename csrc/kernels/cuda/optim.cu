// sgd_step_ and adam_step_ on CUDA: the checks (kernels/optim.h), then one launch that updates
// every parameter where that applies (contiguous params and state of one float32 / bfloat16 /
// float16 dtype on one device; SGD and AdamW without maximize or amsgrad), else the per-param
// path (optim_step.cu). In the one launch the host builds a table of tensor pointers and a list
// of (tensor, chunk) work items; each block takes one chunk of one tensor. Math in fp32.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/optim.h"

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
  // Adam's step count (after this step's increment): the address of a float32 or float64
  // (step_f64) on the device, read by the kernel, or 0 and the value of a CPU tensor in step_host
  int64_t step, step_f64;
  double step_host;
};

// bc1, bc2_sqrt: set by the kernel from each tensor's step count and beta1_d, beta2_d.
struct AdamArgs {
  float lr, beta1, beta2, wd, eps, bc1, bc2_sqrt;
  double beta1_d, beta2_d;
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
  if (ADAM) {  // the bias corrections of this tensor's step count, read where it lies (no host sync)
    const double step = !row.step       ? row.step_host
                        : row.step_f64 ? *reinterpret_cast<const double*>(row.step)
                                       : (double)*reinterpret_cast<const float*>(row.step);
    adam.bc1 = (float)(1.0 - pow(adam.beta1_d, step));
    adam.bc2_sqrt = (float)sqrt(1.0 - pow(adam.beta2_d, step));
  }
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

// Whether the one launch applies: params of one float32 / bfloat16 / float16 dtype on one device,
// they and the lists (each empty or one tensor per param, checked to match them) contiguous.
bool one_launch(at::TensorList params, std::initializer_list<at::TensorList> lists) {
  if (params.empty()) return false;
  const at::Tensor& p0 = params[0];
  const auto dt = p0.scalar_type();
  if (dt != at::kFloat && dt != at::kBFloat16 && dt != at::kHalf) return false;
  for (const at::Tensor& p : params)
    if (p.device() != p0.device() || p.scalar_type() != dt || !p.is_contiguous()) return false;
  for (at::TensorList list : lists)
    for (const at::Tensor& t : list)
      if (!t.is_contiguous()) return false;
  return true;
}

// Checked params and lists (one_launch); s1: exp_avgs or the momentum buffers (empty: none),
// s2: exp_avg_sqs; steps: Adam's step counts, CPU tensors or float32 / float64 on the device.
template <bool ADAM>
void launch_multi_tensor(const char* op, at::TensorList params, at::TensorList grads, at::TensorList s1,
                         at::TensorList s2, at::TensorList steps, const AdamArgs& adam, const SgdArgs& sgd) {
  const auto& p0 = params[0];
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
    rows[i].step = rows[i].step_f64 = 0;
    rows[i].step_host = 0;
    if (ADAM && steps[i].is_cpu()) {
      rows[i].step_host = steps[i].item<double>();  // host memory: no device sync
    } else if (ADAM) {
      rows[i].step = (int64_t)steps[i].const_data_ptr();
      rows[i].step_f64 = steps[i].scalar_type() == at::kDouble;
    }
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

void sgd_step_(at::TensorList params, at::TensorList grads, at::TensorList bufs, double lr, double momentum,
               double dampening, double weight_decay, bool nesterov, bool maximize, bool first_step) {
  const char* op = optim::kSgdOp;
  optim::check_sgd(params, grads, bufs, momentum, [op](const at::Tensor& p) { check_cuda(op, "params", p); });
  const at::TensorList used_bufs = momentum != 0 ? bufs : at::TensorList();
  if (maximize || !one_launch(params, {grads, used_bufs})) {
    sgd_step_each(params, grads, bufs, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step);
    return;
  }
  SgdArgs s{(float)lr, (float)momentum, (float)dampening, (float)weight_decay, nesterov, first_step};
  launch_multi_tensor<false>(op, params, grads, used_bufs, {}, {}, AdamArgs{}, s);
}

void adam_step_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize, bool decoupled) {
  const char* op = optim::kAdamOp;
  optim::check_adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad,
                    [op](const at::Tensor& p) { check_cuda(op, "params", p); });
  bool steps_readable = true;  // where the one launch reads them: the CPU, float32 / float64 on the device
  for (size_t i = 0; i < steps.size(); ++i) {
    TORCH_CHECK(steps[i].is_cpu() || steps[i].device() == params[i].device(), op, ": expected steps[", i,
                "] on the CPU or on ", params[i].device(), ", got ", steps[i].device());
    const auto dt = steps[i].scalar_type();
    steps_readable &= steps[i].is_cpu() || dt == at::kFloat || dt == at::kDouble;
  }
  // the one launch is AdamW's (decoupled weight decay; the same as Adam's without weight decay)
  if (amsgrad || maximize || (!decoupled && weight_decay != 0) || !steps_readable ||
      !one_launch(params, {grads, exp_avgs, exp_avg_sqs})) {
    adam_step_each(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay,
                   eps, amsgrad, maximize, decoupled);
    return;
  }
  AdamArgs a{(float)lr, (float)beta1, (float)beta2, (float)weight_decay, (float)eps, 0.f, 0.f, beta1, beta2};
  launch_multi_tensor<true>(op, params, grads, exp_avgs, exp_avg_sqs, steps, a, SgdArgs{});
}

}  // namespace cuda
}  // namespace mytorch
