// Per-device default generators (see generator.h).
#include "device/generator.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <vector>

#include "device/device.h"

namespace mytorch {
namespace device {

GeneratorImpl::GeneratorImpl(c10::DeviceIndex index, uint64_t seed) : at::CPUGeneratorImpl(seed) {
  device_ = c10::Device(c10::DeviceType::PrivateUse1, index);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

GeneratorImpl* GeneratorImpl::clone_impl() const {
  auto* self = const_cast<GeneratorImpl*>(this);  // CPUGeneratorImpl's getters are not const
  auto* g = new GeneratorImpl(device_.index());
  g->set_engine(self->engine());
  g->set_next_float_normal_sample(self->next_float_normal_sample());
  g->set_next_double_normal_sample(self->next_double_normal_sample());
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (c10::DeviceIndex i = 0; i < device_count(); ++i)
      v.push_back(at::make_generator<GeneratorImpl>(i));
    return v;
  }();
  return gens[resolve_index(index)];
}

at::Generator new_generator(c10::DeviceIndex index) {
  return at::make_generator<GeneratorImpl>(resolve_index(index));
}

GeneratorImpl* get_generator(const std::optional<at::Generator>& gen, const c10::Device& device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1,
              "mytorch: expected a mytorch device for the generator, got ", device);
  return at::get_generator_or_default<GeneratorImpl>(gen, default_generator(device.index()));
}

}  // namespace device
}  // namespace mytorch
