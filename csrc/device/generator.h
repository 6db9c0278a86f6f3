// The mytorch device's random number generator.
//
// One default generator per device. It is an at::CPUGeneratorImpl (mt19937 plus the
// cached normal samples) whose device is mytorch:N, so every sampling helper of ATen
// (at::uniform_real_distribution, at::normal_distribution, ...) works on it.
//
// Getting it in a kernel (e.g. dropout on the mytorch device):
//
//   #include "device/generator.h"
//   at::CPUGeneratorImpl* gen = mytorch::device::get_generator(generator, self.device());
//   std::lock_guard<std::mutex> lock(gen->mutex_);
//   at::uniform_real_distribution<float> u(0, 1);  float x = u(gen);
//
// The line `at::get_generator_or_default<at::CPUGeneratorImpl>(gen, default)` fails
// on a device generator: ATen's check_generator compares the generator's device type
// (PrivateUse1) with CPUGeneratorImpl::device_type() (CPU). Use the helper above, or
// the same call with the device type this header declares:
//
//   at::get_generator_or_default<mytorch::device::GeneratorImpl>(
//       gen, at::globalContext().defaultGenerator(device))
//
// which returns a GeneratorImpl*, i.e. an at::CPUGeneratorImpl*.
#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <optional>

namespace mytorch {
namespace device {

struct GeneratorImpl : public at::CPUGeneratorImpl {
  explicit GeneratorImpl(c10::DeviceIndex index, uint64_t seed = c10::default_rng_seed_val);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  GeneratorImpl* clone_impl() const override;
};

// The default generator of mytorch:index (-1: the current device).
const at::Generator& default_generator(c10::DeviceIndex index = -1);
// A fresh generator on mytorch:index, seeded with the default seed.
at::Generator new_generator(c10::DeviceIndex index = -1);

// `gen` when given (it must be a mytorch generator), else the default generator of
// `device`. The result is an at::CPUGeneratorImpl; lock its mutex_ while sampling.
GeneratorImpl* get_generator(const std::optional<at::Generator>& gen, const c10::Device& device);

}  // namespace device
}  // namespace mytorch
