// Tensor metadata of mytorch tensors: torch._utils.set_tensor_metadata / get_tensor_metadata
// and serialization carry a dict[str, bool] per tensor. torch keeps the conj and neg bits
// itself and hands every other key to the backend; mytorch keeps them in the tensor's
// BackendMeta, so they survive get_tensor_metadata, clones of the metadata and torch.save.
#include <c10/core/TensorImpl.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <map>
#include <string>
#include <unordered_map>

namespace mytorch {
namespace device {

namespace {

struct TensorMetadata final : public c10::BackendMeta {
  explicit TensorMetadata(std::map<std::string, bool> e) : entries(std::move(e)) {}
  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>&) const override {
    return c10::make_intrusive<TensorMetadata>(entries);
  }
  std::map<std::string, bool> entries;
};

bool torch_key(const std::string& k) { return k == "conj" || k == "neg"; }

void get_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& m) {
  auto* meta = dynamic_cast<TensorMetadata*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta == nullptr) return;
  for (const auto& kv : meta->entries) m.emplace(kv.first, kv.second);
}

void set_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& m) {
  std::map<std::string, bool> entries;
  for (const auto& kv : m)
    if (!torch_key(kv.first)) entries.emplace(kv.first, kv.second);
  if (entries.empty()) {
    t.unsafeGetTensorImpl()->set_backend_meta(c10::intrusive_ptr<c10::BackendMeta>());
    return;
  }
  t.unsafeGetTensorImpl()->set_backend_meta(
      c10::make_intrusive<TensorMetadata>(std::move(entries)));
}

const bool registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &get_metadata,
                                        &set_metadata);
  return true;
}();

}  // namespace

}  // namespace device
}  // namespace mytorch
