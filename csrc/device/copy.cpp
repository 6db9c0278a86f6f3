// Copies into, out of and between mytorch devices: aten::_copy_from (what copy_ calls
// for a PrivateUse1 tensor) and aten::_copy_from_and_resize. One strided kernel with
// broadcasting and dtype conversion; mytorch and CPU memory are both host memory.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/TypeCast.h>
#include <torch/library.h>

#include <cstring>

#include "device/ops.h"
#include "device/ops_minimal.h"
#include "device/strided.h"

namespace mytorch {
namespace device {

namespace {

bool on_host(const at::Tensor& t) {
  return t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1;
}

// ---- kernels: rows of bytes ----
template <typename U>
void copy_rows_same(char* d, const char* s, int64_t ds, int64_t ss, int64_t n) {
  if (ds == static_cast<int64_t>(sizeof(U)) && ss == static_cast<int64_t>(sizeof(U))) {
    std::memcpy(d, s, n * sizeof(U));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(d + i * ds, s + i * ss, sizeof(U));
}

template <typename D, typename S>
void convert_row(char* d, const char* s, int64_t ds, int64_t ss, int64_t n) {
  if (ds == static_cast<int64_t>(sizeof(D)) && ss == static_cast<int64_t>(sizeof(S))) {
    auto* out = reinterpret_cast<D*>(d);
    auto* in = reinterpret_cast<const S*>(s);
    for (int64_t i = 0; i < n; ++i) out[i] = c10::static_cast_with_inter_type<D, S>::apply(in[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, s + i * ss, sizeof(S));
    D r = c10::static_cast_with_inter_type<D, S>::apply(v);
    std::memcpy(d + i * ds, &r, sizeof(D));
  }
}

bool convertible(at::ScalarType t) {
  switch (t) {
    case at::kByte: case at::kChar: case at::kShort: case at::kInt: case at::kLong:
    case at::kFloat: case at::kDouble: case at::kComplexFloat: case at::kComplexDouble:
    case at::kHalf: case at::kBFloat16: case at::kBool:
      return true;
    default:
      return false;
  }
}

// dst and src: same shape, host memory, no conj/neg bits to resolve.
void copy_kernel(const at::Tensor& dst, const at::Tensor& src) {
  RowLoop<2> loop({&dst, &src});
  std::array<char*, 2> base{static_cast<char*>(dst.data_ptr()),
                            const_cast<char*>(static_cast<const char*>(src.const_data_ptr()))};
  if (dst.scalar_type() == src.scalar_type()) {
    auto rows = [&](auto tag) {
      using U = decltype(tag);
      loop.run(base, [](std::array<char*, 2> p, std::array<int64_t, 2> st, int64_t n) {
        copy_rows_same<U>(p[0], p[1], st[0], st[1], n);
      });
    };
    switch (dst.element_size()) {
      case 1: rows(uint8_t{}); return;
      case 2: rows(uint16_t{}); return;
      case 4: rows(uint32_t{}); return;
      case 8: rows(uint64_t{}); return;
      case 16: rows(c10::complex<double>{}); return;
      default: TORCH_CHECK(false, "mytorch copy: unsupported element size ", dst.element_size());
    }
  }
  AT_DISPATCH_V2(dst.scalar_type(), "mytorch_copy_dst", AT_WRAP([&] {
    using D = scalar_t;
    AT_DISPATCH_V2(src.scalar_type(), "mytorch_copy_src", AT_WRAP([&] {
      using S = scalar_t;
      loop.run(base, [](std::array<char*, 2> p, std::array<int64_t, 2> st, int64_t n) {
        convert_row<D, S>(p[0], p[1], st[0], st[1], n);
      });
    }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool);
  }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool);
}

// Logical CPU views of host tensors, for the rare cases (float8, conj/neg bits, ...)
// that ATen's CPU copy kernel resolves.
at::Tensor logical_host(const at::Tensor& t) {
  at::Tensor h = host_alias(t);
  if (t.is_conj()) h = h.conj();
  if (t.is_neg()) h = h._neg_view();
  return h;
}

}  // namespace

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "_copy_from: expected defined tensors");
  // A device that is not host memory (e.g. CUDA) goes through a CPU tensor.
  if (!on_host(self)) return copy_from(self.to(c10::kCPU), dst, non_blocking);
  if (!on_host(dst)) {
    at::Tensor tmp = at::empty(dst.sizes(), dst.options().device(c10::kCPU));
    copy_from(self, tmp, non_blocking);
    dst.copy_(tmp, non_blocking);
    return dst;
  }
  if (dst.numel() == 0) return dst;
  at::Tensor src = self.expand(dst.sizes());
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, src);
  if (dst.is_same(self)) return dst;
  bool bits_match = src.is_conj() == dst.is_conj() && src.is_neg() == dst.is_neg();
  if (bits_match && convertible(src.scalar_type()) && convertible(dst.scalar_type())) {
    copy_kernel(dst, src);
  } else if (bits_match && src.scalar_type() == dst.scalar_type()) {
    copy_kernel(dst, src);  // a plain byte copy serves every dtype
  } else {
    at::Tensor hd = logical_host(dst);
    hd.copy_(logical_host(src));
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

}  // namespace device
}  // namespace mytorch

// copy_ sends a conjugated or negated view here with its bit still set, and copy_from
// resolves the bits itself. Without these, ATen's conjugate/negative fallback would
// materialize the view through clone -> copy_ -> _copy_from again, without end.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
