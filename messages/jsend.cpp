#include "messages/jsend.hpp"

#include "messages/json_codec.hpp"

namespace guestflow {

template<>
result<jsend> decode<jsend>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<jsend>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    jsend x;
    auto status = o.str("status");
    if (status == "success")
      x.status = jsend::kind::success;
    else if (status == "fail")
      x.status = jsend::kind::fail;
    else if (status == "error")
      x.status = jsend::kind::error;
    else
      codec::raise(o.at("status"),
                   "expected \"success\", \"fail\" or \"error\", got " + quote_json(status));
    x.data = o.raw_or_empty("data");
    switch (x.status) {
    case jsend::kind::success:
      break;
    case jsend::kind::fail:
      if (auto d = o.find("data"); d != nullptr && d->IsObject()) {
        object_view dv{*d, o.at("data")};
        if (auto m = dv.find("message"); m != nullptr && m->IsString())
          x.message = std::string{m->GetString(), m->GetStringLength()};
      }
      break;
    case jsend::kind::error:
      x.message = o.str("message");
      if (auto c = o.find("code"))
        x.code = codec::as_int(*c, o.at("code"), INT64_MIN, INT64_MAX);
      break;
    }
    return result<jsend>{std::move(x)};
  });
}

std::string encode(const jsend& x) {
  json_writer w;
  w.begin_object();
  switch (x.status) {
  case jsend::kind::success:
  case jsend::kind::fail:
    w.field("status", x.status == jsend::kind::success ? "success" : "fail");
    w.raw_field_if("data", x.data);
    break;
  case jsend::kind::error:
    w.field("status", "error");
    w.field("message", x.message.value_or(std::string{}));
    w.opt_field("code", x.code);
    w.raw_field_if("data", x.data);
    break;
  }
  w.end_object();
  return w.take();
}

std::string jsend_success(std::string_view data_json) {
  std::string out = R"({"status":"success","data":)";
  if (data_json.empty())
    out += "null";
  else
    out.append(data_json.data(), data_json.size());
  out += '}';
  return out;
}

std::string jsend_fail(std::string_view message) {
  json_writer w;
  w.begin_object()
      .field("status", "fail")
      .key("data")
      .begin_object()
      .field("message", message)
      .end_object()
      .end_object();
  return w.take();
}

std::string jsend_error(std::string_view message, int64_t code) {
  json_writer w;
  w.begin_object()
      .field("status", "error")
      .field("message", message)
      .field("code", code)
      .end_object();
  return w.take();
}

} // namespace guestflow
