#include "actors/exit_classifier.hpp"

#include "messages/sandbox.hpp"

namespace guestflow {

classified_exit classify_exit(int32_t raw_exit, const std::optional<std::string>& error,
                              uint64_t elapsed_ms, uint32_t timeout_seconds) {
  if (raw_exit == 124) return {-1, ec::timeout};
  if (raw_exit != 137) return {raw_exit, std::nullopt};
  if (error && error->find("out of memory") != std::string::npos) return {137, ec::oom};
  if (elapsed_ms >= uint64_t{timeout_seconds} * 1000) return {-1, ec::timeout};
  return {137, ec::oom};
}

exec_request with_timeout(uint32_t timeout_seconds, std::string cmd,
                          std::vector<std::string> args) {
  exec_request req;
  req.cmd = "timeout";
  req.args = {"--signal=KILL", std::to_string(timeout_seconds), std::move(cmd)};
  for (auto& a : args)
    req.args.push_back(std::move(a));
  return req;
}

} // namespace guestflow
