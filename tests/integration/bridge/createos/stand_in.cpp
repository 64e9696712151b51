#include "tests/integration/bridge/createos/stand_in.hpp"

#include "messages/json_codec.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/http_client.hpp"

#include <chrono>
#include <regex>

namespace guestflow::testing {

createos_stand_in::createos_stand_in(uint16_t control_plane_port, std::string domain)
    : cp_port_(control_plane_port)
    , domain_(std::move(domain)) {
  server_.fallback([this](gft::exchange& ex) { forward(ex); });
}

void createos_stand_in::set_domain(std::string domain) {
  std::lock_guard<std::mutex> lock{mu_};
  domain_ = std::move(domain);
}

std::string createos_stand_in::template_for(const std::string& id, const std::string& domain) {
  auto ulid = id;
  if (ulid.rfind("sb-", 0) == 0 || ulid.rfind("sb_", 0) == 0) ulid = ulid.substr(3);
  return "https://" + ulid + "-<port>." + domain;
}

std::string createos_stand_in::with_ingress(std::string body, bool view) {
  // CreateOS sends no ingress_secret: that is the local control plane's.
  body = std::regex_replace(body, std::regex{R"re(,"ingress_secret":"[^"]*")re"}, "");
  static const std::regex id{R"re(\{"id":"([^"]*)")re"};
  std::string out;
  auto last = body.cbegin();
  std::lock_guard<std::mutex> lock{mu_};
  for (std::sregex_iterator i{body.cbegin(), body.cend(), id}, end; i != end; ++i) {
    auto guest = (*i)[1].str();
    bool on = ingress_on_.count(guest) > 0;
    out.append(last, (*i)[0].second);
    if (view) out += ",\"ingress_enabled\":" + std::string{on ? "true" : "false"};
    if (on && !domain_.empty())
      out += ",\"ingress_url_template\":\"" + template_for(guest, domain_) + "\"";
    last = (*i)[0].second;
  }
  out.append(last, body.cend());
  return out;
}

void createos_stand_in::forward(gft::exchange& ex) {
  const auto& req = ex.req;
  header_map headers;
  if (auto ct = req.header("content-type"); !ct.empty()) headers["Content-Type"] = ct;
  http_reply r;
  try {
    r = http_client{cp_port_}.call(req.method, req.target, req.body, headers,
                                   std::chrono::seconds{120});
  } catch (const std::exception& e) {
    ex.respond(502, std::string{R"({"status":"error","message":"stand-in: )"} + e.what() +
                        "\",\"code\":502}");
    return;
  }
  bool ok = r.status / 100 == 2;
  bool create = req.method == "POST" && req.path == "/v1/sandboxes";
  bool view = req.method == "GET" && req.path.rfind("/v1/sandboxes", 0) == 0 &&
              req.path.find('/', std::string{"/v1/sandboxes/"}.size()) == std::string::npos;
  if (ok && create) {
    auto asked = decode<sandbox_create_request>(req.body);
    std::smatch m;
    if (asked && asked->ingress_enabled &&
        std::regex_search(r.body, m, std::regex{R"re("data":\{"id":"([^"]*)")re"})) {
      std::lock_guard<std::mutex> lock{mu_};
      ingress_on_.insert(m[1].str());
    }
    r.body = with_ingress(std::move(r.body), false);
  } else if (ok && view) {
    r.body = with_ingress(std::move(r.body), true);
  }
  std::vector<std::pair<std::string, std::string>> out;
  if (auto ct = r.headers.find("content-type"); ct != r.headers.end())
    out.emplace_back("Content-Type", ct->second);
  ex.respond(r.status, std::move(r.body), std::move(out));
}

} // namespace guestflow::testing
