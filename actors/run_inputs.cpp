#include "actors/run_inputs.hpp"

#include <algorithm>
#include <iterator>
#include <spdlog/spdlog.h>

namespace guestflow {
namespace {

template<size_t N>
bool one_of(const std::string& key, const char* const (&names)[N]) {
  return std::any_of(std::begin(names), std::end(names),
                     [&](const char* n) { return key == n; });
}

/// Fails closed on a forwarded value of the wrong type: the guest would otherwise raise
/// deep inside lfx, far from the caller's mistake.
std::optional<failure> check_forwarded(const json_member& m) {
  auto t = type_of(m.value);
  auto bad = [&](const char* expected) {
    return fail(ec::bad_request, "runtime_options." + m.key + ": expected " + expected +
                                     ", got " + m.value.text.substr(0, 64));
  };
  if (m.key == "max_iterations" &&
      (t != json_type::integer || m.value.text[0] == '-' || m.value.text == "0"))
    return bad("a positive integer");
  if (m.key == "config" && t != json_type::object) return bad("an object");
  if ((m.key == "reset_output_values" || m.key == "fallback_to_env_vars") &&
      t != json_type::boolean)
    return bad("true or false");
  return std::nullopt;
}

} // namespace

result<normalized_inputs> run_inputs::normalize(const raw_json& inputs,
                                                const raw_json& runtime_options) {
  normalized_inputs out;
  auto members = decode_members(runtime_options, "runtime_options");
  if (!members) return members.error();
  raw_json initial;
  std::vector<json_member> forward;
  for (auto& m : *members) {
    if (m.key == "initial_inputs") {
      initial = m.value;
    } else if (one_of(m.key, run_inputs::dropped)) {
      spdlog::debug("flow run: runtime_options.{} dropped (event_manager cannot cross a "
                    "process boundary; a session is the request's session_id)",
                    m.key);
      out.dropped.push_back(m.key);
    } else if (one_of(m.key, run_inputs::forwarded)) {
      if (type_of(m.value) == json_type::null) continue;
      if (auto err = check_forwarded(m)) return *err;
      forward.push_back(m);
    } else {
      out.ignored.push_back(m.key);
    }
  }
  out.runtime_options = encode_members(forward);

  auto seam = decode_run_inputs(inputs, "inputs");
  if (!seam) return seam.error();
  auto from_options = decode_run_inputs(initial, "runtime_options.initial_inputs");
  if (!from_options) return from_options.error();
  if (!seam->empty() && !from_options->empty() && *seam != *from_options)
    return fail(ec::bad_request,
                "inputs and runtime_options.initial_inputs both carry inputs and they differ; "
                "send one of them");
  if (!from_options->empty()) {
    out.inputs = std::move(*from_options);
    out.inputs_from = "runtime_options.initial_inputs";
  } else if (!seam->empty()) {
    out.inputs = std::move(*seam);
    out.inputs_from = "inputs";
  }
  return out;
}

} // namespace guestflow
