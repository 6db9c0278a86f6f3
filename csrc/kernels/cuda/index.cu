// Indexing kernels (CUDA): index_select, gather, scatter_add, cat, and the helpers the
// index / index_put / nonzero kernels (index_put.cu) share. Same semantics as the CPU kernels
// (index.cpp), with the checks of kernels/index.h. Every index is checked by a small kernel before any data is
// touched; a bad one is read back (one sync) and raised as an IndexError. Copies move whole
// elements (or wider units where sizes and alignment allow), so they take any dtype.
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/index.h"

namespace mytorch {
namespace cuda {
namespace {

using namespace ix;

// ---- copy units: unsigned types of 1..16 bytes ----
struct alignas(16) U16 {
  uint64_t lo, hi;
};

template <typename F>
void by_unit(const char* op, int64_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(cpu::Tag<uint8_t>{});
    case 2: return f(cpu::Tag<uint16_t>{});
    case 4: return f(cpu::Tag<uint32_t>{});
    case 8: return f(cpu::Tag<uint64_t>{});
    case 16: return f(cpu::Tag<U16>{});
    default: TORCH_CHECK(false, op, ": elements of ", bytes, " bytes are not supported");
  }
}

// The widest unit (<= 16 bytes) dividing every size and aligning every pointer.
int64_t unit_for(std::initializer_list<int64_t> sizes, const std::vector<const void*>& ptrs) {
  for (int64_t u = 16; u > 1; u >>= 1) {
    bool ok = true;
    for (int64_t s : sizes) ok = ok && s % u == 0;
    for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % u == 0;
    if (ok) return u;
  }
  return 1;
}

__global__ void bounds_kernel(const int64_t* __restrict__ idx, int64_t n, int64_t size, bool allow_neg,
                              unsigned long long* bad) {
  MYTORCH_GRID_LOOP(int64_t, i, n) {
    const int64_t v = idx[i];
    const bool ok = allow_neg ? (v >= -size && v < size) : (v >= 0 && v < size);
    if (!ok) atomicMin(bad, (unsigned long long)i);
  }
}

template <typename U>
__global__ void select_rows_kernel(const U* __restrict__ x, U* __restrict__ out, const int64_t* __restrict__ idx,
                                   int64_t outer, int64_t n, int64_t size, int64_t row) {
  MYTORCH_GRID_LOOP(int64_t, w, outer * n * row) {
    const int64_t r = w / row, j = w - r * row, o = r / n, i = r - o * n;
    out[w] = x[(o * size + wrap_index(idx[i], size)) * row + j];
  }
}

}  // namespace

// ---- helpers shared with index_put.cu (declared in reduce.cuh) ----
namespace ix {

at::Tensor contiguous_index(const at::Tensor& index) { return index.to(at::kLong).contiguous(); }

void copy_to_host(void* dst, const void* src, size_t bytes) {
  auto stream = at::cuda::getCurrentCUDAStream();
  C10_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  C10_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void check_bounds(const char* op, const at::Tensor& idx, int64_t size, int64_t dim, bool allow_neg) {
  const int64_t n = idx.numel();
  if (n == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  at::Tensor bad = aten::empty({1}, idx.options());
  auto* slot = reinterpret_cast<unsigned long long*>(bad.mutable_data_ptr<int64_t>());
  C10_CUDA_CHECK(cudaMemsetAsync(slot, 0xFF, sizeof(int64_t), stream));  // "none" = max
  const int64_t* ip = idx.const_data_ptr<int64_t>();
  bounds_kernel<<<grid_for(n, 256), 256, 0, stream>>>(ip, n, size, allow_neg, slot);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  unsigned long long pos = 0;
  copy_to_host(&pos, slot, sizeof(pos));
  if (pos == ~0ull) return;
  int64_t v = 0;
  copy_to_host(&v, ip + pos, sizeof(v));
  TORCH_CHECK_INDEX(false, op, ": index ", v, " is out of bounds for dim ", dim, " with size ", size,
                    " (expected an index in [", allow_neg ? -size : 0, ", ", size - 1, "])");
}

void select_rows(const char* op, const at::Tensor& x, const at::Tensor& out, const at::Tensor& idx, int64_t outer,
                 int64_t size, int64_t inner) {
  const int64_t n = idx.numel(), row_bytes = inner * x.element_size();
  if (outer * n * row_bytes == 0) return;
  const void* xp = x.const_data_ptr();
  void* op_ = out.mutable_data_ptr();
  by_unit(op, unit_for({row_bytes}, {xp, op_}), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const int64_t row = row_bytes / (int64_t)sizeof(U);
    select_rows_kernel<U><<<grid_for(outer * n * row, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const U*>(xp), static_cast<U*>(op_), idx.const_data_ptr<int64_t>(), outer, n, size, row);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace ix

at::Tensor index_select(const at::Tensor& x_, int64_t dim, const at::Tensor& index_) {
  const char* op = "mytorch::index_select";
  index::check_select_index(op, index_);
  at::Device dev = red::common_cuda_device(op, {x_, index_});
  c10::cuda::CUDAGuard guard(dev);
  const int64_t d = index::select_dim(op, x_, dim, index_);
  at::Tensor x = red::on_device(x_.dim() == 0 ? x_.reshape({1}) : x_, dev).contiguous();
  at::Tensor index = contiguous_index(red::on_device(index_, dev).reshape({-1}));
  const int64_t size = x.size(d), n = index.numel();
  check_bounds(op, index, size, d, false);
  auto shape = x.sizes().vec();
  shape[d] = n;
  at::Tensor out = aten::empty(shape, x.options());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  select_rows(op, x, out, index, outer, size, inner);
  return x_.dim() == 0 ? out.reshape({}) : out;
}

namespace {

// ---- gather / scatter_add: iterate over index's shape ----
// sizes: index's shape; s0/s1: element strides of two operands over it.
struct Geo {
  int nd = 0;
  int64_t size[kMaxDims];
  int64_t s0[kMaxDims];
  int64_t s1[kMaxDims];
};

__device__ __forceinline__ void geo_offsets(const Geo& g, int64_t w, int64_t& o0, int64_t& o1) {
  o0 = o1 = 0;
  for (int k = g.nd - 1; k >= 0; --k) {
    const int64_t c = w % g.size[k];
    w /= g.size[k];
    o0 += c * g.s0[k];
    o1 += c * g.s1[k];
  }
}

// a's strides with dim d stepping 0 (all 0 when a has another rank: one element, as the
// CPU kernel's restride); b's strides as they are (0 when b has another rank).
Geo make_geo(const char* op, const at::Tensor& index, const at::Tensor& a, int64_t d, const at::Tensor* b) {
  TORCH_CHECK(index.dim() <= kMaxDims, op, ": expected index with at most ", kMaxDims, " dims, got ", index.dim());
  Geo g;
  g.nd = (int)index.dim();
  for (int k = 0; k < g.nd; ++k) {
    g.size[k] = index.size(k);
    g.s0[k] = (a.dim() == index.dim() && k != d) ? a.stride(k) : 0;
    g.s1[k] = (b && b->dim() == index.dim()) ? b->stride(k) : 0;
  }
  return g;
}

template <typename U>
__global__ void gather_kernel(const U* __restrict__ x, U* __restrict__ out, const int64_t* __restrict__ idx,
                              int64_t n, Geo g, int64_t dstride, int64_t size) {
  MYTORCH_GRID_LOOP(int64_t, w, n) {
    int64_t ox, unused;
    geo_offsets(g, w, ox, unused);
    out[w] = x[ox + wrap_index(idx[w], size) * dstride];
  }
}

}  // namespace

at::Tensor gather(const at::Tensor& x_, int64_t dim, const at::Tensor& index_) {
  const char* op = "mytorch::gather";
  index::check_index_dtype(op, index_);
  at::Device dev = red::common_cuda_device(op, {x_, index_});
  c10::cuda::CUDAGuard guard(dev);
  at::Tensor x = red::on_device(x_, dev);
  int64_t d = wrap_dim(op, dim, x.dim());
  index::check_gather_shapes(op, x, d, index_, nullptr);
  at::Tensor index = contiguous_index(red::on_device(index_, dev));
  const int64_t size = x.dim() ? x.size(d) : 1;
  check_bounds(op, index, size, d, true);
  at::Tensor out = aten::empty(index.sizes(), x.options());
  const int64_t n = out.numel();
  if (n == 0) return out;
  Geo g = make_geo(op, index, x, d, nullptr);
  const int64_t dstride = x.dim() ? x.stride(d) : 0;
  by_unit(op, x.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    gather_kernel<U><<<grid_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const U*>(x.const_data_ptr()), static_cast<U*>(out.mutable_data_ptr()),
        index.const_data_ptr<int64_t>(), n, g, dstride, size);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

namespace {

template <typename T>
__global__ void scatter_add_kernel(T* self, const T* __restrict__ src, const int64_t* __restrict__ idx, int64_t n,
                                   Geo g, int64_t dstride, int64_t size) {
  MYTORCH_GRID_LOOP(int64_t, w, n) {
    int64_t os, osrc;
    geo_offsets(g, w, os, osrc);
    atomic_add(self + os + wrap_index(idx[w], size) * dstride, src[osrc]);
  }
}

// self: a fresh contiguous tensor (the op's output).
void scatter_add_into(const at::Tensor& self, int64_t dim, const at::Tensor& index_, const at::Tensor& src_) {
  const char* op = "mytorch::scatter_add";
  index::check_index_dtype(op, index_);
  at::Device dev = red::common_cuda_device(op, {self, index_, src_});
  c10::cuda::CUDAGuard guard(dev);
  check_same_dtype(op, self, "self", src_, "src");
  int64_t d = wrap_dim(op, dim, self.dim());
  index::check_gather_shapes(op, self, d, index_, &src_);
  at::Tensor index = contiguous_index(red::on_device(index_, dev));
  const int64_t size = self.dim() ? self.size(d) : 1;
  check_bounds(op, index, size, d, true);
  const int64_t n = index.numel();
  if (n == 0) return;
  at::Tensor src = red::on_device(src_, dev);
  Geo g = make_geo(op, index, self, d, &src);
  const int64_t dstride = self.dim() ? self.stride(d) : 0;
  cpu::dispatch_all(op, "self", self.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_add_kernel<T><<<grid_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        self.mutable_data_ptr<T>(), src.const_data_ptr<T>(), index.const_data_ptr<int64_t>(), n, g, dstride, size);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// ---- cat: one launch copies up to kCatBatch inputs into their slices of out ----
constexpr int kCatBatch = 32;
struct CatBatch {
  const void* src[kCatBatch];
  int64_t row[kCatBatch];  // units per outer row of the input
  int64_t off[kCatBatch];  // units from the start of an output row
};

template <typename U>
__global__ void cat_kernel(CatBatch b, U* __restrict__ out, int64_t outer, int64_t out_row) {
  const int t = blockIdx.y;
  const U* __restrict__ s = static_cast<const U*>(b.src[t]);
  const int64_t row = b.row[t];
  U* dst = out + b.off[t];
  MYTORCH_GRID_LOOP(int64_t, w, outer * row) {
    const int64_t o = w / row;
    dst[o * out_row + (w - o * row)] = s[w];
  }
}

}  // namespace

at::Tensor cat(at::TensorList tensors, int64_t dim) {
  const char* op = "mytorch::cat";
  const index::CatPlan p = index::cat_plan(op, tensors, dim);
  if (p.ts.empty()) return aten::empty({0}, tensors[0].options().dtype(p.dt));
  const at::Tensor& ref = p.ts[0];
  TORCH_CHECK(ref.is_cuda(), op, ": expected tensors on a CUDA device, got ", ref.device());
  c10::cuda::CUDAGuard guard(ref.device());
  const std::vector<int64_t>& shape = p.shape;
  const int64_t d = p.d, total = p.total;
  const at::ScalarType dt = p.dt;
  at::Tensor out = aten::empty(shape, ref.options().dtype(dt));
  if (out.numel() == 0) return out;
  int64_t outer = 1, inner = out.element_size();  // inner: bytes per unit of dim d
  for (int64_t k = 0; k < d; ++k) outer *= shape[k];
  for (int64_t k = d + 1; k < (int64_t)shape.size(); ++k) inner *= shape[k];
  std::vector<at::Tensor> srcs;
  std::vector<int64_t> rows, offs;  // bytes
  std::vector<const void*> ptrs{out.const_data_ptr()};
  int64_t off = 0, unit = 16;
  for (const at::Tensor& t : p.ts) {
    const int64_t n = t.size(d);
    if (n > 0) {
      srcs.push_back(t.to(dt).contiguous());
      rows.push_back(n * inner);
      offs.push_back(off * inner);
      ptrs.push_back(srcs.back().const_data_ptr());
      unit = std::min(unit, unit_for({n * inner, off * inner}, ptrs));
    }
    off += n;
  }
  unit = std::min(unit, unit_for({total * inner}, ptrs));
  auto stream = at::cuda::getCurrentCUDAStream();
  by_unit(op, unit, [&](auto tag) {
    using U = typename decltype(tag)::type;
    for (size_t b0 = 0; b0 < srcs.size(); b0 += kCatBatch) {
      CatBatch b;
      const int cnt = (int)std::min<size_t>(kCatBatch, srcs.size() - b0);
      int64_t most = 0;
      for (int k = 0; k < cnt; ++k) {
        b.src[k] = srcs[b0 + k].const_data_ptr();
        b.row[k] = rows[b0 + k] / unit;
        b.off[k] = offs[b0 + k] / unit;
        most = std::max(most, outer * b.row[k]);
      }
      dim3 grid(grid_for(most, 256), cnt);
      cat_kernel<U><<<grid, 256, 0, stream>>>(b, static_cast<U*>(out.mutable_data_ptr()), outer,
                                              total * inner / unit);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return out;
}

// ---- schema signature: scatter_add works on a contiguous copy of x ----
at::Tensor scatter_add(const at::Tensor& x, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  TORCH_CHECK(x.is_cuda(), "mytorch::scatter_add: expected x on a CUDA device, got ", x.device());
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = aten::empty(x.sizes(), x.options());
  out.copy_(x);
  scatter_add_into(out, dim, index, src);
  return out;
}

}  // namespace cuda
}  // namespace mytorch
