#pragma once

/// A system call without libc, for the freestanding programs compiled into the control
/// plane (the guest init and the spawn helper link no libc: no errno, no wrappers). The
/// result is the kernel's: a negative value is -errno.
namespace guestflow::local::freestanding {

inline long raw_syscall(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
#if defined(__x86_64__)
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  long r;
  asm volatile("syscall"
               : "=a"(r)
               : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
               : "rcx", "r11", "memory");
  return r;
#elif defined(__aarch64__)
  register long x8 asm("x8") = n;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  register long x3 asm("x3") = d;
  register long x4 asm("x4") = e;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
#else
#error "guestflow's freestanding programs: unsupported architecture (x86_64 and aarch64 only)"
#endif
}

} // namespace guestflow::local::freestanding
