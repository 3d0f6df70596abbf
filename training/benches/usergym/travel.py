"""TravelGym: plan parts of a trip (flight, hotel, restaurant, car) for a user whose preferences are
hidden; search the database, ask the user, recommend one option per aspect.

Actions: `[search] hotel in Lisbon` lists the options of the aspect the query names; `[action] ...`
speaks to the user; `[answer] H3` recommends option H3. The user wants, per aspect, the cheapest
option that meets all their preferences ("best"); an option that meets them at a higher price is
"acceptable"; "wrong" options break one preference (and are cheaper: tempting); "noise" options are
in another city.

Reward (UserRL's TravelGym semantics): per aspect the best recommendation so far scores 1.0 (best)
or 0.8 (acceptable); a recommendation pays the rise of the mean over aspects of those scores;
preference elicitation is rewarded: a question that names a preference not named before (both its
aspect and its attribute, e.g. "parking at the hotel?") pays 0.1 per such preference. Per-turn rewards are clipped to
[0, 1]. The episode ends when every aspect has its best option; success = every aspect at least
acceptable; score = the mean over aspects.

Knobs (env.travel, paper table 8): search_failure_interval (every n-th search fails; 0 never),
elicitation_interval (after n turns in a row without a question the user nudges that preferences
are unasked; 0 never), noise_choice_number and wrong_choice_number (options of each kind per search).

Task data: facts are the preferences, Fact(id="hotel.parking", kind="preference",
keywords=("parking", "hotel parking")): the attribute alone matches half (the user reveals it), with
the aspect in full (elicitation pays); the aspect alone is no key, as every aspect is in the prompt;
`data` = {"aspects": [{"aspect", "city", "date", "preferences": {attribute: value}}]}.
"""
from __future__ import annotations

import random
import re

from training.benches.base import Fact, Task
from training.benches.usergym.common import Outcome, UserGymEnv
from training.users.symbolic import is_question, match_facts

GYM = "travel"
FACT_KINDS = frozenset({"preference"})
ELICIT_PAY = 0.1
SCORES = {"best": 1.0, "acceptable": 0.8}
ASPECTS = {
    "flight": ("F", ("flight", "fly", "plane", "airline"), ["SkyJet", "AeroLine", "BlueAir", "Nimbus", "Polar"],
               {"stops": ["nonstop", "one stop"], "cabin": ["economy", "business"], "departure": ["morning", "evening"]}),
    "hotel": ("H", ("hotel", "room", "stay", "accommodation"), ["Aurora", "Harbor Inn", "Grand", "Maple", "Vista"],
              {"parking": ["yes", "no"], "pool": ["yes", "no"], "breakfast": ["included", "not included"]}),
    "restaurant": ("R", ("restaurant", "dinner", "eat", "food"), ["Olive", "Saffron", "Bistro 9", "Noodle Bar", "Ember"],
                   {"cuisine": ["italian", "japanese", "mexican"], "seating": ["outdoor", "indoor"],
                    "vegetarian": ["yes", "no"]}),
    "car": ("C", ("car", "rental", "rent", "vehicle"), ["Zipp", "RoadOne", "Drivo", "Wheelz", "Metro"],
            {"size": ["compact", "suv", "van"], "transmission": ["automatic", "manual"], "gps": ["yes", "no"]}),
}
CITIES = ["Lisbon", "Denver", "Osaka", "Munich", "Austin", "Seville", "Quebec", "Perth", "Bergen", "Porto"]
_OPTION_ID = re.compile(r"\b([FHRC]\d+)\b", re.I)


class TravelEnv(UserGymEnv):
    gym = GYM
    user_role = ("You are planning a trip. State one of your preferences only when the assistant asks "
                 "about it; you want the cheapest option that meets all your preferences.")

    def setup(self) -> None:
        self.searches = 0
        self.no_question_run = 0
        self.elicited: set[str] = set()
        self.best = {a["aspect"]: 0.0 for a in self.task.data["aspects"]}
        rng = random.Random(f"{self.task.id}:{self.seed}")
        self.options = {a["aspect"]: self._options(a, rng) for a in self.task.data["aspects"]}
        self.labels = {o["id"]: (asp, o["label"]) for asp, opts in self.options.items() for o in opts}

    def _options(self, spec: dict, rng: random.Random) -> list[dict]:
        prefix, _, names, attrs = ASPECTS[spec["aspect"]]
        prefs = spec["preferences"]
        free = {k: v for k, v in attrs.items() if k not in prefs}

        def make(label: str, price: float, values: dict, city: str) -> dict:
            return {"label": label, "price": round(price), "city": city, "name": rng.choice(names),
                    "attrs": {**{k: rng.choice(v) for k, v in free.items()}, **values}}

        base = rng.uniform(80, 300)
        opts = [make("best", base, prefs, spec["city"])]
        opts += [make("acceptable", base * rng.uniform(1.15, 1.6), prefs, spec["city"]) for _ in range(2)]
        for _ in range(int(self.env_knobs["wrong_choice_number"])):
            broken = rng.choice(sorted(prefs))
            bad = rng.choice([v for v in attrs[broken] if v != prefs[broken]])
            opts.append(make("wrong", base * rng.uniform(0.6, 0.95), {**prefs, broken: bad}, spec["city"]))
        for _ in range(int(self.env_knobs["noise_choice_number"])):
            other = rng.choice([c for c in CITIES if c != spec["city"]])
            opts.append(make("noise", base * rng.uniform(0.5, 1.5), {k: rng.choice(v) for k, v in attrs.items()}, other))
        rng.shuffle(opts)
        for i, o in enumerate(opts, 1):
            o["id"] = f"{prefix}{i}"
        return opts

    def intro(self) -> str:
        return (f"{self.task.prompt}\nAs long as my preferences are satisfied, I would like the cheapest "
                f"option for each.")

    def on_agent(self, act: str, content: str) -> Outcome:
        if act == "search":
            out = self._search(content)
        elif act == "answer":
            out = self._recommend(content)
        else:
            new = [f for f, _ in match_facts(content, self.task.facts, 1.0) if f.id not in self.elicited]
            self.elicited.update(f.id for f in new)
            out = Outcome(reward=ELICIT_PAY * len(new), to_user=True, info={"elicited": [f.id for f in new]})
        asked = act == "action" and is_question(content)
        self.no_question_run = 0 if asked else self.no_question_run + 1
        interval = int(self.env_knobs["elicitation_interval"])
        unasked = [f for f in self.task.facts if f.id not in self.elicited]
        if interval > 0 and self.no_question_run >= interval and unasked:
            aspect = unasked[0].id.split(".")[0]
            out.obs = (out.obs + f"\n(The user adds: I also have preferences about the {aspect} that you "
                       f"have not asked about.)").strip()
            out.info["nudged"] = True
            self.no_question_run = 0
        return out

    def _search(self, query: str) -> Outcome:
        self.searches += 1
        interval = int(self.env_knobs["search_failure_interval"])
        if interval > 0 and self.searches % interval == 0:
            return Outcome(obs="Search failed: the database timed out; please try again.",
                           info={"search_failed": True})
        words = set(re.findall(r"[a-z]+", query.lower()))
        aspect = next((a for a in self.options if words & set(ASPECTS[a][1])), None)
        if aspect is None:
            return Outcome(obs="No results: name the aspect to search (" + ", ".join(self.options) + ").",
                           info={"rejected": "search"})
        lines = [f"{o['id']} | {o['name']} | {o['city']} | "
                 + " | ".join(f"{k}: {v}" for k, v in sorted(o["attrs"].items())) + f" | ${o['price']}"
                 for o in self.options[aspect]]
        return Outcome(obs="\n".join(lines), info={"search_aspect": aspect})

    def _recommend(self, content: str) -> Outcome:
        m = _OPTION_ID.search(content)
        oid = m.group(1).upper() if m else None
        if oid not in self.labels:
            return Outcome(obs="Recommend one option by its id from a search result, e.g. [answer] H3.",
                           info={"rejected": "answer"})
        aspect, label = self.labels[oid]
        before = self.score()
        self.best[aspect] = max(self.best[aspect], SCORES.get(label, 0.0))
        after = self.score()
        verdict = "accepts" if SCORES.get(label, 0.0) >= 0.8 else "does not like"
        done = all(v >= 1.0 for v in self.best.values())
        return Outcome(obs=f"The user {verdict} {oid}.", reward=after - before, terminated=done,
                       info={"recommended": oid, "label": label})

    def score(self) -> float:
        return sum(self.best.values()) / len(self.best) if self.best else 0.0

    def success(self) -> bool:
        return all(v >= 0.8 for v in self.best.values())


def generate(rng: random.Random, n: int) -> list[Task]:
    tasks = []
    for _ in range(n):
        city = rng.choice(CITIES)
        day = rng.randint(1, 28)
        aspects, facts = [], []
        for aspect in sorted(rng.sample(sorted(ASPECTS), rng.choice((1, 2, 3)))):
            attrs = ASPECTS[aspect][3]
            prefs = {k: rng.choice(attrs[k]) for k in sorted(rng.sample(sorted(attrs), 2))}
            aspects.append({"aspect": aspect, "city": city, "date": f"March {day}", "preferences": prefs})
            for k, v in prefs.items():
                # the aspect is no key of its own: the prompt names it ("I need a hotel in
                # Lisbon"), so with keys (aspect, attribute) an agent that repeated its prompt was
                # told a preference of every aspect
                facts.append(Fact(id=f"{aspect}.{k}", kind="preference",
                                  text=f"For the {aspect}, I want {k}: {v}.", keywords=(k, f"{aspect} {k}")))
        parts = {"flight": f"a flight to {city} on March {day}", "hotel": f"a hotel in {city}",
                 "restaurant": f"a restaurant in {city} for dinner", "car": f"a rental car in {city}"}
        prompt = "I need " + ", ".join(parts[a["aspect"]] for a in aspects) + "."
        tasks.append(Task(id="", gym=GYM, split="", prompt=prompt, facts=tuple(facts), data={"aspects": aspects}))
    return tasks
