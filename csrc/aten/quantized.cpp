// Per-tensor affine quantized tensors (qint8, quint8) on the mytorch device: quantize,
// dequantize, int_repr, the quantization parameters, and copies to and from the CPU.
// A quantized mytorch tensor is a QTensorImpl over mytorch memory (key QuantizedPrivateUse1).
// Other schemes and dtypes (per-channel, qint32, sub-byte) raise one error naming the op.
#include <ATen/Parallel.h>
#include <ATen/native/Resize.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>

#include <cmath>
#include <cstring>

#include "aten/ops.h"

namespace mytorch {
namespace aten {
namespace {

constexpr int64_t kGrain = 1 << 15;

void check_qdtype(const char* op, at::ScalarType dtype) {
  TORCH_CHECK(dtype == at::kQInt8 || dtype == at::kQUInt8, op,
              ": the mytorch device supports per-tensor quantized qint8 and quint8 tensors, got ",
              dtype);
}

[[noreturn]] void unsupported(const char* op, const char* what) {
  TORCH_CHECK(false, op, ": ", what, " is not supported on the mytorch device; it supports "
              "per-tensor affine qint8 and quint8 tensors (torch.quantize_per_tensor)");
}

at::PerTensorAffineQuantizer* per_tensor(const char* op, const Tensor& q) {
  TORCH_CHECK(q.is_quantized(), op, ": expected a quantized tensor, got ", q.scalar_type());
  auto* quantizer = dynamic_cast<at::PerTensorAffineQuantizer*>(at::get_qtensorimpl(q)->quantizer().get());
  TORCH_CHECK(quantizer != nullptr, op, ": expected a per-tensor affine quantized tensor, got ",
              c10::toString(q.qscheme()));
  return quantizer;
}

Tensor empty_affine(at::IntArrayRef size, const at::TensorOptions& options, double scale,
                    int64_t zero_point) {
  const char* op = "mytorch::_empty_affine_quantized";
  at::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
  check_qdtype(op, dtype);
  TORCH_CHECK(scale > 0 && std::isfinite(scale), op, ": expected a positive finite scale, got ",
              scale);
  return at::new_qtensor(size, options, at::make_per_tensor_affine_quantizer(scale, zero_point, dtype));
}

template <typename Q>
void quantize_into(const Tensor& x, const Tensor& q, double scale, int64_t zp) {
  using U = typename Q::underlying;
  const float inv_scale = 1.0f / static_cast<float>(scale);
  const int64_t qmin = std::numeric_limits<U>::min(), qmax = std::numeric_limits<U>::max();
  const float* xp = x.const_data_ptr<float>();
  U* qp = reinterpret_cast<U*>(q.data_ptr());
  at::parallel_for(0, x.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      int64_t v = zp + static_cast<int64_t>(std::nearbyint(inv_scale * xp[i]));
      qp[i] = static_cast<U>(std::min(std::max(v, qmin), qmax));
    }
  });
}

template <typename Q>
void dequantize_into(const Tensor& q, const Tensor& out, double scale, int64_t zp) {
  using U = typename Q::underlying;
  const U* qp = reinterpret_cast<const U*>(q.const_data_ptr());
  float* op = out.mutable_data_ptr<float>();
  const float s = static_cast<float>(scale);
  const int32_t z = static_cast<int32_t>(zp);
  at::parallel_for(0, q.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) op[i] = s * static_cast<float>(static_cast<int32_t>(qp[i]) - z);
  });
}

Tensor contiguous_q(const char* op, const Tensor& q) {
  TORCH_CHECK(q.is_contiguous(), op, ": expected a contiguous quantized tensor on the mytorch device");
  return q;
}

}  // namespace

Tensor empty_affine_quantized(at::IntArrayRef size, OptType dtype,
                              std::optional<at::Layout> layout, std::optional<at::Device> device,
                              std::optional<bool> pin_memory, double scale, int64_t zero_point,
                              std::optional<at::MemoryFormat> memory_format) {
  auto options = at::TensorOptions().dtype(dtype).layout(layout).device(device)
                     .pinned_memory(pin_memory).memory_format(memory_format);
  return empty_affine(size, options, scale, zero_point);
}

// torch.empty(..., dtype=torch.qint8): as on the CPU, scale 1 and zero_point 0.
Tensor empty_quantized_memory_format(at::IntArrayRef size, OptType dtype, std::optional<at::Layout> layout,
                                     std::optional<at::Device> device, std::optional<bool> pin_memory,
                                     std::optional<at::MemoryFormat> memory_format) {
  return empty_affine_quantized(size, dtype, layout, device, pin_memory, 1.0, 0, memory_format);
}

Tensor empty_quantized(at::IntArrayRef size, const Tensor& qtensor, std::optional<at::ScalarType> dtype,
                       std::optional<at::Layout> layout, std::optional<at::Device> device,
                       std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  auto* q = per_tensor("mytorch::empty_quantized", qtensor);
  auto options = qtensor.options().merge_in(at::TensorOptions().dtype(dtype).layout(layout)
                                                .device(device).pinned_memory(pin_memory)
                                                .memory_format(memory_format));
  return at::_empty_affine_quantized(size, options, q->scale(), q->zero_point());
}

Tensor quantize_per_tensor(const Tensor& self, double scale, int64_t zero_point, at::ScalarType dtype) {
  const char* op = "mytorch::quantize_per_tensor";
  check_qdtype(op, dtype);
  TORCH_CHECK(self.scalar_type() == at::kFloat, op, ": expected a float32 tensor, got ",
              self.scalar_type());
  const int64_t qmin = dtype == at::kQInt8 ? -128 : 0, qmax = dtype == at::kQInt8 ? 127 : 255;
  TORCH_CHECK(zero_point >= qmin && zero_point <= qmax, op, ": zero_point ", zero_point,
              " is out of range for ", dtype, " (expected [", qmin, ", ", qmax, "])");
  Tensor x = self.contiguous();
  Tensor q = empty_affine(x.sizes(), x.options().dtype(dtype), scale, zero_point);
  if (x.numel() == 0) return q;
  if (dtype == at::kQInt8) quantize_into<c10::qint8>(x, q, scale, zero_point);
  else quantize_into<c10::quint8>(x, q, scale, zero_point);
  return q;
}

Tensor quantize_per_tensor_qparams(const Tensor& self, const Tensor& scale, const Tensor& zero_point,
                                   at::ScalarType dtype) {
  const char* op = "mytorch::quantize_per_tensor";
  TORCH_CHECK(scale.numel() == 1 && zero_point.numel() == 1, op,
              ": expected one scale and one zero_point, got ", scale.numel(), " and ",
              zero_point.numel());
  return aten::quantize_per_tensor(self, scale.item<double>(), zero_point.item<int64_t>(), dtype);
}

Tensor dequantize(const Tensor& self) {
  const char* op = "mytorch::dequantize";
  auto* quantizer = per_tensor(op, self);
  Tensor q = contiguous_q(op, self);
  Tensor out = at::empty(q.sizes(), q.options().dtype(at::kFloat));
  if (q.numel() == 0) return out;
  if (q.scalar_type() == at::kQInt8) dequantize_into<c10::qint8>(q, out, quantizer->scale(), quantizer->zero_point());
  else dequantize_into<c10::quint8>(q, out, quantizer->scale(), quantizer->zero_point());
  return out;
}

Tensor int_repr(const Tensor& self) {
  const char* op = "mytorch::int_repr";
  per_tensor(op, self);
  Tensor q = contiguous_q(op, self);
  Tensor out = at::empty(q.sizes(), q.options().dtype(q.scalar_type() == at::kQInt8 ? at::kChar : at::kByte));
  if (q.numel() > 0) std::memcpy(out.mutable_data_ptr(), q.const_data_ptr(), q.numel());
  return out;
}

double q_scale(const Tensor& self) { return per_tensor("mytorch::q_scale", self)->scale(); }
int64_t q_zero_point(const Tensor& self) {
  return per_tensor("mytorch::q_zero_point", self)->zero_point();
}
at::QScheme qscheme(const Tensor& self) {
  per_tensor("mytorch::qscheme", self);
  return at::kPerTensorAffine;
}

// dst <- src between quantized tensors (either may be on the CPU): the same dtype; dst takes
// src's quantizer, as ATen's quantized copy does. Both live in host memory.
Tensor& copy_quantized_(Tensor& self, const Tensor& src, bool) {
  const char* op = "mytorch::copy_ (quantized)";
  TORCH_CHECK(self.is_quantized() && src.is_quantized(), op,
              ": copies between quantized and non-quantized tensors are not supported on the "
              "mytorch device; quantize or dequantize first");
  TORCH_CHECK(self.scalar_type() == src.scalar_type(), op, ": expected the same quantized dtype, got ",
              self.scalar_type(), " and ", src.scalar_type());
  TORCH_CHECK(self.sizes() == src.sizes(), op, ": expected the same shape, got ", self.sizes(),
              " and ", src.sizes());
  per_tensor(op, src);
  TORCH_CHECK(self.is_contiguous() && src.is_contiguous(), op,
              ": expected contiguous quantized tensors");
  at::get_qtensorimpl(self)->set_quantizer_(at::get_qtensorimpl(src)->quantizer());
  if (self.numel() > 0) std::memcpy(self.data_ptr(), src.const_data_ptr(), self.numel() * self.element_size());
  return self;
}

Tensor quantize_per_channel(const Tensor&, const Tensor&, const Tensor&, int64_t, at::ScalarType) {
  unsupported("mytorch::quantize_per_channel", "per-channel quantization");
}
Tensor quantize_per_tensor_dynamic(const Tensor&, at::ScalarType, bool) {
  unsupported("mytorch::quantize_per_tensor_dynamic", "dynamic quantization");
}

}  // namespace aten
}  // namespace mytorch
