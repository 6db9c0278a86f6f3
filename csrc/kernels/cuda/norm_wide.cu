// RMSNorm and LayerNorm for rows wider than one block holds (more than kRowMaxVecs 16-byte
// vectors: 16384 bf16 / 8192 fp32 columns), sm_90+: one row per thread-block cluster of 2-8
// blocks, block r owning a fixed slice of the columns; the blocks swap their partial sums
// through distributed shared memory, so every element is read once.
// Both walk rows with persistent clusters; a block's next row's slice is copied into shared
// memory in the background while it works on this one, and one cluster barrier a row.
// Forward: LayerNorm merges per-warp (count, mean, M2) states. Backward: each block keeps its
// columns' weight/bias gradient in registers across the rows and writes one fp32 partial row
// slice at the end (column_sum finishes).
#include <ATen/cuda/CUDAContext.h>
#include <cooperative_groups.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm.cuh"

namespace mytorch {
namespace cuda {
namespace {

constexpr int kWideMaxThreads = 512;

// Vectors per block the slices are sized for (at most kRowMaxVecs when 8 blocks need more).
// H200, backward alone at 24k-64k bf16 columns: 1024 (two blocks a multiprocessor) 72-87% of
// copy, 2048 58-85%.
constexpr int kWideBlockVecs = 1024;

// {blocks, vectors per block} of a row of nv vectors: the fewest blocks (2-8) whose slices are
// at most kWideBlockVecs vectors, else kRowMaxVecs; {0, 0} when 8 do not hold it.
std::pair<int, int> wide_shape(int64_t nv) {
  for (int cap : {kWideBlockVecs, kRowMaxVecs})
    for (int r = 2; r <= kMaxClusterBlocks; ++r)
      if ((nv + r - 1) / r <= cap) return {r, (int)((nv + r - 1) / r)};
  return {0, 0};
}

// One exchange across the cluster: each warp's state st (warp-reduced: lane 0's is posted) goes
// to slot[warp]; after a cluster barrier every warp merges all ranks' posted states in the same
// order, so st becomes the same bits in every block. `slot`: this row's [kWideMaxThreads / 32]
// states (alternating by row parity: a block posts row i + 2's only after the barrier of row
// i + 1, which every block reaches after reading row i's). Identity: zeros.
template <int NS, typename Merge>
__device__ __forceinline__ void cluster_allreduce(float (&st)[NS], float (*slot)[NS], Merge merge) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int slots = (int)cluster.num_blocks() * nwarps;
  if (lane == 0)
#pragma unroll
    for (int q = 0; q < NS; ++q) slot[warp][q] = st[q];
  cluster.sync();
  float all[NS] = {};
  for (int e = lane; e < slots; e += 32) {
    const float* theirs = cluster.map_shared_rank(&slot[e % nwarps][0], e / nwarps);
    float t[NS];
#pragma unroll
    for (int q = 0; q < NS; ++q) t[q] = theirs[q];
    merge(all, t);
  }
  warp_allreduce<NS>(all, merge);
#pragma unroll
  for (int q = 0; q < NS; ++q) st[q] = __shfl_sync(0xffffffffu, all[q], 0);  // lane 0's bits
#endif
}

// Cluster of `ranks` blocks per row, each cluster walking rows (step: the clusters); block rank
// owns vectors [rank * part, rank * part + part) of each row, thread t its items t + i *
// blockDim.x. Shared memory: [2 buffers][part] of x, then the slice's w and b (each thread reads
// back only what it wrote). Each warp's partial state goes through cluster_allreduce (RMSNorm:
// sum of squares; LayerNorm: count, mean and M2 about the warp's own mean, so no second pass
// over the cluster).
template <typename T, bool RMS>
__global__ void __maxnreg__(80) norm_fwd_cluster_kernel(
    const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
    float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t rows, int cols, float eps, int part) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using W = Words<T>;
  constexpr int N = W::N, ITEMS = kRowItems, NS = RMS ? 1 : 3;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), ranks = (int)cluster.num_blocks();
  extern __shared__ uint4 stage[];
  __shared__ float posted[2][kWideMaxThreads / 32][NS];
  const int nv = cols / N;
  const int v0 = min(nv, rank * part), n = min(nv, v0 + part) - v0;
  const int c0 = v0 * N;
  const RowItems<T> items(n);
  uint4* w_s = stage + 2 * part;
  uint4* b_s = stage + 3 * part;
  auto put = [](uint4* dst, const W& v) { *dst = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]); };
  auto get = [](const uint4* src) {
    const uint4 a = *src;
    W v;
    v.w[0] = a.x, v.w[1] = a.y, v.w[2] = a.z, v.w[3] = a.w;
    return v;
  };
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (!items.mine[i]) continue;
    const int j = items.col[i] / N;
    W v;
    if (w) v.load(w + c0 + items.col[i]);
    else v.fill(1.f);
    put(w_s + j, v);
    if (!RMS) {
      if (b) v.load(b + c0 + items.col[i]);
      else v.fill(0.f);
      put(b_s + j, v);
    }
  }
  const int64_t first = blockIdx.x / ranks, step = gridDim.x / ranks;
  auto prefetch = [&](int64_t r, int buffer) {
    const T* xr = x + r * cols + c0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (items.mine[i]) copy16_async(stage + buffer * part + items.col[i] / N, xr + items.col[i]);
    copy_async_commit();
  };
  if (first < rows) prefetch(first, 0);
  int buffer = 0;
  for (int64_t row = first; row < rows; row += step, buffer ^= 1) {
    copy_async_wait();
    W xv[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (items.mine[i]) xv[i] = get(stage + buffer * part + items.col[i] / N);
    if (row + step < rows) prefetch(row + step, buffer ^ 1);
    float st[NS];
    if constexpr (RMS) {
      float ss = 0.f;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (items.mine[i])
#pragma unroll
          for (int k = 0; k < N; ++k) ss = fmaf(xv[i].get(k), xv[i].get(k), ss);
      st[0] = warp_sum(ss);
    } else {
      float s = 0.f, cnt = 0.f;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (items.mine[i]) {
          cnt += (float)N;
#pragma unroll
          for (int k = 0; k < N; ++k) s += xv[i].get(k);
        }
      cnt = warp_sum(cnt);
      const float m = cnt > 0.f ? warp_sum(s) / cnt : 0.f;
      float m2 = 0.f;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (items.mine[i])
#pragma unroll
          for (int k = 0; k < N; ++k) {
            const float d = xv[i].get(k) - m;
            m2 = fmaf(d, d, m2);
          }
      st[0] = cnt, st[1] = m, st[2] = warp_sum(m2);
    }
    cluster_allreduce<NS>(st, posted[buffer], std::conditional_t<RMS, SumMerge, MeanM2Merge>{});
    const float mean = RMS ? 0.f : st[1];
    const float rstd = rsqrtf((RMS ? st[0] : fmaxf(st[2], 0.f)) / (float)cols + eps);
    if (rank == 0 && threadIdx.x == 0) {
      rstd_out[row] = rstd;
      if (!RMS) mean_out[row] = mean;
    }
    T* yr = y + row * cols + c0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (items.mine[i]) {
        const int j = items.col[i] / N;
        const W wv = get(w_s + j);
        if constexpr (RMS) {
          xv[i].map([&](float xk, int k) { return xk * rstd * wv.get(k); }).store(yr + items.col[i]);
        } else {
          const W bv = get(b_s + j);
          xv[i].map([&](float xk, int k) { return fmaf((xk - mean) * rstd, wv.get(k), bv.get(k)); })
              .store(yr + items.col[i]);
        }
      }
  }
  cluster.sync();  // no block leaves while another may still read its posted states
#endif
}

// Cluster of `ranks` blocks per row (the launch's cluster size); block rank owns vectors
// [rank * part, rank * part + part) of each row, thread t its items t + i * blockDim.x.
// Shared memory: [2 buffers][g, x][part] 16-byte vectors, then the slice's weight as floats.
// The row's two sums go through cluster_allreduce.
template <typename T, bool RMS>
__global__ void __launch_bounds__(kWideMaxThreads, 1) norm_bwd_cluster_kernel(
    const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ w, const float* __restrict__ mean_in,
    const float* __restrict__ rstd_in, T* __restrict__ dx, float* __restrict__ partial_w,
    float* __restrict__ partial_b, int64_t rows, int cols, int part) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using W = Words<T>;
  constexpr int N = W::N, ITEMS = kRowItems, NS = RMS ? 1 : 2;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), ranks = (int)cluster.num_blocks();
  extern __shared__ uint4 stage[];
  __shared__ float posted[2][kWideMaxThreads / 32][NS];
  const int nv = cols / N;
  const int v0 = min(nv, rank * part), n = min(nv, v0 + part) - v0;
  const int c0 = v0 * N;  // the slice's first column
  const float inv_cols = 1.f / (float)cols;
  const RowItems<T> items(n);
  const auto& mine = items.mine;
  // the slice's weight as floats (1 without one); each thread reads back only what it wrote
  float* w_s = reinterpret_cast<float*>(stage + 4 * part);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    if (mine[i]) {
      W wv;
      if (w) wv.load(w + c0 + items.col[i]);
      else wv.fill(1.f);
#pragma unroll
      for (int k = 0; k < N; ++k) w_s[items.col[i] + k] = wv.get(k);
    }
  float acc_w[ITEMS][N], acc_b[RMS ? 1 : ITEMS][N];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int k = 0; k < N; ++k) {
      acc_w[i][k] = 0.f;
      if (!RMS) acc_b[RMS ? 0 : i][k] = 0.f;
    }
  const int64_t first = blockIdx.x / ranks, step = gridDim.x / ranks;
  float mean_next = 0.f, rstd_next = 0.f;
  // row r's slice of g and x into a staging buffer (one commit group), its statistics
  auto prefetch = [&](int64_t r, int buffer) {
    uint4* sg = stage + buffer * 2 * part;
    const T* gr = g + r * cols + c0;
    const T* xr = x + r * cols + c0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (mine[i]) {
        const int j = items.col[i] / N;
        copy16_async(sg + j, gr + items.col[i]);
        copy16_async(sg + part + j, xr + items.col[i]);
      }
    copy_async_commit();
    if (!RMS) mean_next = mean_in[r];
    rstd_next = rstd_in[r];
  };
  if (first < rows) prefetch(first, 0);
  int buffer = 0, parity = 0;
  for (int64_t r = first; r < rows; r += step, buffer ^= 1, parity ^= 1) {
    const float mean = mean_next, rstd = rstd_next, nmr = -mean * rstd;
    copy_async_wait();
    const uint4* sb = stage + buffer * 2 * part;
    if (r + step < rows) prefetch(r + step, buffer ^ 1);
    // xhat: 16-bit rows as one FMA, float32 rows subtract first (as the row-group kernel)
    auto xhat = [&](float xk) { return sizeof(T) == 4 ? (xk - mean) * rstd : fmaf(xk, rstd, nmr); };
    // f(i, g, x, w) for each of the thread's items
    auto each = [&](auto f) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        if (!mine[i]) continue;
        const int j = items.col[i] / N;
        const uint4 a = sb[j], b = sb[part + j];
        W gq, xq;
        gq.w[0] = a.x, gq.w[1] = a.y, gq.w[2] = a.z, gq.w[3] = a.w;
        xq.w[0] = b.x, xq.w[1] = b.y, xq.w[2] = b.z, xq.w[3] = b.w;
        float wf[N];
#pragma unroll
        for (int k = 0; k < N; k += 4) {
          const float4 v = *reinterpret_cast<const float4*>(w_s + items.col[i] + k);
          wf[k] = v.x, wf[k + 1] = v.y, wf[k + 2] = v.z, wf[k + 3] = v.w;
        }
        f(i, gq, xq, wf);
      }
    };
    // Pass 1: sum(g w xhat) and, for LayerNorm, sum(g w), over the cluster
    float sums[NS] = {};
    each([&](int, const W& gq, const W& xq, const float (&wf)[N]) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float gw = gq.get(k) * wf[k];
        sums[0] = fmaf(gw, xhat(xq.get(k)), sums[0]);
        if (!RMS) sums[NS - 1] += gw;
      }
    });
    warp_allreduce<NS>(sums, SumMerge{});
    cluster_allreduce<NS>(sums, posted[parity], SumMerge{});
    // dx = g w rstd - xhat (c_gx rstd) - c_g rstd
    const float a_gx = -sums[0] * inv_cols * rstd;
    const float a_g = RMS ? 0.f : -sums[NS - 1] * inv_cols * rstd;
    // Pass 2: dx, and the weight/bias sums
    T* dxr = dx + r * cols + c0;
    each([&](int i, const W& gq, const W& xq, const float (&wf)[N]) {
      gq.map([&](float gk, int k) {
            const float xh = xhat(xq.get(k));
            acc_w[i][k] = fmaf(gk, xh, acc_w[i][k]);
            if (!RMS) acc_b[RMS ? 0 : i][k] += gk;
            return fmaf(gk * wf[k], rstd, fmaf(xh, a_gx, a_g));
          })
          .store(dxr + items.col[i]);
    });
  }
  cluster.sync();  // no block leaves while another may still read its posted sums
  if (first >= rows) return;
  float* pw = partial_w + first * cols + c0;
  float* pb = RMS ? nullptr : partial_b + first * cols + c0;
  auto put = [&](float* dst, const float (&a)[N]) {
#pragma unroll
    for (int k = 0; k < N; k += 4) *reinterpret_cast<float4*>(dst + k) = make_float4(a[k], a[k + 1], a[k + 2], a[k + 3]);
  };
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    if (mine[i]) {
      put(pw + items.col[i], acc_w[i]);
      if (!RMS) put(pb + items.col[i], acc_b[RMS ? 0 : i]);
    }
#endif
}

// sm_90+, the row whole 16-byte vectors, every pointer aligned: {blocks, vectors per block}, or
// {0, 0} where the cluster kernels do not apply.
template <typename T>
std::pair<int, int> wide_rows(int64_t cols, std::initializer_list<const void*> ptrs) {
  if (at::cuda::getCurrentDeviceProperties()->major < 9 || pick_vec<T>(cols, ptrs) == 1) return {0, 0};
  return wide_shape(cols / Words<T>::N);
}

}  // namespace

bool launch_norm_fwd_cluster(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, at::Tensor& y,
                             at::Tensor* mean, at::Tensor& rstd, int64_t rows, int64_t cols, double eps) {
  if (rows == 0) return false;
  bool launched = false;
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_norm_fwd_cluster_cuda", [&] {
    using T = scalar_t;
    const T* xp = x.const_data_ptr<T>();
    const T* wp = w.defined() ? w.const_data_ptr<T>() : nullptr;
    const T* bp = b.defined() ? b.const_data_ptr<T>() : nullptr;
    T* yp = y.mutable_data_ptr<T>();
    const auto [ranks, part] = wide_rows<T>(cols, {xp, wp, bp, yp});
    if (ranks == 0) return;
    // Slices of up to kWideBlockVecs vectors (64k bf16 columns); RMSNorm only past the
    // persistent kernel's 4 x 1024 vectors in registers. Forward alone, bf16, % of copy: H100,
    // LayerNorm 75-76 at 24k-32k columns and 65 at 64k against the persistent kernel's 60-65;
    // RMSNorm 88 at 64k against 74, 89-93 at 24k-32k against 87-94. H200: 2048-vector slices
    // at 128k columns 24 against 33.
    if (part > kWideBlockVecs || (mean == nullptr && cols / Words<T>::N <= 4 * 1024)) return;
    auto k = mean == nullptr ? norm_fwd_cluster_kernel<T, true> : norm_fwd_cluster_kernel<T, false>;
    ClusterLaunch launch(k, ranks, row_threads(part), (size_t)(mean ? 4 : 3) * part * 16);
    if (launch.fit == 0) return;
    launch.cfg.gridDim = dim3((unsigned)(std::min<int64_t>(rows, launch.fit) * ranks));
    C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, k, xp, wp, bp, yp,
                                      mean ? mean->mutable_data_ptr<float>() : nullptr,
                                      rstd.mutable_data_ptr<float>(), rows, (int)cols, (float)eps, part));
    launched = true;
  });
  return launched;
}

bool launch_norm_bwd_cluster(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor* mean,
                             const at::Tensor& rstd, at::Tensor& dx, at::Tensor& dw, at::Tensor* db, int64_t rows,
                             int64_t cols) {
  if (rows == 0) return false;
  bool launched = false;
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_norm_bwd_cluster_cuda", [&] {
    using T = scalar_t;
    constexpr int N = Words<T>::N;
    const T* gp = g.const_data_ptr<T>();
    const T* xp = x.const_data_ptr<T>();
    const T* wp = w.defined() ? w.const_data_ptr<T>() : nullptr;
    T* dxp = dx.mutable_data_ptr<T>();
    const auto [ranks, part] = wide_rows<T>(cols, {gp, xp, wp, dxp});
    if (ranks == 0) return;
    // two staging buffers of g and x, then the weight as floats
    const size_t smem = (size_t)part * (4 * 16 + N * 4);
    if (smem > max_block_smem()) return;
    auto k = mean == nullptr ? norm_bwd_cluster_kernel<T, true> : norm_bwd_cluster_kernel<T, false>;
    ClusterLaunch launch(k, ranks, row_threads(part), smem);
    if (launch.fit == 0) return;
    const int64_t clusters = std::min<int64_t>(rows, launch.fit);
    launch.cfg.gridDim = dim3((unsigned)(clusters * ranks));
    auto fopts = x.options().dtype(at::kFloat);
    at::Tensor pw = aten::empty({clusters, cols}, fopts);
    at::Tensor pb = db ? aten::empty({clusters, cols}, fopts) : at::Tensor();
    C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, k, gp, xp, wp, mean ? mean->const_data_ptr<float>() : nullptr,
                                      rstd.const_data_ptr<float>(), dxp, pw.mutable_data_ptr<float>(),
                                      db ? pb.mutable_data_ptr<float>() : nullptr, rows, (int)cols, part));
    column_sum(pw, dw, db ? &pb : nullptr, db);
    launched = true;
  });
  return launched;
}

}  // namespace cuda
}  // namespace mytorch
