#pragma once

// Small flows for the CLI's integration tests, written the way Langflow exports them.

#include <string>

namespace guestflow::testing {

inline std::string example(const std::string& name) {
  return std::string{GUESTFLOW_SOURCE_DIR} + "/examples/flows/" + name + ".json";
}

inline std::string node(const std::string& id, const std::string& type,
                        const std::string& template_json) {
  return R"({"id":")" + id + R"(","data":{"type":")" + type + R"(","node":{"display_name":")" +
         id + R"(","template":)" + template_json + "}}}";
}

inline std::string edge(const std::string& from, const std::string& output,
                        const std::string& to, const std::string& field) {
  return R"({"source":")" + from + R"(","target":")" + to +
         R"(","data":{"sourceHandle":{"name":")" + output +
         R"("},"targetHandle":{"fieldName":")" + field + R"("}}})";
}

/// ChatInput → PythonREPLComponent(code) → ChatOutput.
inline std::string python_flow(const std::string& code_json) {
  return R"({"nodes":[)" + node("in", "ChatInput", R"({"input_value":{"value":""}})") + "," +
         node("py", "PythonREPLComponent",
              R"({"global_imports":{"value":""},"python_code":{"value":)" + code_json + "}}") +
         "," + node("out", "ChatOutput", R"({"input_value":{"value":""}})") + R"(],"edges":[)" +
         edge("in", "message", "py", "input_value") + "," +
         edge("py", "results", "out", "input_value") + "]}";
}

} // namespace guestflow::testing
