#include "sim/platform/sanitizer_fibers.h"

#ifdef KVTIER_ASAN
#include <dlfcn.h>
#include <sanitizer/common_interface_defs.h>

#include <cstddef>
#include <cstdint>
#include <map>

namespace {

// ASan's protocol: __sanitizer_start_switch_fiber names the stack about to
// run, __sanitizer_finish_switch_fiber on that stack completes the switch and
// reports the stack left. A new actor starts in SimGrid's entry function, not
// in a return from jump_fcontext: its switch is completed when it first
// switches away. Until then ASan finds its stack as the one being switched to.
bool g_switching = false;

// Maestro's stack (the main thread's) was not made by make_fcontext. The
// first switch of the process is maestro's into an actor, and completing it
// reports maestro's stack.
bool g_maestro_known = false;
const void* g_maestro_bottom = nullptr;
size_t g_maestro_size = 0;

// Every actor stack make_fcontext was given, by its top (stacks grow down):
// a context names no stack, but its saved state lies on its own.
std::map<uintptr_t, size_t> g_stacks;

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
const char* context_factory_option() { return "--cfg=contexts/factory:boost"; }
}  // namespace kvtier

// Boost.Context's two entry points as libboost_context exports them (C
// linkage; transfer_t is two pointers, returned in registers). The binary
// exports its own (CMakeLists.txt, sanitizer builds), so libsimgrid's calls
// come here first.
struct transfer_t {
  void* fctx;
  void* data;
};

extern "C" void* make_fcontext(void* sp, size_t size, void (*fn)(transfer_t)) {
  using Make = void* (*)(void*, size_t, void (*)(transfer_t));
  static const Make real = reinterpret_cast<Make>(dlsym(RTLD_NEXT, "make_fcontext"));
  const uintptr_t top = reinterpret_cast<uintptr_t>(sp);
  // An ended actor's stack is freed, and its memory may come back as part of
  // a new one: forget every stack the new one overlaps.
  auto it = g_stacks.upper_bound(top - size);
  while (it != g_stacks.end() && it->first - it->second < top) it = g_stacks.erase(it);
  g_stacks[top] = size;
  return real(sp, size, fn);
}

extern "C" transfer_t jump_fcontext(void* const to, void* vp) {
  using Jump = transfer_t (*)(void* const, void*);
  static const Jump real = reinterpret_cast<Jump>(dlsym(RTLD_NEXT, "jump_fcontext"));
  if (g_switching) finish_switch(nullptr);  // a new actor's first switch away
  const uintptr_t p = reinterpret_cast<uintptr_t>(to);
  const void* bottom = g_maestro_bottom;
  size_t size = g_maestro_size;
  auto it = g_stacks.upper_bound(p);
  if (it != g_stacks.end() && p >= it->first - it->second) {
    bottom = reinterpret_cast<const void*>(it->first - it->second);
    size = it->second;
  }
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  g_switching = true;
  const transfer_t r = real(to, vp);
  finish_switch(fake_stack);
  return r;
}

#else

namespace kvtier {
const char* context_factory_option() { return nullptr; }
}  // namespace kvtier

#endif
