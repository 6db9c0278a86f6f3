// Embedding lookup and its dense backward (OpenMP).
//
// Forward copies rows. Backward groups the positions of each weight row (a
// counting sort that keeps index order), then sums each row's gradients in that
// order, rows split across threads: deterministic, no atomics. Indices are
// checked before any read; an index outside [0, num_weights) raises IndexError.
#include "kernels/embedding.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cstring>
#include <vector>


namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

std::vector<int64_t> checked_indices(const char* op, const at::Tensor& indices, int64_t rows) {
  embedding::check_indices_dtype(op, indices);
  at::Tensor ic = indices.contiguous();
  const int64_t n = ic.numel();
  std::vector<int64_t> idx(n);
  if (ic.scalar_type() == at::kLong) {
    const int64_t* p = ic.const_data_ptr<int64_t>();
    std::copy(p, p + n, idx.begin());
  } else {
    const int32_t* p = ic.const_data_ptr<int32_t>();
    std::copy(p, p + n, idx.begin());
  }
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK_INDEX(idx[i] >= 0 && idx[i] < rows, op, ": index ", idx[i],
                      " is out of range for an embedding of ", rows, " rows (expected a value in [0, ",
                      rows - 1, "])");
  return idx;
}

template <typename T>
void embedding_kernel(const T* w, int64_t sw0, int64_t sw1, const int64_t* idx, T* out, int64_t n,
                      int64_t D) {
  if (D == 0) return;  // zero-width rows: no data pointers to copy between
#pragma omp parallel for schedule(static) if (n * D > kGrain)
  for (int64_t i = 0; i < n; ++i) {
    const T* src = w + idx[i] * sw0;
    T* dst = out + i * D;
    if (sw1 == 1) {
      std::memcpy(dst, src, sizeof(T) * D);
    } else {
      for (int64_t j = 0; j < D; ++j) dst[j] = src[j * sw1];
    }
  }
}

template <typename T>
void embedding_backward_kernel(const T* g, const int64_t* idx, T* gw, int64_t n, int64_t V,
                               int64_t D, int64_t padding_idx, bool scale_by_freq) {
  using A = at::opmath_type<T>;
  // CSR of positions per row, in index order
  std::vector<int64_t> start(V + 1, 0), pos(n);
  for (int64_t i = 0; i < n; ++i) ++start[idx[i] + 1];
  for (int64_t r = 0; r < V; ++r) start[r + 1] += start[r];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) pos[fill[idx[i]]++] = i;
  }
#pragma omp parallel if (V * D > kGrain || n * D > kGrain)
  {
    std::vector<A> acc(D);
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < V; ++r) {
      T* dst = gw + r * D;
      const int64_t b = start[r], e = start[r + 1];
      if (r == padding_idx || b == e) {
        std::fill(dst, dst + D, T(0));
        continue;
      }
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t k = b; k < e; ++k) {
        const T* src = g + pos[k] * D;
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) acc[j] += static_cast<A>(src[j]);
      }
      const A s = scale_by_freq ? A(1) / A(e - b) : A(1);
      for (int64_t j = 0; j < D; ++j) dst[j] = static_cast<T>(acc[j] * s);
    }
  }
}

}  // namespace

at::Tensor embedding_lookup(const at::Tensor& weight, const at::Tensor& indices) {
  const char* op = "mytorch::embedding";
  check_floating(op, "weight", weight);
  check_dim(op, "weight", weight, 2);
  check_same_device(op, weight, "weight", indices, "indices");
  std::vector<int64_t> idx = checked_indices(op, indices, weight.size(0));
  const int64_t D = weight.size(1);
  at::Tensor out = at::empty(embedding::out_shape(indices, D),
                             weight.options().memory_format(at::MemoryFormat::Contiguous));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, weight.scalar_type(), "mytorch_embedding", [&] {
    embedding_kernel<scalar_t>(weight.const_data_ptr<scalar_t>(), weight.stride(0),
                               weight.stride(1), idx.data(), out.mutable_data_ptr<scalar_t>(),
                               static_cast<int64_t>(idx.size()), D);
  });
  return out;
}

at::Tensor embedding_backward(const at::Tensor& grad, const at::Tensor& indices,
                              int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq) {
  const char* op = "mytorch::embedding_backward";
  embedding::check_backward(op, grad, indices, num_weights);
  std::vector<int64_t> idx = checked_indices(op, indices, num_weights);
  const int64_t D = grad.size(-1);
  // nothing to accumulate (as ATen): no per-row bookkeeping, however many rows
  const bool nothing = (D == 0 || idx.empty()) && !scale_grad_by_freq;
  at::Tensor g = grad.contiguous();
  at::Tensor gw;
  try {
    auto opts = grad.options().memory_format(at::MemoryFormat::Contiguous);
    gw = nothing ? at::zeros({num_weights, D}, opts) : at::empty({num_weights, D}, opts);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, op, ": cannot allocate the gradient of shape [", num_weights, ", ", D,
                "] for num_weights=", num_weights, ": ", e.what());
  }
  if (nothing) return gw;
  try {  // per-row bookkeeping: num_weights + 1 counts
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "mytorch_embedding_bwd", [&] {
      embedding_backward_kernel<scalar_t>(g.const_data_ptr<scalar_t>(), idx.data(),
                                          gw.mutable_data_ptr<scalar_t>(),
                                          static_cast<int64_t>(idx.size()), num_weights, D,
                                          padding_idx, scale_grad_by_freq);
    });
  } catch (const std::bad_alloc&) {
    TORCH_CHECK(false, op, ": cannot allocate the row counts for num_weights=", num_weights);
  }
  return gw;
}

// The lookup after the padding_idx check of torch.nn.functional.embedding.
at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx) {
  embedding::check_padding_idx("mytorch::embedding", weight, padding_idx);
  return embedding_lookup(weight, indices);
}

}  // namespace cpu
}  // namespace mytorch
