// Rotary position embedding (CUDA), forward and backward, in place or out of place.
// x: (..., S, H, D); cos, sin: (S, R/2) with R <= D even; the first R features rotate,
// the rest pass through. Pairs are (i, i + R/2), or (2i, 2i+1) when interleaved.
// Backward is the inverse rotation (sin negated). Checks in the family header, kernels/rope.h. Each thread owns VEC whole pairs,
// so the in-place form has no read/write overlap between threads.
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/rope.h"

namespace mytorch {
namespace cuda {
namespace {

// One unit: VEC pairs of one row (token, head) at pair offset p0, position s. cos and sin
// are read in their own dtype C (rows cs / ss elements apart) and widened to float here, so
// a model's bf16 table needs no float copy per call.
template <typename T, typename C, int VEC, bool INTERLEAVED>
__device__ __forceinline__ void rope_unit(const T* x, T* out, const C* __restrict__ cosv,
                                          const C* __restrict__ sinv, int64_t cs, int64_t ss, int64_t row,
                                          int64_t s, int64_t p0, int64_t D, int64_t half, float sign) {
  const C* cp = cosv + s * cs + p0;
  const C* sp = sinv + s * ss + p0;
  float c[VEC], sn[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    c[k] = (float)cp[k];
    sn[k] = sign * (float)sp[k];
  }
  const int64_t base = row * D;
  int64_t o1, o2;
  if (INTERLEAVED) {
    o1 = base + 2 * p0;
    o2 = o1 + VEC;
  } else {
    o1 = base + p0;
    o2 = base + half + p0;
  }
  auto a = load_vec<T, VEC>(x + o1);
  auto b = load_vec<T, VEC>(x + o2);
  Vec<T, VEC> ra, rb;
  if (INTERLEAVED) {
    // 2*VEC consecutive features = VEC pairs (e[2q], e[2q+1])
    float e[2 * VEC], r[2 * VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      e[k] = (float)a.v[k];
      e[VEC + k] = (float)b.v[k];
    }
#pragma unroll
    for (int q = 0; q < VEC; ++q) {
      r[2 * q] = e[2 * q] * c[q] - e[2 * q + 1] * sn[q];
      r[2 * q + 1] = e[2 * q + 1] * c[q] + e[2 * q] * sn[q];
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      ra.v[k] = (T)r[k];
      rb.v[k] = (T)r[VEC + k];
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float x1 = (float)a.v[k], x2 = (float)b.v[k];
      ra.v[k] = (T)(x1 * c[k] - x2 * sn[k]);
      rb.v[k] = (T)(x2 * c[k] + x1 * sn[k]);
    }
  }
  store_vec<T, VEC>(out + o1, ra);
  store_vec<T, VEC>(out + o2, rb);
}

// Grid (unit tiles of a token, tokens): thread tu owns unit tu of every token it visits (its
// head and pair offset found once, by a 32-bit division), tokens stride by gridDim.y and the
// position s follows by a conditional subtract (s_step = gridDim.y % S): no 64-bit division
// per unit (the flat grid-stride form it replaced took three: 92-96% of copy on H200 against
// 94-98% now, bf16, the same bits).
template <typename T, typename C, int VEC, bool INTERLEAVED>
__global__ void rope_kernel(const T* x, T* out, const C* __restrict__ cosv, const C* __restrict__ sinv, int64_t cs,
                            int64_t ss, int64_t tokens, int units_per_token, int upr, int64_t heads, int64_t S,
                            int64_t s_step, int64_t D, int64_t half, float sign) {
  const int tu = blockIdx.x * blockDim.x + threadIdx.x;
  if (tu >= units_per_token) return;
  const int head = tu / upr;
  const int64_t p0 = (int64_t)(tu - head * upr) * VEC;
  int64_t s = (int64_t)blockIdx.y % S;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    rope_unit<T, C, VEC, INTERLEAVED>(x, out, cosv, sinv, cs, ss, t * heads + head, s, p0, D, half, sign);
    s += s_step;
    if (s >= S) s -= S;
  }
}

using rope::RopeShape;

void launch_rope(const at::Tensor& x, at::Tensor& out, const at::Tensor& cos, const at::Tensor& sin,
                 const RopeShape& r, bool interleaved, float sign) {
  int64_t rows = r.D == 0 ? 0 : x.numel() / r.D;
  if (rows == 0) return;
  // cos and sin are read where they lie when their rows are unit-stride and both have one of
  // the kernel's dtypes; otherwise (float64, mixed dtypes, strided rows) as float copies
  at::Tensor c = cos, s = sin;
  const auto ct = cos.scalar_type();
  const bool direct = ct == sin.scalar_type() && cos.stride(1) == 1 && sin.stride(1) == 1 &&
                      (ct == at::kFloat || ct == at::kHalf || ct == at::kBFloat16);
  if (!direct) {
    c = cos.to(at::kFloat).contiguous();
    s = sin.to(at::kFloat).contiguous();
  }
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_rope_cuda", [&] {
    using T = scalar_t;
    const T* xp = x.const_data_ptr<T>();
    T* op_ = out.mutable_data_ptr<T>();
    constexpr int V = vec16<T>();
    bool v = r.half % V == 0 && r.D % V == 0 && aligned16(xp) && aligned16(op_);
    int vec = v ? V : 1;
    int64_t upr = r.half / vec;
    const int64_t tokens = rows / r.H, per_token = r.H * upr;
    TORCH_CHECK(per_token <= INT32_MAX, "mytorch::rope: expected at most 2^31 - 1 rotated vectors per token, got ",
                per_token);
    MYTORCH_DISPATCH_CUDA_FLOAT(c.scalar_type(), "mytorch_rope_cuda_table", [&] {
      using C = scalar_t;
      auto launch = [&](auto vv, auto il) {
        constexpr int VV = decltype(vv)::value;
        constexpr bool IL = decltype(il)::value;
        const int threads = (int)std::min<int64_t>(256, round_up(per_token, 32));
        const int64_t gy = std::min<int64_t>(tokens, 65535);
        dim3 grid((unsigned)((per_token + threads - 1) / threads), (unsigned)gy);
        rope_kernel<T, C, VV, IL><<<grid, threads, 0, stream>>>(
            xp, op_, c.const_data_ptr<C>(), s.const_data_ptr<C>(), c.stride(0), s.stride(0), tokens, (int)per_token,
            (int)upr, r.H, r.S, gy % r.S, r.D, r.half, sign);
      };
      using VT = std::integral_constant<int, V>;
      using V1 = std::integral_constant<int, 1>;
      using IL = std::true_type;
      using NI = std::false_type;
      if (v && interleaved) launch(VT{}, IL{});
      else if (v) launch(VT{}, NI{});
      else if (interleaved) launch(V1{}, IL{});
      else launch(V1{}, NI{});
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor rope_out_of_place(const char* op, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                             bool interleaved, float sign) {
  check_cuda(op, "x", x);
  const RopeShape r = rope::check(op, x, cos, sin, check_cuda_float);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor out = aten::empty_like(xc);
  if (2 * r.half < r.D) out.narrow(-1, 2 * r.half, r.D - 2 * r.half).copy_(xc.narrow(-1, 2 * r.half, r.D - 2 * r.half));
  launch_rope(xc, out, cos, sin, r, interleaved, sign);
  return out;
}

}  // namespace

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  return rope_out_of_place("mytorch::rope", x, cos, sin, interleaved, 1.f);
}

at::Tensor rope_backward(const at::Tensor& grad, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  return rope_out_of_place("mytorch::rope_backward", grad, cos, sin, interleaved, -1.f);
}

void rope_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  const char* op = "mytorch::rope_";
  check_cuda(op, "x", x);
  const RopeShape r = rope::check(op, x, cos, sin, check_cuda_float);
  rope::check_inplace(op, x);
  c10::cuda::CUDAGuard guard(x.device());
  launch_rope(x, x, cos, sin, r, interleaved, 1.f);
}

}  // namespace cuda
}  // namespace mytorch
