// The minimal ATen ops every device provides natively: allocation, views, resize,
// set_, reading one scalar, fill and zero. (Copies are in copy.cpp.)
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>

#include "device/allocator.h"
#include "device/device.h"
#include "device/ops.h"
#include "device/ops_minimal.h"
#include "device/strided.h"

namespace mytorch {
namespace device {

constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

static void check_options(const char* op, std::optional<c10::Layout> layout,
                          std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, op,
              ": the mytorch device supports only the strided layout, got ", *layout);
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), op,
              ": pin_memory applies to CPU tensors only, not to mytorch tensors");
}

static c10::Device target(const char* op, std::optional<c10::Device> device) {
  c10::Device d = c10::device_or_default(device);
  TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, op, ": expected a mytorch device, got ",
              d);
  return make_device(d.index());  // checks the index, resolves "mytorch" to the current one
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options("empty", layout, pin_memory);
  c10::DeviceGuard guard(target("empty", device));
  return at::detail::empty_generic(size, allocator(), kKeys, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options("empty_strided", layout, pin_memory);
  c10::DeviceGuard guard(target("empty_strided", device));
  return at::detail::empty_strided_generic(size, stride, allocator(), kKeys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// ---- storage size ----
void resize_bytes(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "mytorch: trying to resize a storage that is not resizable");
  c10::DeviceGuard guard(storage->device());
  c10::DataPtr fresh = allocator()->allocate(nbytes);
  size_t keep = std::min(nbytes, storage->nbytes());
  if (keep > 0) std::memcpy(fresh.get(), storage->data(), keep);
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

static void ensure_storage(const at::Tensor& self) {
  // bytes needed by the current geometry
  int64_t needed = 0;
  if (self.numel() > 0) {
    needed = self.storage_offset() + 1;
    for (int64_t d = 0; d < self.dim(); ++d) needed += (self.size(d) - 1) * self.stride(d);
    needed *= static_cast<int64_t>(self.element_size());
  }
  c10::StorageImpl* st = self.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (static_cast<size_t>(needed) > st->nbytes()) resize_bytes(st, needed);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  for (auto s : size)
    TORCH_CHECK(s >= 0, "resize_: expected non-negative sizes, got ", size);
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() == size && !memory_format.has_value()) return self;
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  ensure_storage(self);
  return self;
}

// ---- set_ ----
static void check_set_storage(const at::Tensor& self, const c10::Storage& storage) {
  TORCH_CHECK(storage.device() == self.device(), "set_: expected a storage on ", self.device(),
              ", got one on ", storage.device());
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage storage, int64_t offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride) {
  check_set_storage(self, storage);
  TORCH_CHECK(offset >= 0, "set_: expected a non-negative storage offset, got ", offset);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(storage));
  impl->set_storage_offset(offset);
  if (stride.data() != nullptr) {
    TORCH_CHECK(size.size() == stride.size(), "set_: got ", size.size(), " sizes and ",
                stride.size(), " strides");
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  ensure_storage(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage storage) {
  int64_t n = static_cast<int64_t>(storage.nbytes() / self.element_size());
  return set_storage_offset(self, std::move(storage), 0, {n}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src) {
  TORCH_CHECK(self.dtype() == src.dtype(), "set_: expected a source of dtype ", self.dtype(),
              ", got ", src.dtype());
  if (self.unsafeGetTensorImpl() == src.unsafeGetTensorImpl()) return self;
  return set_storage_offset(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, allocator(), /*resizable=*/true);
  return set_storage_offset(self, std::move(empty), 0, {0}, {});
}

// ---- scalars ----
at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "_local_scalar_dense: expected a tensor with one element, got ",
              self.numel());
  at::Scalar r;
  AT_DISPATCH_V2(
      self.scalar_type(), "mytorch_local_scalar_dense",
      AT_WRAP([&] { r = at::Scalar(*self.const_data_ptr<scalar_t>()); }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kComplexHalf, at::kHalf, at::kBool, at::kBFloat16,
      AT_EXPAND(AT_FLOAT8_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return r;
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  at::assert_no_internal_overlap(self);
  if (self.numel() == 0) return self;
  RowLoop<1> loop({&self});
  AT_DISPATCH_V2(
      self.scalar_type(), "mytorch_fill_",
      AT_WRAP([&] {
        const scalar_t v = value.to<scalar_t>();
        loop.run({static_cast<char*>(self.data_ptr())},
                 [&](std::array<char*, 1> p, std::array<int64_t, 1> st, int64_t n) {
                   if (st[0] == static_cast<int64_t>(sizeof(scalar_t))) {
                     auto* out = reinterpret_cast<scalar_t*>(p[0]);
                     for (int64_t i = 0; i < n; ++i) out[i] = v;
                   } else {
                     for (int64_t i = 0; i < n; ++i)
                       *reinterpret_cast<scalar_t*>(p[0] + i * st[0]) = v;
                   }
                 });
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kComplexHalf, at::kHalf, at::kBool, at::kBFloat16,
      AT_EXPAND(AT_FLOAT8_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

// `param.data = t` and Module.to() keep a Parameter object (and so tied weights)
// only when the two tensors may share a TensorImpl type: mytorch and CPU dense tensors may.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided &&
           (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return self.unsafeGetTensorImpl()->key_set() == from.unsafeGetTensorImpl()->key_set() ||
         (dense(self) && dense(from));
}

// ---- CPU aliases ----
at::Tensor host_alias(const at::Tensor& t) {
  c10::Storage keep = t.storage();
  return at::from_blob(
      t.data_ptr(), t.sizes(), t.strides(), [keep](void*) {},
      t.options().device(c10::kCPU));
}

}  // namespace device
}  // namespace mytorch
