// Device pieces of the one-pass cross-entropy kernels (loss_one_pass.cu,
// loss_stream.cu): per-thread log-sum-exp runs, their merge, and a row's gradient.
#pragma once
#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {
namespace ce {

// 16-byte loads and stores with an L2 eviction policy: the fused forward+backward reads a row
// (kept: evict_last), then re-reads it (evict_first) and writes its gradient (evict_first).
__device__ __forceinline__ uint64_t l2_evict_last() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
template <typename T>
__device__ __forceinline__ void load_hint(Words<T>& d, const T* p, uint64_t pol) {
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(d.w[0]), "=r"(d.w[1]), "=r"(d.w[2]), "=r"(d.w[3])
               : "l"(p), "l"(pol));
}
template <typename T>
__device__ __forceinline__ void store_hint(T* p, const Words<T>& v, uint64_t pol) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3]), "l"(pol)
               : "memory");
}

constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__device__ __forceinline__ uint32_t max_pair(uint32_t a, uint32_t b) {
  uint32_t r;
  if constexpr (std::is_same<T, c10::BFloat16>::value) asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// The largest element of U vectors: 16-bit words compared in pairs across the vectors first.
template <typename T, int U>
__device__ __forceinline__ float batch_max(const Words<T> (&v)[U]) {
  if constexpr (sizeof(T) == 4) {
    float m = -INFINITY;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < 4; ++k) m = fmaxf(m, v[u].get(k));
    return m;
  } else {
    Words<T> w = v[0];
#pragma unroll
    for (int u = 1; u < U; ++u)
#pragma unroll
      for (int j = 0; j < 4; ++j) w.w[j] = max_pair<T>(w.w[j], v[u].w[j]);
    w.w[0] = max_pair<T>(max_pair<T>(w.w[0], w.w[1]), max_pair<T>(w.w[2], w.w[3]));
    return fmaxf(w.get(0), w.get(1));
  }
}
template <typename T, int U>
__device__ __forceinline__ float batch_max(const One<T> (&v)[U]) {
  float m = -INFINITY;
#pragma unroll
  for (int u = 0; u < U; ++u) m = fmaxf(m, v[u].get(0));
  return m;
}

// Loads vectors i0, i0 + step, ... (U of them) of a row of n; those past the end hold -inf.
template <typename T, typename P, int U>
__device__ __forceinline__ void load_batch(P (&v)[U], const T* row, int64_t i0, int step, int64_t n, uint64_t pol) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = i0 + (int64_t)u * step;
    if (i < n) {
      if constexpr (P::N > 1) load_hint(v[u], row + i * P::N, pol);
      else v[u].load(row + i);
    } else {
      if constexpr (P::N > 1) v[u].fill(-INFINITY);
      else v[u].x = (T)-INFINITY;
    }
  }
}

// How many of vectors i0, i0 + step, ... (U of them) lie in a row of n.
template <int U>
__device__ __forceinline__ int batch_size(int64_t i0, int step, int64_t n) {
  int count = 0;
#pragma unroll
  for (int u = 0; u < U; ++u) count += i0 + (int64_t)u * step < n;
  return count;
}

// A thread's running (max m, sum of exp(x - m), sum of x) over its logits, a batch of vectors
// at a time: the batch's max first, then one rescale per batch and one exp per element.
struct LseRun {
  float st[3] = {-INFINITY, 0.f, 0.f};
  // The first `valid` of the U vectors are logits (the rest -inf fill).
  template <typename T, typename P, int U>
  __device__ __forceinline__ void fold(const P (&v)[U], int valid, bool smooth) {
    const float m = fmaxf(st[0], batch_max<T>(v));
    const float m0 = m == -INFINITY ? 0.f : m, m2 = m0 * kLog2e;  // all -inf so far: exp(-inf) = 0
    float acc = 0.f, sx = 0.f;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (u >= valid) break;
#pragma unroll
      for (int k = 0; k < P::N; ++k) {
        const float f = v[u].get(k);
        // 16-bit logits: one FMA; fp32 subtracts first (m2's rounding would scale each thread's
        // sum differently, up to ~|m| 1e-7)
        acc += fast_exp2(sizeof(T) == 4 ? (f - m0) * kLog2e : fmaf(f, kLog2e, -m2));
        if (smooth) sx += f;
      }
    }
    st[1] = (st[0] == -INFINITY ? 0.f : st[1] * fast_exp2((st[0] - m) * kLog2e)) + acc;
    st[0] = m;
    st[2] += sx;
  }
};

// (max, sum of exp(x - max), sum of x) of two disjoint parts of a row merged. Commutative, so
// every lane of a butterfly (and every block of a cluster) gets the same bits.
struct LseMerge {
  __device__ __forceinline__ void operator()(float (&a)[3], const float (&b)[3]) const {
    const float m = fmaxf(a[0], b[0]);
    a[1] = (a[0] == -INFINITY ? 0.f : a[1] * __expf(a[0] - m)) + (b[0] == -INFINITY ? 0.f : b[1] * __expf(b[0] - m));
    a[0] = m;
    a[2] += b[2];
  }
};

// A row's target as one block of the cluster sharing the row sees it; the block holds the
// row's elements [first, first + count). The owner (the block holding the target; rank 0 for
// ignored rows and out-of-range targets, on which check_targets has asserted: no read)
// writes the row's loss.
struct ClusterTarget {
  bool ignored, bad, owner;
  int64_t col;  // the target's element within the block's part
  __device__ __forceinline__ ClusterTarget(int64_t t, int64_t ignore_index, int64_t C, int64_t first,
                                           int64_t count, int rank)
      : ignored(t == ignore_index), bad(!ignored && (t < 0 || t >= C)), owner(false), col(t - first) {
    owner = (ignored || bad) ? rank == 0 : (col >= 0 && col < count);
  }
  __device__ __forceinline__ bool reads_logit() const { return owner && !ignored && !bad; }  // (the owner's xt is the target's logit)
};

// The row's (max, sum of exp, sum of x) merged across the cluster: thread 0 posts the block's
// in posted[parity] (parity alternating by row, so a slower block still reading the last row's
// posts is never overwritten), the cluster syncs, every block merges all posts; the owner's
// thread 0 writes the lse and the loss (xt: the target's logit, read by that thread). Returns
// the lse.
template <typename Cluster>
__device__ __forceinline__ float cluster_lse_and_loss(const Cluster& cluster, float (&posted)[2][3], int parity,
                                                      const float (&st)[3], const ClusterTarget& tg, float xt,
                                                      float hit, float smoothing, int64_t C, float* lse_out,
                                                      float* loss_out) {
  if (threadIdx.x == 0) posted[parity][0] = st[0], posted[parity][1] = st[1], posted[parity][2] = st[2];
  cluster.sync();
  const int lane = threadIdx.x & 31;
  float all[3] = {-INFINITY, 0.f, 0.f};
  if (lane < (int)cluster.num_blocks()) {
    const float* theirs = cluster.map_shared_rank(&posted[parity][0], lane);
    all[0] = theirs[0], all[1] = theirs[1], all[2] = theirs[2];
  }
  warp_allreduce<3>(all, LseMerge{});
  const float lse = all[0] + __logf(all[1]);
  if (threadIdx.x == 0 && tg.owner) {
    *lse_out = lse;
    *loss_out = tg.bad ? NAN : tg.ignored ? 0.f : lse - hit * xt - smoothing * all[2] / (float)C;
  }
  return lse;
}

// A row's gradient, (softmax - (1 - eps) onehot - eps / C) * scale, one vector at a time:
// exp(x - lse) by one FMA and one EX2 (fp32: subtract first), then one FMA; the target's vector
// (jt, slot kt) subtracts (1 - eps) * scale from its slot.
template <typename T>
struct RowGrad {
  float lse, lse2, scale, off_scaled, hit_scaled;
  int64_t jt;
  int kt;
  __device__ __forceinline__ RowGrad(float lse_, int64_t t, int per_vec, float scale_, float off, float hit)
      : lse(lse_), lse2(lse_ * kLog2e), scale(scale_), off_scaled(off * scale_), hit_scaled(hit * scale_),
        jt(t >= 0 ? t / per_vec : -1), kt(t >= 0 ? (int)(t % per_vec) : -1) {}
  __device__ __forceinline__ float exp_lse(float x) const {
    return fast_exp2(sizeof(T) == 4 ? (x - lse) * kLog2e : fmaf(x, kLog2e, -lse2));
  }
  template <typename P>
  __device__ __forceinline__ P operator()(const P& v, int64_t j) const {
    if (j != jt) return v.map([&](float x, int) { return fmaf(exp_lse(x), scale, -off_scaled); });
    return v.map([&](float x, int k) {
      const float g = fmaf(exp_lse(x), scale, -off_scaled);
      return k == kt ? g - hit_scaled : g;
    });
  }
};

template <typename P>
__device__ __forceinline__ P zeros() {
  P z;
  if constexpr (P::N > 1) z.fill(0.f);
  else z.x = 0.f;
  return z;
}

}  // namespace ce
}  // namespace cuda
}  // namespace mytorch
