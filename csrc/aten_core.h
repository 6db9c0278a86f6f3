// The ATen API of the kernels. C++ sources get all of <ATen/ATen.h> (the precompiled header
// holds it anyway). CUDA sources get the tensor class (its methods included) and, in
// namespace mytorch::aten, the few ATen functions they call: each forwards to the same
// dispatcher entry point (at::_ops) as ATen's inline wrapper in <ATen/ops/NAME.h>. Those
// headers bring in ATen/DeviceGuard.h and with it the IValue headers, which cost nvcc more
// than the tensor class itself in every translation unit.
#pragma once
#ifdef __CUDACC__
#include <ATen/core/Formatting.h>  // operator<< of Scalar and Tensor (error messages)
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like_ops.h>
#include <ATen/ops/empty_ops.h>
#include <ATen/ops/empty_strided_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/ones_ops.h>
#include <ATen/ops/result_type_ops.h>
#include <ATen/ops/zeros_like_ops.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/core/TensorOptions.h>

#include <optional>

namespace mytorch {
namespace aten {

inline at::Tensor empty(at::IntArrayRef size, at::TensorOptions options = {},
                        std::optional<at::MemoryFormat> memory_format = std::nullopt) {
  return at::_ops::empty_memory_format::call(
      c10::fromIntArrayRefSlow(size), c10::optTypeMetaToScalarType(options.dtype_opt()), options.layout_opt(),
      options.device_opt(), options.pinned_memory_opt(),
      c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}

inline at::Tensor empty_like(const at::Tensor& self, at::TensorOptions options = {},
                             std::optional<at::MemoryFormat> memory_format = std::nullopt) {
  return at::_ops::empty_like::call(self, c10::optTypeMetaToScalarType(options.dtype_opt()), options.layout_opt(),
                                    options.device_opt(), options.pinned_memory_opt(),
                                    c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}

inline at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, at::TensorOptions options = {}) {
  return at::_ops::empty_strided::call(c10::fromIntArrayRefSlow(size), c10::fromIntArrayRefSlow(stride),
                                       c10::optTypeMetaToScalarType(options.dtype_opt()), options.layout_opt(),
                                       options.device_opt(), options.pinned_memory_opt());
}

inline at::Tensor zeros_like(const at::Tensor& self, at::TensorOptions options = {},
                             std::optional<at::MemoryFormat> memory_format = std::nullopt) {
  return at::_ops::zeros_like::call(self, c10::optTypeMetaToScalarType(options.dtype_opt()), options.layout_opt(),
                                    options.device_opt(), options.pinned_memory_opt(),
                                    c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}

inline at::Tensor ones(at::IntArrayRef size, at::TensorOptions options = {}) {
  return at::_ops::ones::call(c10::fromIntArrayRefSlow(size), c10::optTypeMetaToScalarType(options.dtype_opt()),
                              options.layout_opt(), options.device_opt(), options.pinned_memory_opt());
}

inline at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) { return at::_ops::mm::call(self, mat2); }

inline at::Tensor& mm_out(at::Tensor& out, const at::Tensor& self, const at::Tensor& mat2) {
  return at::_ops::mm_out::call(self, mat2, out);
}

inline at::ScalarType result_type(const at::Tensor& tensor, const at::Tensor& other) {
  return at::_ops::result_type_Tensor::call(tensor, other);
}

inline at::ScalarType result_type(const at::Tensor& tensor, const at::Scalar& other) {
  return at::_ops::result_type_Scalar::call(tensor, other);
}

}  // namespace aten
}  // namespace mytorch
#else
#include <ATen/ATen.h>
#endif
