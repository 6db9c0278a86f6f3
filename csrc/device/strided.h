// Row-by-row iteration over strided tensors: the loop skeleton shared by the device's
// copy, fill and random kernels. Dims of size 1 are dropped and dims that are
// contiguous in every operand are merged, so a contiguous tensor is a single row.
#pragma once
#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <vector>

namespace mytorch {
namespace device {

constexpr int64_t kParallelGrain = 1 << 16;  // elements; below this, one thread

template <int K>
struct RowLoop {
  std::vector<int64_t> sizes;                   // innermost last
  std::vector<std::array<int64_t, K>> strides;  // bytes
  int64_t numel = 1;

  // `tensors` share `t0`'s shape (expand before calling).
  explicit RowLoop(const std::array<const at::Tensor*, K>& tensors) {
    const at::Tensor& t0 = *tensors[0];
    for (int64_t d = 0; d < t0.dim(); ++d) {
      int64_t n = t0.size(d);
      numel *= n;
      if (n == 1) continue;
      std::array<int64_t, K> st;
      for (int k = 0; k < K; ++k)
        st[k] = tensors[k]->stride(d) * static_cast<int64_t>(tensors[k]->element_size());
      if (!sizes.empty()) {
        bool merge = true;
        for (int k = 0; k < K; ++k) merge = merge && strides.back()[k] == n * st[k];
        if (merge) {
          sizes.back() *= n;
          strides.back() = st;
          continue;
        }
      }
      sizes.push_back(n);
      strides.push_back(st);
    }
  }

  // f(std::array<char*, K> row_start, std::array<int64_t, K> inner_stride_bytes, int64_t n)
  template <typename F>
  void run(const std::array<char*, K>& base, F f) const {
    if (numel == 0) return;
    if (sizes.empty()) {
      std::array<int64_t, K> zero{};
      f(base, zero, 1);
      return;
    }
    const int64_t nd = static_cast<int64_t>(sizes.size());
    const int64_t inner = sizes.back();
    const std::array<int64_t, K> inner_st = strides.back();
    const int64_t rows = numel / inner;
    // few long rows: cut each row into chunks so that they still spread over threads
    int64_t chunks = 1;
    if (numel > kParallelGrain && rows < 16) chunks = std::max<int64_t>(1, std::min<int64_t>(16, inner / (kParallelGrain / 4)));
    const int64_t tasks = rows * chunks;
#pragma omp parallel for schedule(static) if (numel > kParallelGrain && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t r = t / chunks, c = t % chunks;
      const int64_t begin = c * inner / chunks, end = (c + 1) * inner / chunks;
      std::array<char*, K> p = base;
      int64_t rem = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t i = rem % sizes[d];
        rem /= sizes[d];
        for (int k = 0; k < K; ++k) p[k] += i * strides[d][k];
      }
      for (int k = 0; k < K; ++k) p[k] += begin * inner_st[k];
      f(p, inner_st, end - begin);
    }
  }
};

}  // namespace device
}  // namespace mytorch
