#include "scripted_controlplane.hpp"

#include <caf/send.hpp>

namespace guestflow::test {

call_script::mode script::take(const std::string& op) {
  auto i = calls.find(op);
  if (i == calls.end() || i->second.how == call_script::mode::ok)
    return call_script::mode::ok;
  auto how = i->second.how;
  last_code = i->second.code;
  if (i->second.times > 0 && --i->second.times == 0)
    calls.erase(i);
  return how;
}

fake_guest* script::by_id(const std::string& id) {
  for (auto& g : guests)
    if (g.id == id)
      return &g;
  return nullptr;
}

size_t script::live() const {
  size_t n = 0;
  for (auto& g : guests)
    n += g.deletes == 0;
  return n;
}

int script::deletes_of_name(const std::string& name) const {
  int n = 0;
  for (auto& g : guests)
    if (g.name == name)
      n += g.deletes;
  return n;
}

namespace {

caf::error failure_of(const script& s, const std::string& op) {
  return make_error(s.last_code, "scripted " + op + " failure");
}

} // namespace

controlplane_actor::behavior_type
scripted_controlplane(controlplane_actor::stateful_pointer<scripted_state> self,
                      std::shared_ptr<script> sp) {
  self->state.s = sp;
  using mode = call_script::mode;
  return {
    [self](create_atom, sandbox_create_request& req)
      -> caf::typed_response_promise<sandbox_created> {
      auto& s = *self->state.s;
      auto rp = self->make_response_promise<caf::typed_response_promise<sandbox_created>>();
      s.log.push_back("create " + req.name.value_or(""));
      auto how = s.take("create");
      if (how == mode::fail) {
        rp.deliver(failure_of(s, "create"));
        return rp;
      }
      fake_guest g{"sb-" + std::to_string(++s.next_id), req.name.value_or(""), {}, 0};
      s.guests.push_back(g);
      if (how == mode::hang) {
        s.held_create = rp; // answer lost: the guest exists, the caller never hears of it
        return rp;
      }
      sandbox_created c;
      c.id = g.id;
      c.name = g.name;
      rp.deliver(std::move(c));
      return rp;
    },
    [self](get_atom, std::string& id) -> caf::result<sandbox_view> {
      auto* g = self->state.s->by_id(id);
      if (!g || g->deletes)
        return make_error(ec::not_found, "no such sandbox");
      sandbox_view v;
      v.id = g->id;
      v.name = g->name;
      v.status = sandbox_status::running;
      return v;
    },
    [self](list_atom, std::string&) -> caf::result<sandbox_list> {
      auto& s = *self->state.s;
      s.log.push_back("list");
      if (s.take("list") == mode::fail)
        return failure_of(s, "list");
      sandbox_list out;
      for (auto& g : s.guests) {
        sandbox_view v;
        v.id = g.id;
        v.name = g.name;
        v.created_at = g.created_at;
        v.status = g.deletes ? sandbox_status::destroyed : sandbox_status::running;
        out.data.push_back(std::move(v));
      }
      out.total = out.data.size();
      return out;
    },
    [self](put_atom, std::string& id, std::string& path, std::string&) -> caf::result<bool> {
      auto& s = *self->state.s;
      s.log.push_back("put " + id + " " + path);
      auto how = s.take("put");
      if (how == mode::fail)
        return failure_of(s, "put");
      if (how == mode::hang)
        return self->make_response_promise<caf::typed_response_promise<bool>>();
      return true;
    },
    [self](fetch_atom, std::string&, std::string&, uint64_t) -> caf::result<std::string> {
      return make_error(ec::not_found, "no files in the script");
    },
    [self](exec_atom, std::string& id, exec_request&, uint64_t) -> caf::result<exec_result> {
      auto& s = *self->state.s;
      s.log.push_back("exec " + id);
      auto how = s.take("exec");
      if (how == mode::fail)
        return failure_of(s, "exec");
      if (how == mode::hang)
        return self->make_response_promise<caf::typed_response_promise<exec_result>>();
      return s.exec_reply;
    },
    [self](stream_atom, std::string& id, exec_request&, uint64_t,
           exec_sink_actor& sink) -> caf::result<int32_t> {
      auto& s = *self->state.s;
      s.log.push_back("stream " + id);
      auto how = s.take("stream");
      if (how == mode::fail)
        return failure_of(s, "stream");
      for (auto& line : s.stream_lines)
        self->send(sink, line);
      if (how == mode::hang)
        return self->make_response_promise<caf::typed_response_promise<int32_t>>();
      return s.stream_exit;
    },
    [self](cancel_atom, const exec_sink_actor&) { self->state.s->log.push_back("cancel"); },
    [self](pause_atom, std::string&) -> caf::result<sandbox_view> {
      return make_error(ec::unavailable, "not scripted");
    },
    [self](resume_atom, std::string&) -> caf::result<sandbox_view> {
      return make_error(ec::unavailable, "not scripted");
    },
    [self](delete_atom, std::string& id) -> caf::result<sandbox_deleted> {
      auto& s = *self->state.s;
      s.log.push_back("delete " + id);
      auto how = s.take("delete");
      if (how == mode::fail)
        return failure_of(s, "delete");
      if (how == mode::hang)
        return self->make_response_promise<caf::typed_response_promise<sandbox_deleted>>();
      auto* g = s.by_id(id);
      if (!g || g->deletes)
        return make_error(ec::not_found, "no such sandbox");
      ++g->deletes;
      return sandbox_deleted{id, sandbox_status::destroyed};
    },
    [self](egress_atom, std::string&) -> caf::result<egress_body> {
      return make_error(ec::unavailable, "not scripted");
    },
    [self](egress_atom, std::string&, egress_policy&) -> caf::result<egress_body> {
      return make_error(ec::unavailable, "not scripted");
    },
    [self](shapes_atom) -> caf::result<shape_list> {
      return make_error(ec::unavailable, "not scripted");
    },
    // Releases a held create with the given answer, on this actor (a promise must be
    // fulfilled from its own actor's context).
    [self](done_atom, uint64_t, caf::message& msg) {
      auto& s = *self->state.s;
      if (s.held_create && msg.match_elements<sandbox_created>()) {
        s.held_create->deliver(msg.get_as<sandbox_created>(0));
        s.held_create.reset();
      }
    },
  };
}

} // namespace guestflow::test
