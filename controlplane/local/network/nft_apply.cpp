#include "controlplane/local/network/nft_apply.hpp"

#include "controlplane/local/guests/host_command.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <mutex>
#include <sched.h>
#include <thread>
#include <unistd.h>

namespace guestflow::local {
namespace {

/// The stable C API of libnftables.so.1 (nftables/libnftables.h; the -dev package with the
/// header is not needed for these few calls).
struct nft_ctx;
struct libnftables {
  nft_ctx* (*ctx_new)(uint32_t flags) = nullptr;
  void (*ctx_free)(nft_ctx*) = nullptr;
  int (*buffer_output)(nft_ctx*) = nullptr;
  int (*buffer_error)(nft_ctx*) = nullptr;
  const char* (*error_buffer)(nft_ctx*) = nullptr;
  void (*set_dry_run)(nft_ctx*, bool) = nullptr;
  int (*run)(nft_ctx*, const char*) = nullptr;
  bool loaded = false;
};

const libnftables& library() {
  static libnftables lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = ::dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return;
    auto sym = [h](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      return fn != nullptr;
    };
    lib.loaded = sym(lib.ctx_new, "nft_ctx_new") && sym(lib.ctx_free, "nft_ctx_free") &&
                 sym(lib.buffer_output, "nft_ctx_buffer_output") &&
                 sym(lib.buffer_error, "nft_ctx_buffer_error") &&
                 sym(lib.error_buffer, "nft_ctx_get_error_buffer") &&
                 sym(lib.set_dry_run, "nft_ctx_set_dry_run") &&
                 sym(lib.run, "nft_run_cmd_from_buffer");
  });
  return lib;
}

std::mutex library_mutex;

result<bool> write_sysctls(const nft_options& opt) {
  for (const auto& [path, value] : opt.netns_sysctls)
    if (!write_file(path, value))
      return fail(ec::unavailable, "cannot write " + path + ": " + std::strerror(errno));
  return true;
}

/// Runs in the thread that is in the target namespace.
result<bool> run_with_library(const libnftables& lib, const std::string& script,
                              const nft_options& opt) {
  if (auto ok = write_sysctls(opt); !ok) return ok;
  std::lock_guard<std::mutex> lock{library_mutex};
  nft_ctx* ctx = lib.ctx_new(0);
  if (ctx == nullptr) return fail(ec::unavailable, "libnftables: cannot create a context");
  lib.buffer_output(ctx);
  lib.buffer_error(ctx);
  lib.set_dry_run(ctx, opt.check_only);
  int rc = lib.run(ctx, script.c_str());
  std::string err = rc == 0 ? std::string{} : std::string{lib.error_buffer(ctx)};
  lib.ctx_free(ctx);
  if (rc != 0) {
    while (!err.empty() && err.back() == '\n')
      err.pop_back();
    return fail(ec::unavailable, "nftables refused the rules: " + err);
  }
  return true;
}

result<bool> run_with_tool(const std::string& nft_tool, const std::string& script,
                           const nft_options& opt) {
  command_options c;
  c.input = script;
  c.netns_fd = opt.netns_fd;
  c.netns_sysctls = opt.netns_sysctls;
  std::vector<std::string> argv{nft_tool};
  if (opt.check_only) argv.push_back("-c");
  argv.insert(argv.end(), {"-f", "-"});
  auto out = run_command(argv, c);
  if (!out) return out.error();
  if (out->exit_code != 0)
    return fail(ec::unavailable,
                "nft failed (exit " + std::to_string(out->exit_code) + "): " + out->output);
  return true;
}

} // namespace

result<bool> nft_apply(const std::string& nft_tool, const std::string& script,
                       const nft_options& opt) {
  const auto& lib = library();
  if (!lib.loaded) return run_with_tool(nft_tool, script, opt);
  if (opt.netns_fd < 0) return run_with_library(lib, script, opt);
  // A thread may switch its own network namespace; sockets it opens (libnftables'
  // netlink socket) and /proc/sys/net it opens belong to that namespace.
  result<bool> res = fail(ec::unavailable, "nft thread did not run");
  std::thread t([&] {
    if (::setns(opt.netns_fd, CLONE_NEWNET) != 0) {
      res = fail(ec::unavailable,
                 std::string{"setns into the guest's netns: "} + std::strerror(errno));
      return;
    }
    res = run_with_library(lib, script, opt);
  });
  t.join();
  return res;
}

} // namespace guestflow::local
