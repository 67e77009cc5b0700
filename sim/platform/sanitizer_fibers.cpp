#include "sim/platform/sanitizer_fibers.h"

#ifdef KVTIER_ASAN
#include <dlfcn.h>
#include <sanitizer/common_interface_defs.h>
#include <ucontext.h>

#include <cstddef>

namespace {

// ASan's protocol: __sanitizer_start_switch_fiber names the stack about to
// run, __sanitizer_finish_switch_fiber on that stack completes the switch and
// reports the stack left. A new actor starts in SimGrid's entry function, not
// in a return from swapcontext: its switch is completed when it first
// switches away. Until then ASan finds its stack as the one being switched to.
bool g_switching = false;

// Maestro's stack (the main thread's): its ucontext was never made by
// makecontext and names no stack. The first switch of the process is
// maestro's into an actor, and completing it reports maestro's stack.
bool g_maestro_known = false;
const void* g_maestro_bottom = nullptr;
size_t g_maestro_size = 0;

void finish_switch(void* fake_stack) {
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
  g_switching = false;
  if (!g_maestro_known) {
    g_maestro_known = true;
    g_maestro_bottom = bottom;
    g_maestro_size = size;
  }
}

}  // namespace

namespace kvtier {
const char* context_factory_option() { return "--cfg=contexts/factory:ucontext"; }
}  // namespace kvtier

// libsimgrid's ucontext factory switches actors with swapcontext, which the
// binary exports (ASan's link lists it for its own interceptor, which this
// definition replaces): every switch SimGrid makes is announced here.
extern "C" int swapcontext(ucontext_t* from, const ucontext_t* to) {
  using Swap = int (*)(ucontext_t*, const ucontext_t*);
  static const Swap real = reinterpret_cast<Swap>(dlsym(RTLD_NEXT, "swapcontext"));
  if (g_switching) finish_switch(nullptr);  // a new actor's first switch away
  const void* bottom = to->uc_stack.ss_sp;
  size_t size = to->uc_stack.ss_size;
  if (size == 0) {  // back to maestro
    bottom = g_maestro_bottom;
    size = g_maestro_size;
  }
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  g_switching = true;
  const int r = real(from, to);
  finish_switch(fake_stack);
  return r;
}

#else

namespace kvtier {
const char* context_factory_option() { return nullptr; }
}  // namespace kvtier

#endif
