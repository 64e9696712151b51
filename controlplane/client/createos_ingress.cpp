#include "controlplane/client/createos_ingress.hpp"

#include <string_view>

namespace guestflow::cp {

result<std::string> createos_preview_url(const sandbox_view& v, uint16_t port) {
  if (!v.ingress_enabled || !v.ingress_url_template || v.ingress_url_template->empty())
    return fail(ec::unavailable,
                "CreateOS gives guest " + v.id +
                    " no public URL (it was created without ingress_enabled, or CreateOS "
                    "knows no public domain for it): no service URL can be handed out");
  std::string url = *v.ingress_url_template;
  constexpr std::string_view placeholder = "<port>";
  auto at = url.find(placeholder);
  bool http = url.rfind("http://", 0) == 0;
  bool https = url.rfind("https://", 0) == 0;
  if (at == std::string::npos || !(http || https))
    return fail(ec::unavailable, "CreateOS's ingress_url_template for guest " + v.id +
                                     " is not an http(s) URL with a <port> placeholder: '" +
                                     url + "'");
  // The SDK replaces the first placeholder only (a JavaScript string replace).
  url.replace(at, placeholder.size(), std::to_string(port));
  if (https) url.replace(0, 6, "http:");
  return url;
}

} // namespace guestflow::cp
