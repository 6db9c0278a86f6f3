// mytorch_ext._C._device: what mytorch_ext/device.py (torch.mytorch) is built on.
#include "device/bindings.h"

#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/extension.h>

#include "device/allocator.h"
#include "device/cpu_alias.h"
#include "device/device.h"
#include "device/fallback.h"
#include "device/generator.h"

namespace mytorch {
namespace device {

void init_bindings(pybind11::module& parent) {
  namespace py = pybind11;
  auto m = parent.def_submodule("_device", "mytorch device runtime");
  // c10 errors become Python exceptions here, in this module, instead of relying on a
  // translator registered by another extension module (which need not share our ABI).
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::OutOfMemoryError& e) {
      auto oom = py::module::import("torch").attr("OutOfMemoryError");
      PyErr_SetString(oom.ptr(), e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  m.def("device_count", [] { return int(device_count()); });
  m.def("current_device", [] { return int(current_device()); });
  m.def("set_device", [](int i) { set_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("exchange_device", [](int i) { return int(exchange_device(static_cast<c10::DeviceIndex>(i))); });
  m.def("check_index", [](int i) { check_index(static_cast<c10::DeviceIndex>(i)); });
  m.def("default_generator", [](int i) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(i))));
  });

  m.def("memory_stats", [](int i) { return memory_stats(static_cast<c10::DeviceIndex>(i)); });
  m.def("reset_peak_memory_stats", [](int i) { reset_peak(static_cast<c10::DeviceIndex>(i)); });
  m.def("empty_cache", &empty_cache);
  m.def("set_memory_limit", [](int i, int64_t bytes) {
    set_memory_limit(static_cast<c10::DeviceIndex>(i), bytes);
  });
  m.def("memory_limit", [](int i) { return memory_limit(static_cast<c10::DeviceIndex>(i)); });
  m.def("set_alloc_debug", &set_debug);
  m.def("alloc_debug", &debug);
  m.def("alignment", [] { return kAlignment; });
  m.def("poison_bytes", [] { return py::make_tuple(int(kPoisonNew), int(kPoisonFreed)); });

  m.def("fallback_counts", &fallback_counts);
  m.def("reset_fallback_counts", &reset_fallback_counts);
  m.def("set_fallback_mode",
        [](const std::string& s) { set_fallback_mode(parse_fallback_mode(s)); });
  m.def("fallback_mode", [] { return fallback_mode_name(fallback_mode()); });

  // fork poisoning, as CUDA: once the parent initialized the device, a forked child is
  // marked "in bad fork" by torch's at-fork handler and cannot initialize it again
  m.def("register_fork_handler", [] {
    torch::utils::register_fork_handler_for_device_init(c10::DeviceType::PrivateUse1);
  });
  m.def("is_in_bad_fork",
        [] { return torch::utils::is_device_in_bad_fork(c10::DeviceType::PrivateUse1); });

  m.def("device_alias", [](const at::Tensor& t, int device) {
    return device_alias(t, static_cast<c10::DeviceIndex>(device));
  }, "a mytorch tensor over the same memory as a CPU tensor");
  m.def("cpu_alias", &cpu_alias, "a CPU tensor over the same memory as a mytorch tensor");

  // torch.compile (mytorch_ext/device_compile.py): the arguments and results of one compiled
  // function, aliased in one call instead of one Python call per tensor
  m.def("host_args", [](const py::list& args) {
    py::list out(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      PyObject* obj = args[i].ptr();
      if (THPVariable_Check(obj)) {
        const at::Tensor& t = THPVariable_Unpack(obj);
        if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
          out[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(
              cpu_alias(t.is_conj() || t.is_neg() ? t.resolve_conj().resolve_neg() : t)));
          continue;
        }
      }
      out[i] = args[i];
    }
    return out;
  }, "the list with every mytorch tensor replaced by its CPU alias");
  m.def("device_results", [](const py::sequence& outs, const std::vector<int>& devices) {
    const size_t n = outs.size();
    py::list res(n);
    for (size_t i = 0; i < n; ++i) {
      py::object o = outs[i];
      const int d = i < devices.size() ? devices[i] : -2;
      if (d >= -1 && THPVariable_Check(o.ptr())) {
        const at::Tensor& t = THPVariable_Unpack(o.ptr());
        if (t.defined() && t.device().is_cpu()) {
          const auto dev = static_cast<c10::DeviceIndex>(d);
          at::Tensor r;
          if (t.is_quantized() || t.layout() != c10::kStrided) {
            r = t.to(make_device(dev));
          } else {
            r = device_alias(t.is_conj() || t.is_neg() ? t.resolve_conj().resolve_neg() : t, dev);
          }
          o = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(r)));
        }
      }
      res[i] = std::move(o);
    }
    if (py::isinstance<py::tuple>(outs)) return py::object(py::tuple(res));
    return py::object(res);
  }, "result i of a compiled function as a device tensor on mytorch:devices[i] (-1: the "
     "current device; -2 or past the list: left as it is)");
}

}  // namespace device
}  // namespace mytorch
