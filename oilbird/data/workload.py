"""A built-in tool-calling workload, generated here, deterministic and seeded.

Why it exists: the app and the notebooks must work on a machine without ``../shared``. It
reproduces the situation of the paper's Figure 1: a conversation lists values (colleagues, ids,
dates) and the assistant calls the same tool once per value, so successive requests repeat the
same call frame verbatim with a fresh value inside it (``TravelStatus(member_name='John')``,
then ``... 'Mary'``). The calls are rendered in API-Bank's plain-text format (its instruction
is not copied: ours says the same in other words) so that what a small instruct model emits
looks like API-Bank traffic.

Knows nothing about models; it only writes text.
"""
from __future__ import annotations

import json
import random


# our own words (API-Bank's instruction text is not copied here); the call format is the same
INSTRUCTION = (
    "Write the API request that comes next in the dialogue, in the form "
    "[ApiName(key1='value1', key2='value2', ...)].\nThe year is 2023.\n\n"
    "Answer format:\nAPI-Request: [ApiName(key1='value1', key2='value2', ...)]\n\nAPIs:\n")

NAMES = ["John", "Mary", "Peter", "Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace",
         "Henry", "Irene", "Jack", "Laura", "Mike", "Nina", "Oscar", "Paula", "Quinn", "Rosa"]
CITIES = ["Paris", "Tokyo", "Berlin", "Madrid", "Oslo", "Lima", "Cairo", "Seoul", "Dublin", "Quito"]

# Each tool: name, description, parameters, how a user lists the values, one call per value.
TOOLS = {
    "TravelStatus": {
        "description": "Check whether a team member is travelling.",
        "input_parameters": {"member_name": {"type": "str", "description": "Name of the team member."}},
        "output_parameters": {"status": {"type": "str", "description": "travelling or in office"}},
    },
    "QueryMeeting": {
        "description": "Query the details of a meeting by its id.",
        "input_parameters": {"meeting_id": {"type": "str", "description": "The meeting id."}},
        "output_parameters": {"room": {"type": "str", "description": "Meeting room."}},
    },
    "GetWeather": {
        "description": "Get the weather forecast of a city on a date.",
        "input_parameters": {"city": {"type": "str", "description": "City name."},
                             "date": {"type": "str", "description": "Date, format %Y-%m-%d."}},
        "output_parameters": {"forecast": {"type": "str", "description": "Weather forecast."}},
    },
    "CheckBalance": {
        "description": "Check the balance of a bank account.",
        "input_parameters": {"account_id": {"type": "str", "description": "The account number."},
                             "token": {"type": "str", "description": "User's token."}},
        "output_parameters": {"balance": {"type": "float", "description": "Balance."}},
    },
}


def _describe(name: str) -> str:
    d = {"name": name, **TOOLS[name]}
    return json.dumps(d)


def _call(name: str, args: dict) -> str:
    return f"[{name}(" + ", ".join(f"{k}='{v}'" for k, v in args.items()) + ")]"


def _conversation(rng: random.Random, kind: str) -> tuple[list[str], list[tuple[str, dict, dict]]]:
    """Return (opening dialogue lines, list of (tool, args, result)) for one conversation."""
    if kind == "TravelStatus":
        team = rng.sample(NAMES, rng.randint(3, 4))
        lines = [f"User: Which of my colleagues are not travelling this week? The team is {team}.",
                 "AI: I will check the travel status of each team member."]
        calls = [("TravelStatus", {"member_name": n},
                  {"status": rng.choice(["travelling", "in office"])}) for n in team]
    elif kind == "QueryMeeting":
        ids = [f"M{rng.randint(100, 999)}{rng.choice('ABCDEFGH')}" for _ in range(rng.randint(3, 4))]
        lines = [f"User: Please find the rooms for my meetings {', '.join(ids)}.",
                 "AI: Sure, let me look up each meeting."]
        calls = [("QueryMeeting", {"meeting_id": i}, {"room": f"Room {rng.randint(1, 30)}"}) for i in ids]
    elif kind == "GetWeather":
        cities = rng.sample(CITIES, rng.randint(3, 4))
        date = f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        lines = [f"User: What will the weather be on {date} in {', '.join(cities)}?",
                 "AI: Let me get the forecast for each city."]
        calls = [("GetWeather", {"city": c, "date": date},
                  {"forecast": rng.choice(["sunny", "rain", "cloudy", "snow"])}) for c in cities]
    else:
        token = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(12))
        accts = [str(rng.randint(10_000_000, 99_999_999)) for _ in range(rng.randint(3, 4))]
        lines = [f"User: My token is {token}. Check the balances of accounts {', '.join(accts)}.",
                 "AI: I will check each account with your token."]
        calls = [("CheckBalance", {"account_id": a, "token": token},
                  {"balance": round(rng.uniform(10, 5000), 2)}) for a in accts]
    return lines, calls


def builtin_request_fields(n_conversations: int = 12, seed: int = 0) -> list[dict]:
    """The built-in workload: one request per tool call, conversations served in order, each as
    the fields of a :class:`oilbird.data.requests.Request` (``oilbird.data.requests.builtin_requests``
    makes them requests; this module knows nothing of that class).

    Request k of a conversation holds the dialogue up to its k-th call, with the earlier calls
    and their results rendered as in API-Bank (``API-Request: [...]->{...}``), and asks for the
    next call. ``reference`` is the gold call.
    """
    rng = random.Random(seed)
    kinds = list(TOOLS)
    out: list[dict] = []
    for c in range(n_conversations):
        kind = kinds[c % len(kinds)]
        opening, calls = _conversation(rng, kind)
        instruction = INSTRUCTION + _describe(kind) + "\n"
        history = list(opening)
        for k, (tool, args, result) in enumerate(calls):
            prompt = "\n".join(history) + "\nNext API Request:\n"
            out.append(dict(
                id=f"builtin/{c:02d}-{k}", dataset="builtin",
                # one user message: with a separate system message the small default model
                # answers in Python instead of API-Request lines
                messages=[{"role": "user", "content": instruction + prompt}],
                reference=f"API-Request: {_call(tool, args)}",
                meta={"tool": tool, "args": args, "conversation": c, "step": k}))
            history.append(f"API-Request: {_call(tool, args)}->{result}")
            history.append("AI: Done. Let me continue with the next one." if k + 1 < len(calls)
                           else "AI: All done.")
    return out
