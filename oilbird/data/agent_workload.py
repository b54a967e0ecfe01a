"""A built-in tool-calling *agent*: scripted rail-booking conversations, for replay on a fresh machine.

Why it exists: replay (``python -m oilbird replay``) measures drafters on recorded agent
traffic, in which later turns copy IDs and values out of earlier tool results. The recorded
transcripts live outside this repository; this module writes conversations of the same kind
here, from a seed, in the same JSON Lines format (``oilbird.data.conversations`` reads both alike).

What it generates: a small mock database of a fictional rail operator (customers with saved
travellers and payment methods, bookings with six-character IDs such as ``HX7K2P``, trains
with numbers, times and fares) and a scripted agent that serves one customer per
conversation. Its turns look records up (``get_customer``, ``get_booking``, ``search_trains``)
and act (``cancel_booking``, ``change_booking``, ``add_passenger``, ``book_trip``), copying
booking IDs, train numbers, prices and payment IDs out of earlier tool results into later
calls and replies. Each act has several phrasings, picked by the seed. Like benchmarks that
replay one task with several trials, conversation ``i`` is trial ``i % 4`` of task ``i // 4``:
the same customer with the same goal, asked and answered with small variations, so much of
one trial recurs in the next, as when many users ask alike.

It knows nothing about models or tokens; every name, policy line and value here is made up.
Deterministic: ``generate_conversations(n, seed)`` is a pure function, and its first ``n``
conversations are the same whatever larger ``n`` is asked.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

MODEL = "oilbird scripted agent (rule-based, no language model)"
TRIALS = 4
YEAR = 2025

STATIONS = ["Lyon", "Basel", "Turin", "Ghent", "Utrecht", "Bremen", "Graz", "Bologna", "Nantes",
            "Leipzig", "Salzburg", "Lausanne", "Aarhus", "Porto"]
FIRST = ["Lena", "Tomas", "Ines", "Yusuf", "Marta", "Kofi", "Elif", "Ruben", "Sanne", "Dario",
         "Noor", "Pavel", "Ada", "Jonas", "Mira", "Felix"]
LAST = ["Okafor", "Brandt", "Silva", "Kaya", "Novak", "Lindqvist", "Moreau", "Haddad", "Visser",
        "Romano", "Berg", "Costa", "Ivanova", "Dahl"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
KINDS = ("cancel", "change", "add_passenger", "status", "book")
REASONS = ("change_of_plans", "illness", "duplicate_booking", "other")

SYSTEM = """You are the booking assistant of Northline Rail, a fictional regional train operator.
Help one customer at a time with their bookings, using only the tools below.

Rules:
- Identify the customer by customer ID before looking anything up, and use only IDs you have read.
- Before you cancel, change or add to a booking, state what will happen and what it costs, and
  wait for the customer to say yes.
- Flex fares are refunded in full; saver fares are refunded at 50%. Refunds go back to the
  payment method that paid.
- A change keeps the fare type; the customer pays any difference, or is refunded it.
- Be brief and copy IDs, train numbers and amounts exactly as the tools return them.

Tools:
- get_customer(customer_id): profile, saved travellers, payment methods, booking IDs
- get_booking(booking_id): route, date, train, fare, passengers, amount paid
- search_trains(origin, destination, date): trains with times, fares and free seats
- cancel_booking(booking_id, reason): reason is one of change_of_plans, illness, duplicate_booking, other
- change_booking(booking_id, train, date, payment_id)
- add_passenger(booking_id, name, birth_date, payment_id)
- book_trip(customer_id, origin, destination, date, train, travel_class, passengers, payment_id)"""


# ---------------------------------------------------------------- the mock database

def _code(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(n))


def _date(rng: random.Random) -> tuple[str, str]:
    """(ISO date, how a person says it)."""
    m, d = rng.randint(3, 11), rng.randint(1, 28)
    return f"{YEAR}-{m:02d}-{d:02d}", f"{MONTHS[m - 1]} {d}"


def _clock(rng: random.Random, lo: int = 6, hi: int = 20) -> tuple[str, str]:
    h, mi = rng.randint(lo, hi), rng.choice(range(0, 60, 3))
    dur = rng.randint(70, 260)
    e = h * 60 + mi + dur
    return f"{h:02d}:{mi:02d}", f"{e // 60 % 24:02d}:{e % 60:02d}"


def _train(rng: random.Random) -> str:
    return f"{rng.choice(['IC', 'RX', 'NL'])} {rng.randint(101, 989)}"


def _birth(rng: random.Random, lo: int, hi: int) -> str:
    return f"{rng.randint(lo, hi)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _customer(rng: random.Random) -> dict:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    cid = f"{first.lower()}.{last.lower()}{rng.randint(10, 99)}"
    card = str(rng.randint(1000, 9999))
    payments = [{"payment_id": f"card-{card}", "kind": "card", "ending": card}]
    if rng.random() < 0.6:
        payments.append({"payment_id": f"voucher-{_code(rng, 4)}", "kind": "travel voucher",
                         "balance": float(rng.randint(2, 12) * 10)})
    travellers = [{"name": f"{first} {last}", "birth_date": _birth(rng, 1960, 2002)}]
    for _ in range(rng.randint(1, 2)):
        travellers.append({"name": f"{rng.choice(FIRST)} {rng.choice([last, rng.choice(LAST)])}",
                           "birth_date": _birth(rng, 1950, 2015)})
    return {"customer_id": cid, "name": f"{first} {last}", "email": f"{first.lower()}.{last.lower()}@example.org",
            "tier": rng.choice(["standard", "silver", "gold"]), "saved_travellers": travellers,
            "payment_methods": payments, "bookings": []}


def _booking(rng: random.Random, cust: dict, origin: str, dest: str) -> dict:
    date, _ = _date(rng)
    dep, arr = _clock(rng)
    fare = rng.choice(["flex", "saver"])
    cls = rng.choice(["second", "second", "first"])
    n_pax = rng.randint(1, min(2, len(cust["saved_travellers"])))
    pax = [{"name": t["name"], "seat": f"{rng.randint(1, 28)}{rng.choice('ABCD')}"}
           for t in cust["saved_travellers"][:n_pax]]
    price = round(rng.randint(1900, 9900) / 100 * n_pax * (1.6 if cls == "first" else 1.0), 2)
    return {"booking_id": _code(rng), "customer_id": cust["customer_id"], "origin": origin,
            "destination": dest, "date": date, "train": _train(rng), "departs": dep, "arrives": arr,
            "fare": fare, "travel_class": cls, "passengers": pax, "paid": price,
            "payment_id": cust["payment_methods"][0]["payment_id"], "status": "confirmed"}


def _search(rng: random.Random, origin: str, dest: str, date: str) -> list[dict]:
    trains = []
    for _ in range(rng.randint(3, 4)):
        dep, arr = _clock(rng)
        second = rng.randint(2400, 8900) / 100
        trains.append({"train": _train(rng), "departs": dep, "arrives": arr, "second": second,
                       "first": round(second * 1.6, 2), "seats_left": rng.randint(2, 60)})
    trains.sort(key=lambda t: t["departs"])
    return trains


def _task(seed: int, t: int) -> dict:
    """One task: a customer, their bookings, a goal and everything the tools will return."""
    rng = random.Random(f"oilbird-agent-{seed}-task-{t}")
    kind = KINDS[t % len(KINDS)]
    cust = _customer(rng)
    routes = [rng.sample(STATIONS, 2) for _ in range(rng.randint(2, 3))]
    bookings = [_booking(rng, cust, o, d) for o, d in routes]
    cust["bookings"] = [b["booking_id"] for b in bookings]
    target = rng.randrange(len(bookings))
    new_date, new_said = _date(rng)
    b = bookings[target]
    origin, dest = (b["origin"], b["destination"]) if kind != "book" else rng.sample(STATIONS, 2)
    options = _search(rng, origin, dest, new_date)
    extra = cust["saved_travellers"][-1]
    return {"kind": kind, "customer": cust, "bookings": bookings, "target": target,
            "new_date": new_date, "new_said": new_said, "origin": origin, "destination": dest,
            "options": options, "pick": rng.randrange(len(options)), "reason": rng.choice(REASONS),
            "extra": extra, "travel_class": rng.choice(["second", "first"]), "new_id": _code(rng)}


# ---------------------------------------------------------------- the scripted agent

class _Script:
    """Builds one conversation's messages; ``say`` picks one phrasing with the trial's rng."""

    def __init__(self, rng: random.Random, system: str = SYSTEM):
        self.rng, self.messages = rng, [{"role": "system", "content": system}]

    def say(self, role: str, options: list[str], **values) -> None:
        self.messages.append({"role": role, "content": self.rng.choice(options).format(**values)})

    def call(self, name: str, args: dict, result, lead: str = "") -> None:
        text = json.dumps(args, separators=(",", ":"))
        self.messages.append({"role": "assistant", "content": lead,
                              "tool_calls": [{"name": name, "arguments": args, "arguments_json": text}]})
        self.messages.append({"role": "tool", "name": name, "content": json.dumps(result)})


def _money(x: float) -> str:
    return f"{x:.2f} EUR"


def _identify(s: _Script, task: dict, opening: str) -> None:
    """The user's opening, the customer ID (given at once or asked for), the profile lookup."""
    cust = task["customer"]
    if s.rng.random() < 0.5:
        s.messages.append({"role": "user", "content": opening + s.rng.choice(
            [" My customer ID is {cid}.", " I'm {cid}.", " (customer ID {cid})"]).format(cid=cust["customer_id"])})
    else:
        s.messages.append({"role": "user", "content": opening})
        s.say("assistant", ["I can help with that. What is your customer ID?",
                            "Sure. Could you give me your customer ID first?",
                            "Happy to help. Please tell me your customer ID so I can find your bookings."])
        s.say("user", ["It's {cid}.", "{cid}", "Sure, it is {cid}."], cid=cust["customer_id"])
    s.call("get_customer", {"customer_id": cust["customer_id"]}, cust)


def _find_booking(s: _Script, task: dict) -> dict:
    """Look the customer's bookings up in order until the target one."""
    for k, bid in enumerate(task["customer"]["bookings"][:task["target"] + 1]):
        lead = "" if k or s.rng.random() < 0.6 else s.rng.choice(
            ["Let me check your bookings.", "One moment while I look at your trips."])
        s.call("get_booking", {"booking_id": bid}, task["bookings"][k], lead)
    return task["bookings"][task["target"]]


def _describe(b: dict) -> str:
    return (f"booking {b['booking_id']}: {b['origin']} to {b['destination']} on {b['date']}, train "
            f"{b['train']} at {b['departs']}, {b['travel_class']} class, {b['fare']} fare, "
            f"{len(b['passengers'])} passenger(s), paid {_money(b['paid'])} with {b['payment_id']}")


def _close(s: _Script) -> None:
    s.say("user", ["Great, thanks!", "That's all, thank you.", "Perfect, thanks for your help."])
    s.say("assistant", ["You're welcome. Have a good trip!", "Glad I could help. Goodbye!",
                        "You're welcome, enjoy your journey."])


def _cancel(s: _Script, task: dict) -> None:
    b = task["bookings"][task["target"]]
    _identify(s, task, s.rng.choice([
        f"Hi, I need to cancel my trip to {b['destination']}.",
        f"Hello. I won't be travelling to {b['destination']} after all, please cancel it.",
        f"Can you cancel my train from {b['origin']} to {b['destination']}?"]))
    b = _find_booking(s, task)
    refund = b["paid"] if b["fare"] == "flex" else round(b["paid"] / 2, 2)
    s.say("assistant", ["I found {d}. As a {fare} fare it is refunded {r} to {p}. Shall I cancel it?",
                        "This is {d}. Cancelling gives a refund of {r} to {p} ({fare} fare). "
                        "Do you want me to go ahead?"],
          d=_describe(b), fare=b["fare"], r=_money(refund), p=b["payment_id"])
    said = {"change_of_plans": "my plans changed", "illness": "I'm ill", "duplicate_booking": "I booked it twice",
            "other": "personal reasons"}[task["reason"]]
    s.say("user", ["Yes, please cancel. The reason: {w}.", "Yes. {w}, unfortunately.", "Go ahead, {w}."], w=said)
    result = {"booking_id": b["booking_id"], "status": "cancelled", "refund": refund, "refund_to": b["payment_id"]}
    s.call("cancel_booking", {"booking_id": b["booking_id"], "reason": task["reason"]}, result)
    s.say("assistant", ["Booking {bid} is cancelled. {r} will go back to {p}.",
                        "Done: {bid} is now cancelled and {r} is refunded to {p}.",
                        "Your booking {bid} has been cancelled; the refund of {r} goes to {p}."],
          bid=b["booking_id"], r=_money(refund), p=b["payment_id"])
    _close(s)


def _options(s: _Script, task: dict, cls: str) -> None:
    lines = "\n".join(f"{i + 1}. {o['train']} departs {o['departs']}, arrives {o['arrives']}, "
                      f"{_money(o[cls])} in {cls} class, {o['seats_left']} seats left"
                      for i, o in enumerate(task["options"]))
    s.say("assistant", ["These trains run from {o} to {d} on {date}:\n{lines}\nWhich one would you like?",
                        "On {date} I see the following {o} - {d} trains:\n{lines}\nPlease pick one."],
          o=task["origin"], d=task["destination"], date=task["new_date"], lines=lines)


def _pick(s: _Script, task: dict) -> dict:
    o = task["options"][task["pick"]]
    s.say("user", ["The {t} please.", "I'll take the one at {dep}.", "Number {n}, the {t}."],
          t=o["train"], dep=o["departs"], n=task["pick"] + 1)
    return o


def _change(s: _Script, task: dict) -> None:
    b = task["bookings"][task["target"]]
    _identify(s, task, s.rng.choice([
        f"Hi, I'd like to move my {b['origin']}-{b['destination']} trip to {task['new_said']}.",
        f"Hello, can I change the date of my train to {b['destination']}? I need to go on {task['new_said']} instead.",
        f"I need to travel to {b['destination']} on {task['new_said']} rather than on the date I booked."]))
    b = _find_booking(s, task)
    s.call("search_trains", {"origin": b["origin"], "destination": b["destination"], "date": task["new_date"]},
           task["options"],
           s.rng.choice(["", f"I found {_describe(b)}. Let me search for trains on {task['new_date']}."]))
    _options(s, task, b["travel_class"])
    o = _pick(s, task)
    diff = round((o[b["travel_class"]] - b["paid"] / len(b["passengers"])) * len(b["passengers"]), 2)
    what = f"you pay {_money(diff)}" if diff > 0 else f"you get {_money(-diff)} back"
    s.say("assistant", ["Moving {bid} to {t} on {date} ({dep}); {what}, using {p}. Confirm?",
                        "To change {bid} to the {t} at {dep} on {date}, {what} (payment {p}). Shall I proceed?"],
          bid=b["booking_id"], t=o["train"], date=task["new_date"], dep=o["departs"], what=what, p=b["payment_id"])
    s.say("user", ["Yes, do it.", "Yes please.", "Confirmed."])
    result = {"booking_id": b["booking_id"], "status": "changed", "train": o["train"], "date": task["new_date"],
              "departs": o["departs"], "difference": diff, "payment_id": b["payment_id"]}
    s.call("change_booking", {"booking_id": b["booking_id"], "train": o["train"], "date": task["new_date"],
                              "payment_id": b["payment_id"]}, result)
    s.say("assistant", ["Done. {bid} is now on the {t} at {dep} on {date}; {what}.",
                        "Your booking {bid} has been changed to {t}, {date} at {dep}, and {what}."],
          bid=b["booking_id"], t=o["train"], dep=o["departs"], date=task["new_date"], what=what)
    _close(s)


def _add_passenger(s: _Script, task: dict) -> None:
    b, x = task["bookings"][task["target"]], task["extra"]
    _identify(s, task, s.rng.choice([
        f"Hi, {x['name'].split()[0]} wants to join my trip to {b['destination']}. Can you add them?",
        f"Hello, please add {x['name']} to my booking for {b['destination']}.",
        f"Could you put one more traveller, {x['name']}, on my {b['origin']} to {b['destination']} train?"]))
    b = _find_booking(s, task)
    price = round(b["paid"] / len(b["passengers"]), 2)
    pay = task["customer"]["payment_methods"][-1]["payment_id"]
    s.say("assistant", ["{name} (born {bd}) is one of your saved travellers. Adding them to {d} costs {c}. "
                        "Shall I charge {p}?",
                        "I can add {name}, born {bd}, to {d}. The seat costs {c}; pay with {p}?"],
          name=x["name"], bd=x["birth_date"], d=_describe(b), c=_money(price), p=pay)
    s.say("user", ["Yes, charge {p}.", "Yes please.", "Sounds good."], p=pay)
    seat = f"{s.rng.randint(1, 28)}{s.rng.choice('ABCD')}"
    result = {"booking_id": b["booking_id"], "added": x["name"], "seat": seat, "charged": price, "payment_id": pay}
    s.call("add_passenger", {"booking_id": b["booking_id"], "name": x["name"], "birth_date": x["birth_date"],
                             "payment_id": pay}, result)
    s.say("assistant", ["{name} is now on {bid}, seat {seat}; {c} was charged to {p}.",
                        "Added {name} to booking {bid} (seat {seat}). Charged {c} to {p}."],
          name=x["name"], bid=b["booking_id"], seat=seat, c=_money(price), p=pay)
    _close(s)


def _status(s: _Script, task: dict) -> None:
    _identify(s, task, s.rng.choice(["Hi, what trips do I have booked?",
                                     "Hello, can you list my upcoming train bookings?",
                                     "I forgot when my trains are. Can you check all my bookings?"]))
    for k, bid in enumerate(task["customer"]["bookings"]):
        s.call("get_booking", {"booking_id": bid}, task["bookings"][k])
    lines = "\n".join(f"- {_describe(b)}" for b in task["bookings"])
    s.say("assistant", ["You have {n} bookings:\n{lines}", "Here are your {n} trips:\n{lines}"],
          n=len(task["bookings"]), lines=lines)
    b = task["bookings"][task["target"]]
    s.say("user", ["Which seats do we have on {bid}?", "What seats are on the {t} one?"],
          bid=b["booking_id"], t=b["train"])
    seats = ", ".join(f"{p['name']} in {p['seat']}" for p in b["passengers"])
    s.say("assistant", ["On {bid} ({t}, {date}): {seats}.", "Booking {bid}, train {t} on {date}: {seats}."],
          bid=b["booking_id"], t=b["train"], date=b["date"], seats=seats)
    _close(s)


def _book(s: _Script, task: dict) -> None:
    cust, cls = task["customer"], task["travel_class"]
    _identify(s, task, s.rng.choice([
        f"Hi, I want a {cls} class ticket from {task['origin']} to {task['destination']} on {task['new_said']}.",
        f"Hello, please book me a train {task['origin']} - {task['destination']}, {task['new_said']}, {cls} class.",
        f"I'd like to travel from {task['origin']} to {task['destination']} on {task['new_said']} in {cls} class."]))
    s.call("search_trains", {"origin": task["origin"], "destination": task["destination"], "date": task["new_date"]},
           task["options"])
    _options(s, task, cls)
    o = _pick(s, task)
    methods = ", ".join(f"{p['payment_id']} ({p['kind']})" for p in cust["payment_methods"])
    s.say("assistant", ["The {t} at {dep} costs {c}. Which payment method: {m}?",
                        "{t}, departing {dep}: {c}. How would you like to pay? You have {m}."],
          t=o["train"], dep=o["departs"], c=_money(o[cls]), m=methods)
    pay = cust["payment_methods"][0]
    s.say("user", ["My card ending {e}.", "The card please.", "Use the {e} card."], e=pay["ending"])
    args = {"customer_id": cust["customer_id"], "origin": task["origin"], "destination": task["destination"],
            "date": task["new_date"], "train": o["train"], "travel_class": cls, "passengers": [cust["name"]],
            "payment_id": pay["payment_id"]}
    result = {"booking_id": task["new_id"], "status": "confirmed", **{k: args[k] for k in ("train", "date")},
              "departs": o["departs"], "seat": f"{s.rng.randint(1, 28)}{s.rng.choice('ABCD')}",
              "paid": o[cls], "payment_id": pay["payment_id"]}
    s.call("book_trip", args, result)
    s.say("assistant", ["Booked! Your booking ID is {bid}: {t} on {date} at {dep}, seat {seat}, {c} paid with {p}.",
                        "Done. Booking {bid}, train {t}, {date} {dep}, seat {seat}. {c} charged to {p}."],
          bid=task["new_id"], t=o["train"], date=task["new_date"], dep=o["departs"], seat=result["seat"],
          c=_money(o[cls]), p=pay["payment_id"])
    _close(s)


_FLOWS = {"cancel": _cancel, "change": _change, "add_passenger": _add_passenger, "status": _status, "book": _book}


def generate_conversations(n: int = 24, seed: int = 0, long: bool = False) -> list[dict]:
    """``n`` conversations as JSON-ready dicts (``id``, ``model``, ``messages``): conversation
    ``i`` is trial ``i % 4`` of task ``i // 4``; tasks cycle through the five kinds of request.

    ``long``: the long-context variant (``--data agent-builtin-long``): the system prompt adds
    the operator's full policy (:func:`long_policy`, with the short prompt about 6,000 SmolLM2 tokens), and conversation
    ``i`` serves ``1 + (i // 4) % 6`` customers one after another (tasks ``t``, ``t + 1``, ...,
    each its own customer, all with trial ``i % 4``'s phrasing), so conversations run from about
    7,100 to 12,700 tokens: most are longer than SmolLM2's 8,192-token context."""
    if n < 1:
        raise ValueError("n must be >= 1")
    system = SYSTEM + "\n\n" + long_policy(seed) if long else SYSTEM
    out = []
    for i in range(n):
        t, trial = divmod(i, TRIALS)
        s = _Script(random.Random(f"oilbird-agent-{seed}-task-{t}-trial-{trial}"), system)
        for extra in range(1 + t % 6 if long else 1):
            task = _task(seed, t + extra)
            _FLOWS[task["kind"]](s, task)
        name = "agent-builtin-long" if long else "agent-builtin"
        out.append({"id": f"{name}-task{t}-trial{trial}", "model": MODEL, "messages": s.messages})
    return out


def long_policy(seed: int = 0) -> str:
    """The long system prompt's policy: station notes, a fare table for every pair of stations
    and numbered service rules, all made up from ``seed`` (about 16,000 characters, 6,000 SmolLM2 tokens)."""
    rng = random.Random(f"oilbird-agent-{seed}-policy")
    lines = ["Northline Rail passenger policy (full text; quote it exactly when a customer asks).", "",
             "Part A. Stations"]
    for k, st in enumerate(STATIONS):
        h1, h2 = rng.randint(5, 7), rng.randint(20, 23)
        lines.append(f"A.{k + 1} {st}: ticket office staffed {h1:02d}:00-{h2:02d}:00; step-free access to platforms "
                     f"{', '.join(str(x) for x in sorted(rng.sample(range(1, 13), 3)))}; {rng.randint(20, 90)} "
                     f"lockers ({rng.choice(['coins', 'cards', 'app only'])}); assistance must be booked "
                     f"{rng.choice([12, 24, 36, 48])} hours ahead; connecting buses "
                     f"{', '.join(str(rng.randint(10, 99)) for _ in range(3))}.")
    lines += ["", "Part B. Fares (second class; first class adds the supplement; prices in EUR)"]
    for a in range(len(STATIONS)):
        for b in range(a + 1, min(a + 5, len(STATIONS))):
            saver = rng.randint(19, 89)
            lines.append(f"B.{STATIONS[a]}-{STATIONS[b]}: saver {saver}.00, flex {saver + rng.randint(15, 60)}.00, "
                         f"first-class supplement {rng.randint(12, 45)}.00, fastest journey "
                         f"{rng.randint(1, 6)}h{rng.randint(0, 59):02d}.")
    topics = ["refunds", "changes", "extra passengers", "children", "pets", "bicycles", "luggage", "delays",
              "cancellations by the operator", "assistance", "group bookings", "identity checks", "privacy",
              "payments", "complaints", "night trains", "seat reservations", "season passes"]
    lines += ["", "Part C. Service rules"]
    for k, topic in enumerate(topics):
        for j in range(rng.randint(2, 4)):
            pct, hours, amount = rng.choice([10, 25, 50, 75, 100]), rng.choice([2, 6, 24, 48, 72]), rng.randint(5, 80)
            lines.append(f"C.{k + 1}.{j + 1} ({topic}) " + rng.choice([
                f"A request about {topic} made more than {hours} hours before departure is handled by the "
                f"assistant; later requests go to station staff, who may charge {amount}.00 EUR.",
                f"For {topic}, {pct}% of the affected fare is refunded to the payment method that paid, "
                f"within {hours} hours, unless the booking is a saver fare bought with a voucher.",
                f"Never promise anything about {topic} that this policy does not state; quote rule numbers, "
                f"and log the customer ID and booking ID exactly as the tools return them.",
                f"When {topic} affect more than one passenger, confirm each passenger's name and birth date "
                f"before acting; a fee of {amount}.00 EUR applies per passenger after {hours} hours.",
                f"Customers holding a season pass pay no fee for {topic}; others pay {amount}.00 EUR, or "
                f"{pct}% of the fare if that is lower."]))
    return "\n".join(lines)


def write_jsonl(path: str | Path, n: int = 24, seed: int = 0) -> Path:
    """Write ``generate_conversations(n, seed)`` as JSON Lines (one conversation per line)."""
    p = Path(path)
    p.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in generate_conversations(n, seed)),
                 encoding="utf-8")
    return p
