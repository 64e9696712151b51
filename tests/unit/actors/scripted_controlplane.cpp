#include "scripted_controlplane.hpp"

#include <caf/send.hpp>

namespace guestflow::test {

call_script::mode script::take(const std::string& op) {
  auto i = calls.find(op);
  if (i == calls.end() || i->second.how == call_script::mode::ok) return call_script::mode::ok;
  auto how = i->second.how;
  last_code = i->second.code;
  if (i->second.times > 0 && --i->second.times == 0) calls.erase(i);
  return how;
}

fake_guest* script::by_id(const std::string& id) {
  for (auto& g : guests)
    if (g.id == id) return &g;
  return nullptr;
}

void script::wake(const std::string& id) {
  if (auto* g = by_id(id); g && !g->deletes && g->status == sandbox_status::stopped) {
    log.push_back("wake " + id);
    g->status = sandbox_status::running;
  }
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
    if (g.name == name) n += g.deletes;
  return n;
}

int script::count(const std::string& prefix) const {
  int n = 0;
  for (auto& line : log)
    n += line.rfind(prefix, 0) == 0;
  return n;
}

namespace {

sandbox_view view_of(const fake_guest& g) {
  sandbox_view v;
  v.id = g.id;
  v.name = g.name;
  v.created_at = g.created_at;
  v.status = g.deletes ? sandbox_status::destroyed : g.status;
  v.egress = g.egress;
  v.paused_at = g.paused_at;
  v.last_resumed_at = g.last_resumed_at;
  v.isolation = g.isolation;
  return v;
}

caf::error failure_of(const script& s, const std::string& op) {
  return make_error(s.last_code, "scripted " + op + " failure");
}

/// A delete as the script says; the guarded delete is the same (the script's guests have
/// no calls in progress).
caf::result<sandbox_deleted>
scripted_delete(controlplane_actor::stateful_pointer<scripted_state> self,
                const std::string& id) {
  using mode = call_script::mode;
  auto& s = *self->state.s;
  s.log.push_back("delete " + id);
  auto how = s.take("delete");
  if (how == mode::fail) return failure_of(s, "delete");
  if (how == mode::hang)
    return self->make_response_promise<caf::typed_response_promise<sandbox_deleted>>();
  auto* g = s.by_id(id);
  if (!g || g->deletes) return make_error(ec::not_found, "no such sandbox");
  ++g->deletes;
  return sandbox_deleted{id, sandbox_status::destroyed};
}

} // namespace

controlplane_actor::behavior_type
scripted_controlplane(controlplane_actor::stateful_pointer<scripted_state> self,
                      std::shared_ptr<script> sp) {
  self->state.s = sp;
  using mode = call_script::mode;
  return {
      [self](create_atom,
             sandbox_create_request& req) -> caf::typed_response_promise<sandbox_created> {
        auto& s = *self->state.s;
        auto rp = self->make_response_promise<caf::typed_response_promise<sandbox_created>>();
        s.log.push_back("create " + req.name.value_or(""));
        auto how = s.take("create");
        if (how == mode::fail) {
          rp.deliver(failure_of(s, "create"));
          return rp;
        }
        if (s.appear_on_create) {
          s.guests.push_back(*s.appear_on_create);
          s.appear_on_create.reset();
        }
        for (auto& other : s.guests)
          if (req.name && other.name == *req.name && !other.deletes) {
            rp.deliver(
                make_error(ec::bad_request,
                           "name '" + other.name + "' is taken by live sandbox " + other.id));
            return rp;
          }
        fake_guest g;
        g.id = "sb-" + std::to_string(++s.next_id);
        g.name = req.name.value_or("");
        g.egress = req.egress;
        s.guests.push_back(g);
        if (how == mode::hang) {
          s.held_create = rp; // answer lost: the guest exists, the caller never hears of it
          return rp;
        }
        sandbox_created c;
        c.id = g.id;
        c.name = g.name;
        c.egress = g.egress;
        rp.deliver(std::move(c));
        return rp;
      },
      [self](get_atom, std::string& id) -> caf::result<sandbox_view> {
        auto& s = *self->state.s;
        s.log.push_back("get " + id);
        if (s.take("get") == mode::fail) return failure_of(s, "get");
        auto* g = s.by_id(id);
        if (!g || g->deletes) return make_error(ec::not_found, "no such sandbox");
        auto v = view_of(*g);
        // A guest in between settles on the next look (a resume or create finishing).
        if (g->status == sandbox_status::resuming || g->status == sandbox_status::creating)
          g->status = sandbox_status::running;
        return v;
      },
      [self](list_atom, std::string&) -> caf::result<sandbox_list> {
        auto& s = *self->state.s;
        s.log.push_back("list");
        if (s.take("list") == mode::fail) return failure_of(s, "list");
        sandbox_list out;
        for (auto& g : s.guests)
          out.data.push_back(view_of(g));
        out.total = out.data.size();
        return out;
      },
      [self](put_atom, std::string& id, std::string& path, shared_bytes&) -> caf::result<bool> {
        auto& s = *self->state.s;
        s.log.push_back("put " + id + " " + path);
        auto how = s.take("put");
        if (how == mode::fail) {
          if (auto* g = s.by_id(id); g && s.last_code == ec::paused)
            g->status = sandbox_status::paused;
          return failure_of(s, "put");
        }
        if (how == mode::hang)
          return self->make_response_promise<caf::typed_response_promise<bool>>();
        s.wake(id);
        if (auto* g = s.by_id(id); g && g->status != sandbox_status::running)
          return make_error(ec::paused, "sandbox is paused");
        return true;
      },
      [self](fetch_atom, std::string& id, std::string& path,
             uint64_t cap) -> caf::result<std::string> {
        auto& s = *self->state.s;
        s.log.push_back("fetch " + id + " " + path);
        if (s.take("fetch") == mode::fail) return failure_of(s, "fetch");
        if (s.fetch_reply.size() > cap)
          return make_error(ec::artifact_too_large, "over the cap");
        return s.fetch_reply;
      },
      [self](exec_atom, std::string& id, exec_request& req,
             uint64_t) -> caf::result<exec_result> {
        auto& s = *self->state.s;
        s.log.push_back("exec " + id);
        s.exec_cmds.push_back(req);
        auto how = s.take("exec");
        if (how == mode::fail) {
          // A paused answer means auto-pause got there first: the guest is paused now.
          if (auto* g = s.by_id(id); g && s.last_code == ec::paused)
            g->status = sandbox_status::paused;
          return failure_of(s, "exec");
        }
        if (how == mode::hang)
          return self->make_response_promise<caf::typed_response_promise<exec_result>>();
        s.wake(id);
        if (auto* g = s.by_id(id); g && g->status != sandbox_status::running)
          return make_error(ec::paused, "sandbox is paused");
        if (!s.exec_replies.empty()) {
          auto r = std::move(s.exec_replies.front());
          s.exec_replies.pop_front();
          return r;
        }
        return s.exec_reply;
      },
      [self](stream_atom, std::string& id, exec_request&, uint64_t,
             exec_sink_actor& sink) -> caf::result<int32_t> {
        auto& s = *self->state.s;
        s.log.push_back("stream " + id);
        auto how = s.take("stream");
        if (how == mode::fail) return failure_of(s, "stream");
        for (auto& line : s.stream_lines)
          self->send(sink, line);
        if (how == mode::hang)
          return self->make_response_promise<caf::typed_response_promise<int32_t>>();
        return s.stream_exit;
      },
      [self](cancel_atom, const exec_sink_actor&) { self->state.s->log.push_back("cancel"); },
      [self](resume_atom, std::string& id) -> caf::result<sandbox_view> {
        auto& s = *self->state.s;
        s.log.push_back("resume " + id);
        if (s.take("resume") == mode::fail) return failure_of(s, "resume");
        auto* g = s.by_id(id);
        if (!g || g->deletes) return make_error(ec::not_found, "no such sandbox");
        if (g->status == sandbox_status::paused) {
          g->status = s.resume_to;
          g->last_resumed_at = "2020-01-03T00:00:00Z";
        }
        return view_of(*g);
      },
      // A persistent guest's stop: the next exec or file call wakes it (below).
      [self](stop_atom, std::string& id) -> caf::result<sandbox_view> {
        auto& s = *self->state.s;
        s.log.push_back("stop " + id);
        if (s.take("stop") == mode::fail) return failure_of(s, "stop");
        auto* g = s.by_id(id);
        if (!g || g->deletes) return make_error(ec::not_found, "no such sandbox");
        g->status = sandbox_status::stopped;
        return view_of(*g);
      },
      [self](delete_atom, std::string& id) { return scripted_delete(self, id); },
      // The script's guests have no calls in progress: the guarded delete is the delete.
      [self](delete_atom, std::string& id, uint32_t) { return scripted_delete(self, id); },
      [self](egress_atom, std::string& id) -> caf::result<egress_body> {
        auto& s = *self->state.s;
        s.log.push_back("egress " + id);
        if (s.take("egress") == mode::fail) return failure_of(s, "egress");
        auto* g = s.by_id(id);
        if (!g || g->deletes) return make_error(ec::not_found, "no such sandbox");
        return egress_body{g->egress};
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
