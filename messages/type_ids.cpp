#include "messages/type_ids.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace guestflow {
namespace {

constexpr uint8_t max_ec = static_cast<uint8_t>(last_ec);

std::string context_text(const caf::message& ctx) {
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) return ctx.get_as<std::string>(0);
  return ctx.empty() ? std::string{} : to_string(ctx);
}

} // namespace

caf::error make_error(ec code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

failure to_failure(const caf::error& err) {
  if (!err) return fail(ec::guest_failed, "no error was set");
  if (err.category() == error_category) {
    auto code = err.code();
    auto x = code >= 1 && code <= max_ec ? static_cast<ec>(code) : ec::guest_failed;
    return fail(x, context_text(err.context()));
  }
  // CAF's own errors: a request that timed out may succeed if retried; anything else
  // (dead or unreachable actors, bad messages) means the collaborator cannot be used.
  if (err.category() == caf::atom("system") &&
      static_cast<caf::sec>(err.code()) == caf::sec::request_timeout)
    return fail(ec::transient, to_string(err));
  return fail(ec::unavailable, to_string(err));
}

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::guestflow>();
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = "guestflow::";
                           out += code >= 1 && code <= max_ec ? to_string(static_cast<ec>(code))
                                                              : std::string_view{"unknown"};
                           auto text = context_text(ctx);
                           if (!text.empty()) {
                             out += ": ";
                             out += text;
                           }
                           return out;
                         });
}

} // namespace guestflow
