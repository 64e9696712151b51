#include "messages/result_text.hpp"

#include <rapidjson/document.h>

namespace guestflow {

std::vector<std::string> output_texts(const std::vector<run_outputs>& outs) {
  std::vector<std::string> texts;
  for (const auto& run : outs) {
    for (const auto& data : run.outputs) {
      if (!data || data->results.empty()) continue;
      rapidjson::Document doc;
      doc.Parse(data->results.text.data(), data->results.text.size());
      if (doc.HasParseError() || !doc.IsObject()) continue;
      for (const auto& member : doc.GetObject()) {
        const auto& v = member.value;
        if (v.IsString()) {
          texts.emplace_back(v.GetString(), v.GetStringLength());
        } else if (v.IsObject()) {
          auto t = v.FindMember("text");
          if (t != v.MemberEnd() && t->value.IsString())
            texts.emplace_back(t->value.GetString(), t->value.GetStringLength());
        }
      }
    }
  }
  return texts;
}

} // namespace guestflow
