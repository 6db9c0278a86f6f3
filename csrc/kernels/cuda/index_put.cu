// index / index_put with one index tensor (int64/int32, or a bool mask over k dims) and
// nonzero (CUDA), as the CPU kernels (index.cpp). A mask goes through nonzero's flat
// positions; int indices are checked before use (reduce.cuh, index.cu). index_put adds with
// atomics when accumulating; otherwise the last write of a duplicated row wins, as the CPU
// kernel's serial loop.
#include <ATen/core/List.h>

#include <array>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/index.h"

namespace mytorch {
namespace cuda {
namespace {

using red::compute_t;
using namespace ix;

// ---- nonzero: count per tile, scan the counts, then write (order kept) ----
constexpr int kNzThreads = 256, kNzRounds = 16;
constexpr int64_t kNzTile = (int64_t)kNzThreads * kNzRounds;

struct Sizes {
  int nd = 0;
  int64_t size[kMaxDims];
};

// WRITE = false: counts[b] = nonzeros in tile b. WRITE = true: counts[b] is the tile's first
// output row; writes flat positions (flat) or coordinates ([cnt, nd]).
template <typename T, bool WRITE>
__global__ void __launch_bounds__(kNzThreads)
    nonzero_kernel(const T* __restrict__ x, int64_t n, int64_t* counts, int64_t* out, Sizes s, bool flat) {
  __shared__ int warp_cnt[32], warp_off[32], round_total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int64_t tile0 = (int64_t)blockIdx.x * kNzTile;
  int64_t running = WRITE ? counts[blockIdx.x] : 0;
  for (int r = 0; r < kNzRounds && tile0 + (int64_t)r * blockDim.x < n; ++r) {
    const int64_t e = tile0 + (int64_t)r * blockDim.x + threadIdx.x;
    const bool f = e < n && static_cast<compute_t<T>>(x[e]) != static_cast<compute_t<T>>(0);
    const unsigned int b = __ballot_sync(0xffffffffu, f);
    if (lane == 0) warp_cnt[warp] = __popc(b);
    __syncthreads();
    if (warp == 0) {
      const int v = lane < nwarps ? warp_cnt[lane] : 0;
      const int incl = warp_inclusive_sum(v, lane);
      warp_off[lane] = incl - v;
      if (lane == 31) round_total = incl;
    }
    __syncthreads();
    if (WRITE && f) {
      const int64_t pos = running + warp_off[warp] + __popc(b & ((1u << lane) - 1u));
      if (flat) {
        out[pos] = e;
      } else {
        int64_t rem = e;
        for (int k = s.nd - 1; k >= 0; --k) {
          out[pos * s.nd + k] = rem % s.size[k];
          rem /= s.size[k];
        }
      }
    }
    running += round_total;
    __syncthreads();  // warp_cnt / round_total are rewritten next round
  }
  if (!WRITE && threadIdx.x == 0) counts[blockIdx.x] = running;
}

// In place exclusive scan of c[0, nb); c[nb] = the total. One block of 1024 threads.
__global__ void __launch_bounds__(1024) scan_kernel(int64_t* c, int64_t nb) {
  __shared__ int64_t warp_sum[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  int64_t carry = 0;
  for (int64_t base = 0; base < nb; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const int64_t v = i < nb ? c[i] : 0;
    int64_t incl = warp_inclusive_sum(v, lane);
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int64_t w = warp_inclusive_sum<int64_t>(lane < nwarps ? warp_sum[lane] : 0, lane);
      if (lane < nwarps) warp_sum[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    incl += warp > 0 ? warp_sum[warp - 1] : 0;
    if (i < nb) c[i] = carry + incl - v;
    carry += warp_sum[nwarps - 1];
    __syncthreads();
  }
  if (threadIdx.x == 0) c[nb] = carry;
}

// flat: positions in x's contiguous order ([cnt]); else coordinates ([cnt, x.dim()]).
at::Tensor nonzero_impl(const char* op, const at::Tensor& x_, bool flat) {
  TORCH_CHECK(x_.dim() <= kMaxDims, op, ": expected at most ", kMaxDims, " dims, got ", x_.dim());
  at::Tensor x = x_.contiguous();
  const int64_t n = x.numel(), nd = x.dim();
  auto opts = x.options().dtype(at::kLong);
  if (n == 0) return flat ? aten::empty({0}, opts) : aten::empty({0, nd}, opts);
  const int64_t nb = ceil_div(n, kNzTile);
  TORCH_CHECK(nb < (1ll << 31), op, ": tensor of ", n, " elements is too large");
  at::Tensor counts = aten::empty({nb + 1}, opts);
  int64_t* cp = counts.mutable_data_ptr<int64_t>();
  Sizes s;
  s.nd = (int)nd;
  for (int k = 0; k < nd; ++k) s.size[k] = x.size(k);
  auto stream = at::cuda::getCurrentCUDAStream();
  at::Tensor out;
  cpu::dispatch_all(op, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.const_data_ptr<T>();
    nonzero_kernel<T, false><<<(unsigned)nb, kNzThreads, 0, stream>>>(xp, n, cp, nullptr, s, flat);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    scan_kernel<<<1, 1024, 0, stream>>>(cp, nb);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    int64_t cnt = 0;
    copy_to_host(&cnt, cp + nb, sizeof(cnt));
    out = flat ? aten::empty({cnt}, opts) : aten::empty({cnt, nd}, opts);
    if (cnt == 0) return;
    nonzero_kernel<T, true><<<(unsigned)nb, kNzThreads, 0, stream>>>(xp, n, cp, out.mutable_data_ptr<int64_t>(), s,
                                                                    flat);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace

at::Tensor nonzero(const at::Tensor& x) {
  const char* op = "mytorch::nonzero";
  cpu::dispatch_all(op, "x", x.scalar_type(), [](auto) {});
  c10::cuda::CUDAGuard guard(red::common_cuda_device(op, {x}));
  return nonzero_impl(op, x, false);
}

namespace {

// ---- index / index_put with one index tensor (int64/int32, or a bool mask over k dims) ----
struct OneIndex {
  int64_t d = 0;      // first indexed dim of x
  int64_t ndims = 1;  // dims of x it covers (k for a k-D mask)
  at::Tensor raw;     // as given
  at::Tensor index;   // int64, contiguous, on x's device, into the flattened covered dims
};

// The index tensor and where it sits (checks as the CPU kernel, before the device check).
OneIndex find_index(const char* op, const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices) {
  OneIndex r;
  int found = 0;
  int64_t pos = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<at::Tensor> t = indices[i];
    if (t && t->defined()) {
      ++found;
      r.d = pos;
      r.raw = *t;
      pos += t->scalar_type() == at::kBool || t->scalar_type() == at::kByte ? t->dim() : 1;
    } else {
      pos += 1;
    }
  }
  TORCH_CHECK(found == 1, op, ": expected exactly one index tensor (the others None), got ", found);
  TORCH_CHECK(pos <= x.dim(), op, ": too many indices for a tensor of dimension ", x.dim());
  return r;
}

bool is_mask(const at::Tensor& t) { return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte; }

// Fills r.index: mask positions, or the checked int index.
void prepare_index(const char* op, const at::Tensor& x, OneIndex& r, at::Device dev) {
  const at::Tensor& t = r.raw;
  if (is_mask(t)) {
    r.ndims = t.dim();
    for (int64_t i = 0; i < t.dim(); ++i)
      TORCH_CHECK_INDEX(t.size(i) == x.size(r.d + i), op, ": the shape of the mask ", t.sizes(), " at index ", i,
                        " does not match the shape of the indexed tensor ", x.sizes(), " at index ", r.d + i);
    r.index = nonzero_impl(op, red::on_device(t, dev), true);
  } else {
    TORCH_CHECK(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt, op,
                ": expected index tensors to have dtype in (Long, Int, Bool), got ", t.scalar_type());
    r.ndims = 1;
    r.index = contiguous_index(red::on_device(t, dev));
    check_bounds(op, r.index, x.size(r.d), r.d, true);
  }
}

// (outer, mid, inner): x's dims before, under and after the indexed ones.
std::array<int64_t, 3> split_dims(const at::Tensor& x, const OneIndex& r) {
  std::array<int64_t, 3> s{1, 1, 1};
  for (int64_t i = 0; i < x.dim(); ++i) s[i < r.d ? 0 : i < r.d + r.ndims ? 1 : 2] *= x.size(i);
  return s;
}

std::vector<int64_t> indexed_shape(const at::Tensor& x, const OneIndex& r) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().begin() + r.d);
  if (is_mask(r.raw)) s.push_back(r.index.numel());
  else for (auto v : r.raw.sizes()) s.push_back(v);
  for (int64_t i = r.d + r.ndims; i < x.dim(); ++i) s.push_back(x.size(i));
  return s;
}

}  // namespace

at::Tensor index(const at::Tensor& x_, const c10::List<std::optional<at::Tensor>>& indices) {
  const char* op = "mytorch::index";
  OneIndex r = find_index(op, x_, indices);
  at::Device dev = red::common_cuda_device(op, {x_, r.raw});
  c10::cuda::CUDAGuard guard(dev);
  at::Tensor x = red::on_device(x_, dev).contiguous();
  prepare_index(op, x, r, dev);
  at::Tensor out = aten::empty(indexed_shape(x, r), x.options());
  if (out.numel() == 0) return out;
  const auto dims = split_dims(x, r);
  select_rows(op, x, out, r.index, dims[0], dims[1], dims[2]);
  return out;
}

namespace {

// winner[row] = the last i writing that row (index_put without accumulate: last one wins, as
// the CPU kernel's serial loop).
__global__ void last_writer_kernel(const int64_t* __restrict__ idx, int64_t n, int64_t mid, long long* winner) {
  MYTORCH_GRID_LOOP(int64_t, i, n) atomicMax(winner + wrap_index(idx[i], mid), (long long)i);
}

template <typename T, bool ACC>
__global__ void put_kernel(T* x, const T* __restrict__ v, const int64_t* __restrict__ idx,
                           const long long* __restrict__ winner, int64_t outer, int64_t n, int64_t mid, int64_t inner) {
  MYTORCH_GRID_LOOP(int64_t, w, outer * n * inner) {
    const int64_t r = w / inner, j = w - r * inner, o = r / n, i = r - o * n;
    const int64_t row = wrap_index(idx[i], mid);
    T* dst = x + (o * mid + row) * inner + j;
    if (ACC) atomic_add(dst, v[w]);
    else if (winner[row] == i) *dst = v[w];
  }
}

// x: a fresh contiguous tensor (the op's output).
void put_into(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
              bool accumulate) {
  const char* op = "mytorch::index_put";
  OneIndex r = find_index(op, x, indices);
  at::Device dev = red::common_cuda_device(op, {x, r.raw});
  c10::cuda::CUDAGuard guard(dev);
  prepare_index(op, x, r, dev);
  red::common_cuda_device(op, {x, values});
  const auto shape = indexed_shape(x, r);
  index::check_put_values(op, x, values, shape);
  const int64_t n = r.index.numel();
  if (n == 0 || x.numel() == 0) return;
  cpu::dispatch_all(op, "x", x.scalar_type(), [](auto) {});
  at::Tensor v = aten::empty(shape, x.options());  // values broadcast to (outer, n, inner)
  v.copy_(red::on_device(values, dev));
  const auto dims = split_dims(x, r);
  const int64_t outer = dims[0], mid = dims[1], inner = dims[2];
  auto stream = at::cuda::getCurrentCUDAStream();
  at::Tensor winner;
  if (!accumulate) {
    winner = aten::empty({mid}, x.options().dtype(at::kLong));
    C10_CUDA_CHECK(cudaMemsetAsync(winner.mutable_data_ptr(), 0xFF, mid * sizeof(int64_t), stream));  // -1
    last_writer_kernel<<<grid_for(n, 256), 256, 0, stream>>>(r.index.const_data_ptr<int64_t>(), n, mid,
                                                        reinterpret_cast<long long*>(winner.mutable_data_ptr()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const long long* wp = accumulate ? nullptr : reinterpret_cast<const long long*>(winner.const_data_ptr());
  cpu::dispatch_all(op, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int grid = grid_for(outer * n * inner, 256);
    T* xp = x.mutable_data_ptr<T>();
    const T* vp = v.const_data_ptr<T>();
    const int64_t* ip = r.index.const_data_ptr<int64_t>();
    if (accumulate) put_kernel<T, true><<<grid, 256, 0, stream>>>(xp, vp, ip, wp, outer, n, mid, inner);
    else put_kernel<T, false><<<grid, 256, 0, stream>>>(xp, vp, ip, wp, outer, n, mid, inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

at::Tensor index_put(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices,
                        const at::Tensor& values, bool accumulate) {
  TORCH_CHECK(x.is_cuda(), "mytorch::index_put: expected x on a CUDA device, got ", x.device());
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = aten::empty(x.sizes(), x.options());  // works on a contiguous copy of x
  out.copy_(x);
  put_into(out, indices, values, accumulate);
  return out;
}

}  // namespace cuda
}  // namespace mytorch
