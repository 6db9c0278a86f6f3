// cpu_alias: a CPU tensor sharing a mytorch tensor's storage (see cpu_alias.h).
#include "device/cpu_alias.h"

#include <c10/core/StorageImpl.h>

#include "device/allocator.h"
#include "device/device.h"

namespace mytorch {
namespace device {

namespace {
void release_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }
}  // namespace

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "mytorch cpu_alias: expected a tensor, got an undefined tensor");
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "mytorch cpu_alias: expected a tensor on the mytorch device, got one on ",
              t.device());
  TORCH_CHECK(!t.is_conj() && !t.is_neg(),
              "mytorch cpu_alias: expected a tensor without a lazy conjugate or negative bit; "
              "call resolve_conj()/resolve_neg() first");
  c10::Storage orig = t.storage();
  // The CPU storage spans the whole mytorch storage and owns a reference to it.
  c10::DataPtr data(orig.mutable_data(), new c10::Storage(orig), &release_storage,
                    c10::Device(c10::kCPU));
  c10::Storage cpu(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), orig.nbytes(), std::move(data),
      /*allocator=*/nullptr, /*resizable=*/false));
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(cpu), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

at::Tensor device_alias(const at::Tensor& t, c10::DeviceIndex device) {
  TORCH_CHECK(t.defined() && t.device().is_cpu(),
              "mytorch device_alias: expected a CPU tensor, got ",
              t.defined() ? t.device().str() : std::string("an undefined tensor"));
  TORCH_CHECK(!t.is_conj() && !t.is_neg() && t.layout() == c10::kStrided && !t.is_quantized(),
              "mytorch device_alias: expected a plain strided CPU tensor");
  const c10::Device dev = make_device(device);
  c10::Storage orig = t.storage();
  c10::DataPtr data(orig.mutable_data(), new c10::Storage(orig), &release_storage, dev);
  // resizable: a resize moves the tensor into fresh device memory from mytorch's allocator
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), orig.nbytes(), std::move(data), allocator(),
      /*resizable=*/true));
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

}  // namespace device
}  // namespace mytorch
