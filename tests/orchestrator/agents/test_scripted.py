"""The scripted model endpoint over HTTP, without the CLIs: both APIs' event streams parsed back,
the turn taken from the request's history (a retry gets the same turn), side calls and later
conversations never replay the script, every request recorded with its key redacted, and a bad
script refused in one sentence. (test_real_cli_flags.py and tests/e2e/test_real_cli_sessions.py
run the CLIs.)"""
import json

import httpx
import pytest

from orchestrator.agents import scripted
from orchestrator.errors import UserError

SCRIPT = {"turns": [
    {"say": "Looking.", "calls": [{"id": "diag", "shell": "python d.py /run"},
                                  {"id": "knobs", "read": "/ws/knobs.json"}]},
    {"calls": [{"id": "fix", "edit": {"path": "/ws/knobs.json", "old": "0.001", "new": "0.002"}}]},
    {"say": "Done."}]}


def sse(text: str) -> list[tuple[str, dict]]:
    """(event, data) of every event of a server-sent event stream."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def anthropic(url, messages, session="c1", tools=("Bash", "Read", "Edit")):
    body = {"model": "m", "stream": True, "messages": messages, "tools": [{"name": t} for t in tools]}
    r = httpx.post(f"{url}/v1/messages?beta=true", json=body, timeout=30,
                   headers={"x-api-key": "sk-secret", "X-Claude-Code-Session-Id": session})
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
    return sse(r.text)


def blocks(events):
    """The content blocks of an Anthropic stream, inputs joined from their deltas."""
    out = {}
    for name, data in events:
        if name == "content_block_start":
            out[data["index"]] = dict(data["content_block"])
        elif name == "content_block_delta":
            d = data["delta"]
            key = "text" if d["type"] == "text_delta" else "partial_json"
            out[data["index"]][key] = out[data["index"]].get(key, "") + d[key]
    return [out[i] for i in sorted(out)]


def test_anthropic_stream_replays_the_turns_from_the_history(tmp_path):
    with scripted.ScriptedEndpoint(SCRIPT, tmp_path / "rec.jsonl") as ep:
        first = anthropic(ep.url, [{"role": "user", "content": "go"}])
        again = anthropic(ep.url, [{"role": "user", "content": "go"}])         # a retry
        names = [n for n, _ in first]
        assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
        assert first[-2][1]["delta"]["stop_reason"] == "tool_use"
        text, diag, read = blocks(first)
        assert text == {"type": "text", "text": "Looking."}
        assert diag["name"] == "Bash" and json.loads(diag["partial_json"])["command"] == "python d.py /run"
        assert read["name"] == "Read" and json.loads(read["partial_json"]) == {"file_path": "/ws/knobs.json"}
        assert blocks(again) == blocks(first)
        history = [{"role": "user", "content": "go"},
                   {"role": "assistant", "content": [{"type": "tool_use", "id": diag["id"]},
                                                     {"type": "tool_use", "id": read["id"]}]},
                   {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": diag["id"], "content": "[]"},
                       {"type": "tool_result", "tool_use_id": read["id"], "is_error": True,
                        "content": [{"type": "text", "text": "denied"}]}]}]
        (fix,) = blocks(anthropic(ep.url, history))
        assert fix["name"] == "Edit" and json.loads(fix["partial_json"])["new_string"] == "0.002"
        side = anthropic(ep.url, history, tools=())                              # a title, a summary
        assert blocks(side) == [{"type": "text", "text": scripted.SIDE_REPLY}]
        other = anthropic(ep.url, [{"role": "user", "content": "go"}], session="c2")
        assert blocks(other) == [{"type": "text", "text": scripted.END_REPLY}]
        assert other[-2][1]["delta"]["stop_reason"] == "end_turn"
    rec = scripted.read_record(tmp_path / "rec.jsonl")
    assert [(r["conversation"], r["turn"]) for r in rec] == [(0, 0), (0, 0), (0, 1), (0, None), (1, 0)]
    assert all(r["headers"]["x-api-key"] == "<redacted>" for r in rec)
    assert "sk-secret" not in (tmp_path / "rec.jsonl").read_text()
    assert scripted.tool_results(rec) == {"diag": {"text": "[]", "is_error": False},
                                          "knobs": {"text": "denied", "is_error": True}}


def test_responses_stream_gives_codex_its_exec_command_calls(tmp_path):
    body = {"model": "scripted", "stream": True, "tools": [{"type": "function", "name": "exec_command"}],
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]}
    with scripted.ScriptedEndpoint(SCRIPT, tmp_path / "rec.jsonl") as ep:
        r = httpx.post(f"{ep.url}/v1/responses", json=body, headers={"session-id": "t1"}, timeout=30)
        events = sse(r.text)
        assert [n for n, _ in events][0] == "response.created" and events[-1][0] == "response.completed"
        items = events[-1][1]["response"]["output"]
        assert items[0]["content"][0]["text"] == "Looking."
        calls = [i for i in items if i["type"] == "function_call"]
        assert [c["name"] for c in calls] == ["exec_command", "exec_command"]
        assert json.loads(calls[1]["arguments"]) == {"cmd": "cat /ws/knobs.json"}
        body["input"] += [{"type": "function_call", "call_id": c["call_id"], "name": c["name"],
                           "arguments": c["arguments"]} for c in calls]
        body["input"] += [{"type": "function_call_output", "call_id": calls[0]["call_id"],
                           "output": "Process exited with code 0\nOutput:\n[]"}]
        r = httpx.post(f"{ep.url}/v1/responses", json=body, headers={"session-id": "t1"}, timeout=30)
        (fix,) = sse(r.text)[-1][1]["response"]["output"]
        cmd = json.loads(fix["arguments"])["cmd"]
        assert cmd.startswith("python3 -c ") and '"new": "0.002"' in cmd
    assert scripted.tool_results(ep.requests())["diag"]["text"].endswith("[]")


def test_a_status_answers_every_model_request(tmp_path):
    with scripted.ScriptedEndpoint(SCRIPT, tmp_path / "rec.jsonl", status=401) as ep:
        r = httpx.post(f"{ep.url}/v1/messages", json={"messages": []}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert ep.requests()[0]["reply"] == "status 401"


@pytest.mark.parametrize("script, says", [
    ({}, 'has no "turns" list'),
    ({"turns": [{"calls": [{"shell": "ls"}]}]}, "the last turn of \"turns\" has calls"),
    ({"turns": [{"calls": [{"shell": "ls", "read": "/x"}]}, {"say": "x"}]}, "exactly one of"),
    ({"turns": [{"calls": [{"id": "a b", "shell": "ls"}]}, {"say": "x"}]}, "may hold only"),
    ({"turns": [{}]}, 'neither "say" text nor "calls"'),
    ({"turns": [{"say": "x"}], "then": {"say": "y"}}, '"then" must be a list'),
])
def test_a_bad_script_is_refused_in_one_sentence(script, says, tmp_path):
    with pytest.raises(UserError, match=says) as err:
        scripted.load_script(script)
    assert str(err.value).count(". ") == 0 and str(err.value).endswith(".")
    (tmp_path / "s.json").write_text("{not json")
    assert scripted.main([str(tmp_path / "s.json")]) == 2
