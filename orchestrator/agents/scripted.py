"""A scripted model endpoint: a local HTTP server that Claude Code and Codex take for their model.

    python -m orchestrator.agents.scripted SCRIPT.json [--port 8765] [--record requests.jsonl]

It speaks the two APIs the pinned CLIs call (scripts/agent_clis.txt), in the shapes read from
their own recorded traffic (claude-code 2.1.332, codex-cli 0.171.0):
- the Anthropic Messages API: `POST /v1/messages?beta=true` with `"stream": true`, answered as
  server-sent events (message_start, content_block_start/delta/stop, message_delta,
  message_stop); Claude Code calls it at `ANTHROPIC_BASE_URL` and first probes `HEAD /api/hello`;
- the OpenAI Responses API: `POST /v1/responses` with `"stream": true`, answered as
  response.created, response.output_item.added/done, response.completed; Codex calls it for a
  custom model provider with `wire_api = "responses"` (the only wire API 0.171.0 accepts) and a
  model name it does not know (`scripted`): for one of OpenAI's (gpt-*) it sends a "lite"
  request without `tools`, which this server takes for a side call.

It replays a script of model turns, each some text and tool calls, the last one text only:

    {"turns": [{"say": "Looking first.", "calls": [{"id": "diagnose", "shell": "python d.py RUN"}]},
               {"calls": [{"id": "knobs", "edit": {"path": "/ws/knobs.json", "old": "..", "new": ".."}}]},
               {"say": "Done."}]}

A call is one of `shell` (a command), `read` (a path), `write` ({path, content}), `edit` ({path,
old, new}) or `tool` ({name, input}: sent as it is); each is written as that CLI's own tool
(Bash/Read/Write/Edit for Claude Code, exec_command for Codex). The turn to answer is worked out
from the request itself (one past the highest turn whose call ids its history carries), so a CLI
that retries a request gets the same turn again. "turns" serve the first conversation (the first
CLI process: both send a session id header with every request); every later one gets the
optional "then" list, or at once the message that the script has ended, so a loop that starts a
second session does not replay the first one's edits. A request without the CLI's shell tool among its
tools (a side call: a title, a summary) gets a one-line text answer and does not advance the
script. Every request is appended to the record as it arrives (one JSON line, credentials
redacted), so a test reads what the CLI sent back: the system prompt, tool results, denials.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError

ACTIONS = ("shell", "read", "write", "edit", "tool")
SIDE_REPLY = "OK."
END_REPLY = "The script has no turns left."
# the shell tool of each API: a request that offers it comes from the CLI's main loop
MAIN_TOOL = {"anthropic": "Bash", "responses": "exec_command"}
SECRET_HEADERS = ("x-api-key", "authorization")
_CALL_ID = re.compile(r"eau_t(\d+)_(\d+)_([A-Za-z0-9_-]*)")


# ----------------------------------------------------------------------------- the script

def load_script(source: str | Path | dict) -> dict[str, list[dict[str, Any]]]:
    """The script's "turns" (the first conversation) and "then" (every later one; none: the
    end-of-script message at once), checked: each turn has text or calls, each call exactly one
    action, and each list ends with a turn of text only."""
    name = "script" if isinstance(source, dict) else str(source)
    if isinstance(source, dict):
        data = source
    else:
        try:
            data = json.loads(Path(source).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot read the model script {name}: {exc}; give a JSON file "
                            f"with a \"turns\" list.") from None
    turns = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(turns, list) or not turns:
        raise UserError(f"{name} has no \"turns\" list: give {{\"turns\": [{{\"say\": ..., "
                        f"\"calls\": [...]}}, ...]}}.")
    then = data.get("then", [])
    if not isinstance(then, list):
        raise UserError(f"{name}: \"then\" must be a list of turns, like \"turns\".")
    for key, seq in (("turns", turns), ("then", then)):
        for t, turn in enumerate(seq):
            if not isinstance(turn, dict) or not (turn.get("say") or turn.get("calls")):
                raise UserError(f"{name}: {key}[{t}] has neither \"say\" text nor \"calls\": give one.")
            for c, call in enumerate(turn.get("calls") or []):
                acts = [a for a in ACTIONS if a in call] if isinstance(call, dict) else []
                if len(acts) != 1:
                    raise UserError(f"{name}: {key}[{t}] call {c} must have exactly one of "
                                    f"{', '.join(ACTIONS)}.")
                if not re.fullmatch(r"[A-Za-z0-9_-]*", str(call.get("id", ""))):
                    raise UserError(f"{name}: {key}[{t}] call {c} id {call['id']!r} may hold only "
                                    f"letters, digits, '_' and '-' (it goes into the tool call id).")
        if seq and seq[-1].get("calls"):
            raise UserError(f"{name}: the last turn of \"{key}\" has calls, so the CLI would wait "
                            f"for a turn that never comes: end with a turn of text only.")
    return {"turns": turns, "then": then}


def call_id(prefix: str, turn: int, index: int, call: dict[str, Any]) -> str:
    return f"{prefix}eau_t{turn}_{index}_{call.get('id', '')}"


def anthropic_tool(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(tool name, input) of one call as Claude Code's tools take it (their input schemas in the
    recorded request's `tools`)."""
    if "shell" in call:
        return "Bash", {"command": call["shell"], "description": call.get("id") or "run a command"}
    if "read" in call:
        return "Read", {"file_path": call["read"]}
    if "write" in call:
        return "Write", {"file_path": call["write"]["path"], "content": call["write"]["content"]}
    if "edit" in call:
        e = call["edit"]
        return "Edit", {"file_path": e["path"], "old_string": e["old"], "new_string": e["new"]}
    return call["tool"]["name"], call["tool"].get("input", {})


_EDIT_PY = ("import json,sys,pathlib; a=json.loads(sys.argv[1]); p=pathlib.Path(a['path']); "
            "t=p.read_text(); sys.exit('old text not found') if a['old'] not in t else "
            "p.write_text(t.replace(a['old'], a['new'], 1))")


def codex_tool(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) of one call as Codex takes it: everything through its shell tool
    `exec_command` (0.171.0 offers no apply_patch tool to a model it has no metadata for)."""
    if "tool" in call:
        return call["tool"]["name"], call["tool"].get("input", {})
    if "shell" in call:
        cmd = call["shell"]
    elif "read" in call:
        cmd = f"cat {shlex.quote(call['read'])}"
    elif "write" in call:
        w = call["write"]
        cmd = f"cat > {shlex.quote(w['path'])} <<'EAU_EOF'\n{w['content']}\nEAU_EOF"
    else:
        cmd = f"python3 -c {shlex.quote(_EDIT_PY)} {shlex.quote(json.dumps(call['edit']))}"
    return "exec_command", {"cmd": cmd}


# ----------------------------------------------------------------------------- reading requests

def history_turn(body: dict[str, Any]) -> int:
    """The script turn a request asks for: one past the highest turn of the call ids in it."""
    seen = [int(m.group(1)) for m in _CALL_ID.finditer(json.dumps(body))]
    return max(seen) + 1 if seen else 0


def is_main(api: str, body: dict[str, Any]) -> bool:
    names = set()
    for tool in body.get("tools") or []:
        names.add(tool.get("name"))
        names.update(t.get("name") for t in tool.get("tools") or [])   # Codex's tool namespaces
    return MAIN_TOOL[api] in names


def request_text(body: dict[str, Any]) -> str:
    """All the text a request shows the model: system prompt, instructions and messages."""
    parts: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, str):
            parts.append(x)
        elif isinstance(x, list):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for k in ("text", "content", "output", "instructions", "system", "messages", "input"):
                if k in x:
                    walk(x[k])

    walk(body)
    return "\n".join(parts)


def tool_results(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the CLI sent back for each scripted call, by the call's `id`: {"text", "is_error"}
    (Codex marks no errors: its output text carries the exit code)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        body = rec.get("body") or {}
        items = [b for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                 for b in m["content"]] + list(body.get("input") or [])
        for item in items:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "tool_result":
                ref, content, err = item.get("tool_use_id", ""), item.get("content"), bool(item.get("is_error"))
            elif item.get("type") in ("function_call_output", "custom_tool_call_output"):
                ref, content, err = item.get("call_id", ""), item.get("output"), False
            else:
                continue
            m = _CALL_ID.search(ref)
            if m:
                text = content if isinstance(content, str) else request_text({"content": content})
                out[m.group(3)] = {"text": text, "is_error": err}
    return out


def read_record(path: Path | str) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ----------------------------------------------------------------------------- the answers

def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_events(turn: dict[str, Any], index: int, model: str) -> list[bytes]:
    """One assistant message as Anthropic's stream: text block, then one tool_use block per call."""
    msg_id = f"msg_eau_{index}_{int(time.time() * 1000)}"
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    out = [_sse("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage}})]
    blocks: list[tuple[dict, dict]] = []
    if turn.get("say"):
        blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": turn["say"]}))
    for i, call in enumerate(turn.get("calls") or []):
        name, inp = anthropic_tool(call)
        blocks.append(({"type": "tool_use", "id": call_id("toolu_", index, i, call), "name": name,
                        "input": {}}, {"type": "input_json_delta", "partial_json": json.dumps(inp)}))
    for b, (start, delta) in enumerate(blocks):
        out += [_sse("content_block_start", {"type": "content_block_start", "index": b,
                                             "content_block": start}),
                _sse("content_block_delta", {"type": "content_block_delta", "index": b, "delta": delta}),
                _sse("content_block_stop", {"type": "content_block_stop", "index": b})]
    stop = "tool_use" if turn.get("calls") else "end_turn"
    out += [_sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 20}}),
            _sse("message_stop", {"type": "message_stop"})]
    return out


def anthropic_message(turn: dict[str, Any], index: int, model: str) -> dict:
    """The same message, not streamed (a request without `"stream": true`)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": turn["say"]}] if turn.get("say") else []
    for i, call in enumerate(turn.get("calls") or []):
        name, inp = anthropic_tool(call)
        content.append({"type": "tool_use", "id": call_id("toolu_", index, i, call), "name": name,
                        "input": inp})
    return {"id": f"msg_eau_{index}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_sequence": None,
            "stop_reason": "tool_use" if turn.get("calls") else "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 20}}


def responses_events(turn: dict[str, Any], index: int, model: str) -> list[bytes]:
    """One model turn as the Responses API's stream: a message item, then one function_call item
    per call, then response.completed carrying them all."""
    resp_id = f"resp_eau_{index}_{int(time.time() * 1000)}"
    items: list[dict[str, Any]] = []
    if turn.get("say"):
        items.append({"type": "message", "id": f"msg_eau_{index}", "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": turn["say"], "annotations": []}]})
    for i, call in enumerate(turn.get("calls") or []):
        name, args = codex_tool(call)
        items.append({"type": "function_call", "id": f"fc_eau_{index}_{i}", "status": "completed",
                      "call_id": call_id("call_", index, i, call), "name": name,
                      "arguments": json.dumps(args)})
    base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model}
    out = [_sse("response.created", {"type": "response.created",
                                     "response": {**base, "status": "in_progress", "output": []}})]
    for n, item in enumerate(items):
        out.append(_sse("response.output_item.added",
                        {"type": "response.output_item.added", "output_index": n, "item": item}))
        if item["type"] == "message":
            out.append(_sse("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": item["id"], "output_index": n,
                "content_index": 0, "delta": turn["say"]}))
        out.append(_sse("response.output_item.done",
                        {"type": "response.output_item.done", "output_index": n, "item": item}))
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 30}
    out.append(_sse("response.completed", {"type": "response.completed", "response": {
        **base, "status": "completed", "output": items, "usage": usage}}))
    return out


# ----------------------------------------------------------------------------- the server

class ScriptedEndpoint:
    """The server, in a thread of this process: `with ScriptedEndpoint(turns, record) as ep:`
    then point the CLI at `ep.url` (Claude Code) or `ep.url + "/v1"` (Codex's base_url).
    `status` makes every model request fail with that HTTP status (a bad key: 401)."""

    def __init__(self, script: str | Path | dict, record: Path | str, *, host: str = "127.0.0.1",
                 port: int = 0, status: int = 200):
        loaded = load_script(script)
        self.turns, self.then = loaded["turns"], loaded["then"]
        self.conversations: dict[str, int] = {}
        self.record = Path(record)
        self.record.parent.mkdir(parents=True, exist_ok=True)
        self.status = status
        self._lock = threading.Lock()
        self._count = 0
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "ScriptedEndpoint":
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-endpoint",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "ScriptedEndpoint":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests(self) -> list[dict[str, Any]]:
        return read_record(self.record)

    def log(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._count += 1
            entry = {"n": self._count, "time": time.time(), **entry}
            with open(self.record, "a") as f:      # one line per request, flushed as it comes
                f.write(json.dumps(entry) + "\n")

    def conversation(self, headers: dict[str, str]) -> int:
        """0 for the first conversation seen, 1 for the next...: each CLI process is one, named
        by the session id header it sends with every request (X-Claude-Code-Session-Id from
        Claude Code, session-id from Codex)."""
        lower = {k.lower(): v for k, v in headers.items()}
        key = lower.get("x-claude-code-session-id") or lower.get("session-id") or ""
        with self._lock:
            return self.conversations.setdefault(key, len(self.conversations))

    def answer(self, api: str, body: dict[str, Any], conversation: int
               ) -> tuple[int | None, dict[str, Any], str]:
        """(the turn's index, None for a side call; the turn; what the record says of it)."""
        if not is_main(api, body):
            return None, {"say": SIDE_REPLY}, SIDE_REPLY
        turns = self.turns if conversation == 0 else self.then
        index = history_turn(body)
        if index >= len(turns):
            return index, {"say": END_REPLY}, END_REPLY
        return index, turns[index], "turn"


def _handler(ep: ScriptedEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: the connection closes after each answer, which ends an event stream without
        # a chunked encoding (both CLIs' HTTP clients read a stream to its close)
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:       # the record is the log
            pass

        def _body(self) -> tuple[dict[str, Any] | None, str]:
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n).decode(errors="replace") if n else ""
            try:
                return (json.loads(raw) if raw else {}), raw
            except json.JSONDecodeError:
                return None, raw

        def _headers(self) -> dict[str, str]:
            return {k: ("<redacted>" if k.lower() in SECRET_HEADERS else v)
                    for k, v in self.headers.items()}

        def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            if ctype == "application/json":
                self.send_header("content-length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
                self.wfile.flush()

        def do_HEAD(self) -> None:
            ep.log({"api": "other", "method": "HEAD", "path": self.path, "headers": self._headers()})
            self._send(200, b"")

        def do_GET(self) -> None:
            ep.log({"api": "other", "method": "GET", "path": self.path, "headers": self._headers()})
            if self.path.split("?")[0].endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [], "models": []}).encode())
            else:
                self._send(200 if self.path.startswith("/api/hello") else 404, b"{}")

        def do_POST(self) -> None:
            path = self.path.split("?")[0]
            body, raw = self._body()
            api = ("anthropic" if path.endswith("/v1/messages") else
                   "responses" if path.endswith("/responses") else "other")
            entry: dict[str, Any] = {"api": api, "method": "POST", "path": self.path,
                                     "headers": self._headers(),
                                     "body": body if body is not None else raw}
            if path.endswith("/count_tokens"):
                ep.log(entry)
                return self._send(200, json.dumps({"input_tokens": len(raw) // 4}).encode())
            if api == "other" or body is None:
                ep.log({**entry, "reply": "404"})
                return self._send(404, json.dumps({"error": {"message": f"no {path} here"}}).encode())
            if ep.status != 200:
                ep.log({**entry, "reply": f"status {ep.status}"})
                err = {"type": "error", "error": {"type": "authentication_error",
                                                  "message": f"scripted status {ep.status}"}}
                return self._send(ep.status, json.dumps(err).encode())
            conversation = ep.conversation(dict(self.headers))
            index, turn, reply = ep.answer(api, body, conversation)
            ep.log({**entry, "conversation": conversation, "turn": index, "reply": reply})
            model = str(body.get("model") or "scripted")
            n = index if index is not None else 0
            if api == "anthropic" and not body.get("stream"):
                return self._send(200, json.dumps(anthropic_message(turn, n, model)).encode())
            events = (anthropic_events if api == "anthropic" else responses_events)(turn, n, model)
            self._send(200, b"".join(events), "text/event-stream")

    return Handler


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m orchestrator.agents.scripted",
                                description="Serve a script of model turns to Claude Code "
                                            "(ANTHROPIC_BASE_URL) or Codex (a model provider with "
                                            "wire_api \"responses\") and record every request.")
    p.add_argument("script", help="JSON file: {\"turns\": [{\"say\", \"calls\"}, ...]}")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--record", default="scripted-requests.jsonl",
                   help="where each request is appended as one JSON line")
    args = p.parse_args(argv)
    try:
        ep = ScriptedEndpoint(args.script, args.record, port=args.port)
    except UserError as exc:
        print(f"scripted: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"scripted: cannot listen on port {args.port}: {exc.strerror}; pick another --port.",
              file=sys.stderr)
        return 2
    print(f"serving {len(ep.turns)} turns at {ep.url}; recording to {ep.record}\n"
          f"  Claude Code: ANTHROPIC_BASE_URL={ep.url} ANTHROPIC_API_KEY=scripted claude -p ...\n"
          f"  Codex: codex exec -c model=scripted -c model_provider=scripted "
          f"-c 'model_providers.scripted={{name=\"scripted\", base_url=\"{ep.url}/v1\", "
          f"wire_api=\"responses\"}}' ...", flush=True)
    try:
        ep._server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
