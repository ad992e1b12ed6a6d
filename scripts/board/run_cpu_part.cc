// A bundle's CPU part (cpu.so: its relax VM's main) run by TVM 0.27's runtime from C++, with
// no Python: each offloaded region is replaced by a stand-in whose output's bytes are derived
// from its inputs' bytes (what the CPU part computed before it), and the output's bytes are
// printed in hex, so that the runs of one model's bundles built for two CPUs can be compared
// (scripts/board/cpu_part_under_qemu.sh: x86-64 against AArch64 under qemu-aarch64).
// Usage: run_cpu_part CPU.SO SYMBOL[,SYMBOL...] SHAPE   (the input: float32 of SHAPE, 1x3x8x8)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
namespace ffi = tvm::ffi;
struct CPUNDAlloc {
  void AllocData(DLTensor* t) {
    t->data = std::aligned_alloc(64, (ffi::GetDataSize(*t) + 63) / 64 * 64);
  }
  void FreeData(DLTensor* t) { std::free(t->data); }
};
int main(int argc, char** argv) {
  std::stringstream symbols(argv[2]);
  for (std::string s; std::getline(symbols, s, ',');) {
    ffi::Function::SetGlobal(s, ffi::Function::FromPacked([](ffi::PackedArgs args, ffi::Any*) {
      unsigned seed = 11;
      for (int k = 0; k + 1 < args.size(); ++k) {
        DLTensor* in = args[k].cast<DLTensor*>();
        const unsigned char* b = static_cast<const unsigned char*>(in->data);
        for (size_t i = 0; i < ffi::GetDataSize(*in); ++i) seed = seed * 31 + b[i];
      }
      DLTensor* out = args[args.size() - 1].cast<DLTensor*>();
      unsigned char* o = static_cast<unsigned char*>(out->data);
      for (size_t i = 0; i < ffi::GetDataSize(*out); ++i) o[i] = (seed >> (i % 24)) + i * 37;
    }), true);
  }
  ffi::Module lib = ffi::Module::LoadFromFile(argv[1]);
  ffi::Module vm = lib->GetFunction("vm_load_executable").value()().cast<ffi::Module>();
  vm->GetFunction("vm_initialization").value()(1, 0, 2);
  std::vector<int64_t> dims;
  std::stringstream shape(argv[3]);
  for (std::string d; std::getline(shape, d, 'x');) dims.push_back(std::atoll(d.c_str()));
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  ffi::Tensor x = ffi::Tensor::FromNDAlloc(CPUNDAlloc(), ffi::Shape(dims),
                                           DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  float* xd = static_cast<float*>(x.GetDLTensorPtr()->data);
  for (int64_t i = 0; i < n; ++i) xd[i] = 3.0f * std::sin(0.7f * i);
  ffi::Any out = vm->GetFunction("main").value()(x);
  ffi::Tensor y = out.cast<ffi::Tensor>();
  const unsigned char* yb = static_cast<const unsigned char*>(y.GetDLTensorPtr()->data);
  for (size_t i = 0; i < ffi::GetDataSize(*y.GetDLTensorPtr()); ++i) std::printf("%02x", yb[i]);
  std::printf("\n");
  return 0;
}
