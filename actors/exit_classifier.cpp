#include "actors/exit_classifier.hpp"

#include "messages/sandbox.hpp"

namespace guestflow {

classified_exit classify_exit(int32_t raw_exit, bool oom_killed) {
  if (raw_exit == 124) return {-1, ec::timeout};
  if (oom_killed) return {raw_exit, ec::oom};
  if (raw_exit != 137) return {raw_exit, std::nullopt};
  return {137, ec::killed};
}

exec_request with_timeout(uint32_t timeout_seconds, std::string cmd,
                          std::vector<std::string> args) {
  exec_request req;
  req.cmd = "timeout";
  req.args = {"--kill-after=5", std::to_string(timeout_seconds), std::move(cmd)};
  for (auto& a : args)
    req.args.push_back(std::move(a));
  return req;
}

} // namespace guestflow
