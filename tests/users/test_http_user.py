"""The HTTP LLM user against a local OpenAI-compatible server on 127.0.0.1 (http.server in a thread):
a good reply, retries after 500, garbage, timeouts, a refused request; a failed reply ends the
episode marked failed without raising."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from training.benches.base import Fact, Task, UserState
from training.benches.usergym.intention import IntentionEnv
from training.users.http import HTTPLLMUser, completions_url
from training.users.llm import LLMUserConfigError

TASK = Task("i1", "intention", "train", "Plan a trip.", (Fact("d0", "detail", "Budget: 500 dollars.", ("budget",), 3),),
            {"category": "Travel", "task": "Plan a trip."})


class Server:
    """Serves `script`: a list of behaviours, one per request ("ok", "500", "garbage", "slow", "400")."""

    def __init__(self, script):
        self.script, self.requests = list(script), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                mode = outer.script.pop(0) if outer.script else "ok"
                if mode == "slow":
                    threading.Event().wait(0.6)
                    mode = "ok"
                if mode in ("500", "400"):
                    self.send_response(int(mode))
                    self.end_headers()
                    self.wfile.write(b"broken")
                    return
                payload = b"<html>not json" if mode == "garbage" else json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": " My budget is 500 dollars. "}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def state(temperature=0.3):
    return UserState(gym="intention", task=TASK, turn=1, agent_message="What is your budget?",
                     history=[{"role": "agent", "content": "What is your budget?"}], revealed={},
                     knobs={"temperature": temperature}, extra={"act": "action", "user_role": "You are a user."})


def user(url, **kw):
    return HTTPLLMUser(url, "sim-user", "sk-test", timeout_s=kw.pop("timeout_s", 2.0), backoff_s=0.01, **kw)


def test_good_reply_sends_a_chat_completion():
    with Server(["ok"]) as srv:
        reply = user(srv.url).respond(state(0.3))
    assert reply.text == "My budget is 500 dollars." and reply.arm == "llm" and not reply.failed
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "sim-user" and req["body"]["temperature"] == 0.3
    assert req["body"]["messages"][0]["role"] == "system" and "Budget: 500 dollars." in req["body"]["messages"][0]["content"]
    assert req["body"]["messages"][-1] == {"role": "user", "content": "What is your budget?"}


def test_a_repetition_penalty_fails_the_reply_saying_why_and_sends_nothing():
    """A server's repetition_penalty would act on the whole conversation, the hidden facts of the
    prompt included: user.<gym>.repetition_penalty is for the local user, and says so here."""
    penalised = state(0.3)
    penalised = UserState(**{**penalised.__dict__, "knobs": {"temperature": 0.3, "repetition_penalty": 1.3}})
    with Server(["ok"]) as srv:
        reply = user(srv.url).respond(penalised)
    assert reply.failed and srv.requests == []
    assert "has no repetition penalty on the reply alone (user.<gym>.repetition_penalty is 1.3)" \
        in reply.error


def test_500_then_ok_is_retried():
    with Server(["500", "500", "ok"]) as srv:
        reply = user(srv.url, retries=2).respond(state())
    assert not reply.failed and len(srv.requests) == 3


@pytest.mark.parametrize("mode, words", [("500", "HTTP 500"), ("garbage", "not a chat completion")])
def test_persistent_failure_is_a_failed_reply_with_a_clear_error(mode, words):
    with Server([mode] * 3) as srv:
        reply = user(srv.url, retries=2).respond(state())
    assert reply.failed and words in reply.error and "3 attempts" in reply.error and len(srv.requests) == 3


def test_timeout_is_retried_then_fails():
    with Server(["slow", "slow"]) as srv:
        reply = user(srv.url, retries=1, timeout_s=0.2).respond(state())
    assert reply.failed and "timed out" in reply.error


def test_client_error_is_not_retried():
    with Server(["400"]) as srv:
        reply = user(srv.url, retries=3).respond(state())
    assert reply.failed and "HTTP 400" in reply.error and len(srv.requests) == 1


def test_unreachable_server_fails_the_reply():
    reply = user("http://127.0.0.1:9/v1", retries=1).respond(state())
    assert reply.failed and "connection" in reply.error


def test_failed_reply_ends_the_episode_marked_failed():
    with Server(["500"] * 2) as srv:
        env = IntentionEnv(TASK, {"env": {"intention": {"max_steps": 5}}, "user": {"intention": {}}},
                           user(srv.url, retries=1), seed=0, user_arm="llm")
        env.reset()
        obs, reward, terminated, truncated, info = env.step("[action] What is your budget?")
    assert terminated and info["user_failed"] and not info["success"] and "could not reply" in obs


def test_batch_is_answered_concurrently_in_order():
    with Server(["ok"] * 4) as srv:
        replies = user(srv.url).respond_batch([state(), state(), state(), state()])
    assert [r.failed for r in replies] == [False] * 4 and len(srv.requests) == 4


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234")
    monkeypatch.setenv("OPENAI_MODEL", "m")
    u = HTTPLLMUser()
    assert u.url == "http://127.0.0.1:1234/v1/chat/completions" and u.model == "m"
    assert completions_url("http://h/v1/") == "http://h/v1/chat/completions"
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("EAU_USER_BASE_URL", raising=False)
    with pytest.raises(LLMUserConfigError, match="base URL"):
        HTTPLLMUser()
