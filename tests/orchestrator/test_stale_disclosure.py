"""A user that tells again what it told while the question asks for a fact it never told: the
turn records say what was asked (`asked_facts`), the trainer logs the share (`stale/<gym>`), the
diagnosis names it (`stale_disclosure`), and the built-in agent gives the user one more fact a
reply, replayed before committing. The tau user of the H100 runs of 2026-12-07 said its name to
every "first name, last name and zip code?", and no episode of any run identified its user."""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "agents"))
from episodes import ep, tau_asking_again, turn  # noqa: E402
from runlogs import ROOT  # noqa: E402
from test_builtin_progress import ctx, knobs, last_msg, record, usergym_exp  # noqa: E402

from orchestrator import diagnostics, effects  # noqa: E402
from orchestrator.agents import base  # noqa: E402
from training.users.leak import stale_replies  # noqa: E402

ASK = "[action] Could you tell me your first name, last name and zip code?"


def _tau_replies(tmp_path, facts_per_reply):
    """The shipped TauGym's replies to ASK, asked twice, as turn records' fields."""
    from training.benches.usergym import BENCH
    from training.snapshot import Snapshot
    ws = tmp_path / f"ws{facts_per_reply}"
    shutil.copytree(ROOT / "workspace", ws)
    k = json.loads((ws / "knobs.json").read_text())
    k["user"]["tau"]["facts_per_reply"] = facts_per_reply
    (ws / "knobs.json").write_text(json.dumps(k))
    task = BENCH.load_tasks("train", ["tau"])[0]
    env = BENCH.make_env(task, Snapshot.from_dir(ws), seed=0)
    env.reset()
    out = []
    for _ in range(2):
        obs, _, _, _, info = env.step(ASK)
        out.append({"agent": ASK, "user": obs, "user_replied": info["user_replied"],
                    "revealed_facts": info["revealed_facts"], "asked_facts": info["asked_facts"]})
    return out


def test_the_shipped_tau_user_tells_its_name_again_and_two_facts_a_reply_end_it(tmp_path):
    once = _tau_replies(tmp_path, 1)
    assert [t["asked_facts"] for t in once] == [["name", "zip"], ["name", "zip"]]
    assert [t["user"] for t in once] == ["My name is Maria Rossi."] * 2
    (turn_, again, never), = stale_replies(once)
    assert turn_ is once[1] and again == ["name"] and never == ["zip"]
    twice = _tau_replies(tmp_path, 2)
    assert twice[0]["revealed_facts"] == ["name", "zip"]
    assert stale_replies(twice) == []


def test_a_reply_is_stale_only_when_it_tells_nothing_new_while_an_asked_fact_waits():
    told = turn(ASK, "My name is M.", revealed_facts=["name"], asked_facts=["name", "zip"])
    assert len(stale_replies([told, dict(told)])) == 1
    # the asked fact comes: not stale; nothing asked but the told fact: not stale
    assert stale_replies([told, turn(ASK, "My zip code is 1.", revealed_facts=["zip"],
                                     asked_facts=["name", "zip"])]) == []
    assert stale_replies([told, turn(ASK, "My name is M.", revealed_facts=["name"],
                                     asked_facts=["name"])]) == []
    # a catch-all reply disclosing nothing is another finding's (uninformative_user)
    assert stale_replies([told, turn(ASK, "I'm not sure.", asked_facts=["name", "zip"])]) == []
    # records written before asked_facts existed say nothing
    old = turn(ASK, "My name is M.", revealed_facts=["name"])
    assert stale_replies([old, dict(old)]) == []


def test_the_diagnosis_names_the_stale_user_with_its_share_and_a_quoted_turn():
    found = diagnostics.find_stale_disclosures([tau_asking_again(), tau_asking_again()])
    assert [(f.kind, f.gym) for f in found] == [("stale_disclosure", "tau")]
    f = found[0]
    assert (f.evidence["stale"], f.evidence["disclosing"]) == (4, 6)
    assert f.evidence["told_again"] == {"name": 4} and f.evidence["never_told"] == {"zip": 4}
    assert f.message.startswith("4 of 6 recent tau user replies that disclosed a fact (67%) told "
                                "again one already told (name) while the question also asked for "
                                "one never told (zip); e.g. \"[action] I can help with that.")
    assert f.message.endswith('-> "My name is Maria Rossi.".')
    # one episode's two re-tellings are under the minimum; a user that then tells the zip is fine
    assert diagnostics.find_stale_disclosures([tau_asking_again()]) == []
    fine = tau_asking_again()
    fine["turns"][2].update(user="My zip code is 29267.", revealed_facts=["zip"], new_facts=["zip"])
    fine["turns"][3].update(asked_facts=["name"])
    assert diagnostics.find_stale_disclosures([fine, fine, fine]) == []


def test_the_trainer_logs_the_share_of_disclosing_replies_that_were_stale():
    from training.trainer import episode_metrics
    rec = tau_asking_again() | {"return": 0.0}
    m = episode_metrics([rec])
    assert m["stale/tau"] == 2 / 3
    quiet = ep("travel", [turn("[action] Hello?", "I'm not sure.")]) | {"return": 0.0}
    assert "stale/travel" not in episode_metrics([quiet])     # nothing disclosed: no share


def test_the_builtin_agent_gives_the_stale_user_one_more_fact_a_reply_and_no_repeat_cost(
        tmp_path, monkeypatch):
    exp = usergym_exp(tmp_path, monkeypatch,
                      {s: [tau_asking_again(s), tau_asking_again(s)] for s in (4, 5, 6)})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["user"]["tau"]["facts_per_reply"] == 2
    assert knobs(exp)["reward"]["modules"]["no_repeat"]["enabled"] is False
    msg = last_msg(exp)
    assert msg.startswith("Ease disclosure in tau: user.tau.facts_per_reply 1 -> 2")
    assert "told again one already told (name)" in msg
    # replayed on the recorded turns with the shipped tau task: 6 episodes of 4 turns, the name
    # known after each (24), then the name and the zip code (48)
    assert "Before committing: replayed on the recent tau turns, the facts the symbolic user has " \
           "disclosed, summed over the turns, go 24 -> 48." in msg
    assert "Expect: stale/tau falls, then score/tau rises." in msg
    assert effects.target_of(msg, {}, ["tau", "travel"]) == ("stale/tau", "down")
    # the loop the user causes gets no repeat cost (a change reaching every gym), and the next
    # session, with the same trajectories, says why
    again = base.run_session(ctx(exp, "s002"))
    assert again.commits == [] and knobs(exp)["reward"]["modules"]["no_repeat"]["enabled"] is False
    assert "No repeat cost while the tau user tells again what it told" in record(again)
