// The device runtime's own ATen kernels: allocation, views, resize, set_, scalars and fill
// (ops_minimal.cpp), copies (copy.cpp) and random sampling (random.cpp). They are
// registered for PrivateUse1 with the family kernels, in aten/register.cpp.
#pragma once
#include <ATen/ATen.h>

#include <optional>

namespace mytorch {
namespace device {

// ---- allocation, views, resize, set_, scalars, fill (ops_minimal.cpp) ----
at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format);
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory);
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset);
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size);
at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride);
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format);
at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage storage, int64_t offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor& set_storage(at::Tensor& self, c10::Storage storage);
at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src);
at::Tensor& set_empty(at::Tensor& self);
at::Scalar local_scalar_dense(const at::Tensor& self);
at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value);
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from);

// ---- copies (copy.cpp) ----
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);

// ---- random sampling from the device's generator (random.cpp) ----
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator);
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> generator);
at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> generator);
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> generator);
at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> generator);
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> generator);
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator);
at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator);
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& out);

}  // namespace device
}  // namespace mytorch
