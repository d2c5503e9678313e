"""Generate the probe sets (``synapse_integrations/data/probes_v1.json``).

Run ``python -m synapse_integrations.bench.probe_gen --locomo locomo_dev.json --out
synapse_integrations/data/probes_v1.json``. The probes are written by hand below; this script
only places them in real LoCoMo conversations (insertion points drawn with a fixed seed
from the conversation's early, middle and late thirds), numbers them, checks them
(:func:`~synapse_integrations.bench.probes.validate_probes`, with the conversations) and
writes the JSON. The output is deterministic: the same LoCoMo file gives the same bytes.
Change the probes here, bump :data:`VERSION` when the set changes meaning, and regenerate.

Kinds (see :mod:`synapse_integrations.bench.probes` for the metrics):

* ``identifier``: 300 near-identical "test record" turns that differ only in a number and
  an access code, plus 22 turns each carrying an order number, flight code, ticket id,
  plate, coupon or booking reference; each question names one identifier.
* ``bridge``: three turns at different points of a conversation (the subject, the bridge
  that gives it another name, the answer that uses only that name); the question names
  the subject and shares no content word with the answer turn.
* ``never_said``: a question about a speaker of the conversation asking for something
  the conversation never mentions (``absent_terms`` are checked against it).
* ``update``: an earlier fact and a later changed fact about one subject; the question
  asks for the current value (the later turn).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

VERSION = 1
SEED = 20260110
CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")

# ------------------------------------------------------------------------------ identifiers
N_RECORDS = 300
N_RECORD_PROBES = 20

#: (turn text, question). Each text carries one identifier; the question names it.
CODES: list[tuple[str, str]] = [
    ("My order QM-5521-TK arrived with a cracked lid on the ceramic teapot.",
     "What came in order QM-5521-TK?"),
    ("Flight LX-318 to Zurich got moved to gate B42 at the last minute.",
     "Which gate does flight LX-318 leave from?"),
    ("Support ticket INC-40917 is about the router that keeps dropping the wifi.",
     "What is support ticket INC-40917 about?"),
    ("The car with plate 7KJ-2290 scraped my bumper in the parking lot.",
     "What did the car with plate 7KJ-2290 do?"),
    ("Coupon SAVE-ORCA-15 gave me fifteen percent off hiking boots.",
     "What did coupon SAVE-ORCA-15 get a discount on?"),
    ("Order ZP-8830-RM was a set of oak bookshelves, and it still has not been delivered.",
     "What was order ZP-8830-RM?"),
    ("Flight KL-1427 from Amsterdam landed two hours late.",
     "How late was flight KL-1427?"),
    ("Ticket REQ-5512 asks IT to reset my laptop password.",
     "What does ticket REQ-5512 ask for?"),
    ("The van with plate BX-904-QT is parked in front of the bakery every morning.",
     "Where is the van with plate BX-904-QT parked?"),
    ("Coupon FREESHIP-77 covered the delivery of my new blender.",
     "What did coupon FREESHIP-77 cover?"),
    ("Order HN-3318-WE contained two pairs of running socks and a water bottle.",
     "What was in order HN-3318-WE?"),
    ("Flight UA-2206 to Denver was cancelled because of the snow.",
     "Why was flight UA-2206 cancelled?"),
    ("Ticket BUG-2718 reports that the checkout page freezes on phones.",
     "What does ticket BUG-2718 report?"),
    ("The motorbike with plate MTR-661 belongs to the neighbour's son.",
     "Who owns the motorbike with plate MTR-661?"),
    ("Coupon BOGO-TACO-3 got us a free taco plate at lunch.",
     "What did coupon BOGO-TACO-3 get us?"),
    ("Order VF-7046-LD was a replacement screen for my phone.",
     "What did order VF-7046-LD replace?"),
    ("On flight AF-0093 my suitcase went missing in transit.",
     "What went wrong on flight AF-0093?"),
    ("Ticket OPS-3350 is my request for a bigger monitor at my desk.",
     "What does ticket OPS-3350 request?"),
    ("The truck with plate TRK-5083 dumped gravel on our driveway by mistake.",
     "What did the truck with plate TRK-5083 do?"),
    ("Coupon SPRING-GIFT-25 paid for half of my sister's birthday flowers.",
     "What did coupon SPRING-GIFT-25 pay for?"),
    ("Booking reference PNR-Q7Z2KD is for the hotel in Kyoto.",
     "What is booking reference PNR-Q7Z2KD for?"),
    ("Tracking number 1Z-999-AA1-0123 is the package with the spare bike tyre.",
     "Which package has tracking number 1Z-999-AA1-0123?"),
]

# ------------------------------------------------------------------------------ bridges
#: (bridge type, question, [subject turn, bridge turn, answer turn]). The answer turn
#: shares no content word with the question; the bridge turn links the two.
BRIDGES: list[tuple[str, str, list[str]]] = [
    ("pet", "What happened to Omar's cat?", [
        "My brother Omar adopted a tabby cat from the shelter last weekend.",
        "Omar decided to call the tabby Pickle, after his favourite snack.",
        "Pickle swallowed a hair tie yesterday, so we rushed to the clinic at midnight."]),
    ("person", "Which instrument is the landlord's daughter learning?", [
        "Our landlord came by to fix the heater and brought his daughter along.",
        "The landlord's daughter is called Ingrid, she is nine and very chatty.",
        "Ingrid has started cello lessons twice a week."]),
    ("project", "When did the website redesign ship?", [
        "At work I am leading the website redesign this quarter.",
        "Internally we call the website redesign project Kestrel.",
        "Kestrel finally went live on Friday afternoon."]),
    ("object", "Where is the vintage camera from the flea market now?", [
        "I found a vintage camera at the flea market for ten dollars.",
        "I call the vintage camera Old Betsy, it still takes film.",
        "Old Betsy is on loan to my nephew for his photography course."]),
    ("place", "What was damaged at the lake cabin?", [
        "My family rents a cabin by the lake every August.",
        "The lake cabin is up in Harrow Point, about three hours north.",
        "Harrow Point lost its wooden dock in last week's gale."]),
    ("topic", "How is the novel selling?", [
        "I finally finished writing my novel after three years.",
        "The novel is titled The Salt Road, after my grandmother's village.",
        "The Salt Road sold four hundred copies in its first week."]),
    ("person", "Where is the new marketing hire relocating?", [
        "We finally got a new hire on the marketing team at work.",
        "The new marketing hire is Dmitri, he sits right next to my desk.",
        "Dmitri told me he is packing up for Lisbon next spring."]),
    ("pet", "Why is the neighbour's parrot in trouble?", [
        "The neighbour next door keeps a parrot on the balcony.",
        "The neighbour's parrot answers to Captain and whistles all day.",
        "Captain learned a rude word from the mailman and now shouts it at everyone."]),
    ("project", "Why was the mobile app rewrite delayed?", [
        "My team is rewriting the mobile app from scratch.",
        "The mobile app rewrite has the code name Bluefin.",
        "Bluefin slipped two weeks because the payment vendor changed its API."]),
    ("object", "What broke on the grandfather's pocket watch?", [
        "My grandfather left me his pocket watch.",
        "The family calls that pocket watch the Admiral.",
        "The Admiral's crown snapped off, so a jeweller is fixing it."]),
    ("place", "What is the town where the grandparents live famous for?", [
        "My grandparents live in a little town up the coast.",
        "The grandparents' town is Port Ellery, right on the coast.",
        "Port Ellery is known across the region for its smoked mackerel festival."]),
    ("topic", "Who was the guest on the podcast last episode?", [
        "I started a podcast with a friend about weird food history.",
        "Our food history podcast is called Midnight Radish.",
        "Midnight Radish just had a celebrity chef from Naples on the show."]),
    ("person", "What sport does the babysitter play?", [
        "We hired a babysitter for Friday nights so we can go out.",
        "The babysitter, Priya, is a college student who adores the kids.",
        "Priya is goalkeeper for her university hockey squad and trains every morning."]),
    ("pet", "What did the sister's new puppy wreck?", [
        "My sister just got a puppy, a tiny beagle.",
        "She named the puppy Waffles because of his golden colour.",
        "Waffles chewed through the TV remote and half a sofa cushion."]),
    ("project", "Who is funding the community garden plan?", [
        "A few of us drafted a plan for a community garden on the empty lot.",
        "We nicknamed the community garden plan Operation Sprout.",
        "Operation Sprout got a grant from the city council this morning."]),
    ("object", "Who bought the old canoe?", [
        "We had an old canoe sitting in the garage for years.",
        "Dad named that canoe the Dragonfly when he painted it green.",
        "The Dragonfly was sold to a fisherman from the next town over."]),
    ("place", "Why did the conference venue change?", [
        "My company conference is coming up in March.",
        "The conference was booked at Lindqvist Hall downtown.",
        "Lindqvist Hall flooded after a pipe burst, so everything moved online."]),
    ("topic", "Where is the band playing its first gig?", [
        "My cousin and I formed a band with two friends from college.",
        "The band goes by Velvet Anchors, a name we picked at karaoke.",
        "Velvet Anchors booked a slot at the Rosewood pub for next Saturday."]),
    ("person", "What did the retired teacher from the book club bake?", [
        "A retired teacher joined our book club this month.",
        "The retired teacher is named Agnes, and she always brings snacks to book club.",
        "Agnes showed up with a lemon drizzle cake that vanished in minutes."]),
    ("pet", "How old is the horse at the riding stable?", [
        "I started going to a riding stable outside town on Sundays.",
        "The horse I ride at the stable is a grey mare called Juniper.",
        "Juniper turns nineteen this summer, yet still trots like a foal."]),
    ("project", "How many people signed up for the charity bike ride?", [
        "I am helping organise a charity bike ride in the autumn.",
        "The charity bike ride is branded Pedal Forward this year.",
        "Pedal Forward already has two hundred entrants registered."]),
    ("object", "Why was the electric scooter confiscated?", [
        "I bought an electric scooter to get to work faster.",
        "The scooter has a lightning sticker on it, so I named it Zippy.",
        "Zippy got impounded by campus security for blocking a fire exit."]),
    ("place", "What did the best friend see on her honeymoon?", [
        "My best friend got married in June.",
        "For their honeymoon my best friend and her husband flew to Vanua Levu.",
        "In Vanua Levu they snorkelled with reef sharks every morning."]),
    ("topic", "What was served at the surprise party?", [
        "We are planning a surprise party for Dad's sixtieth.",
        "The surprise party plan has the secret name Operation Confetti.",
        "Operation Confetti ended with a towering tiramisu and far too much champagne."]),
    ("person", "Which country is the exchange student's family from?", [
        "We are hosting an exchange student for the semester.",
        "The exchange student's name is Kenji, he arrived with two huge suitcases.",
        "Kenji's parents run a small noodle shop in Osaka."]),
    ("pet", "Where did the office cat disappear to?", [
        "Our office has a cat that wanders between the desks.",
        "Everyone at the office calls the cat Biscotti.",
        "Biscotti was found asleep inside the printer paper cupboard."]),
    ("project", "What went wrong with the warehouse migration?", [
        "We are migrating the warehouse inventory system next month.",
        "The warehouse migration is called Project Tundra in all the emails.",
        "Tundra crashed on launch night and the barcodes vanished for hours."]),
    ("object", "What happened to the antique mirror in the hallway?", [
        "There is an antique mirror in our hallway that came with the flat.",
        "The kids nicknamed the hallway mirror Madame Glass.",
        "Madame Glass cracked when the door slammed during the storm."]),
    ("place", "What does the hiking group eat after their trail walks?", [
        "I joined a hiking group that meets every Sunday.",
        "After each hike the group always stops at a diner called Birchwood.",
        "Birchwood serves enormous blueberry pancakes, the best in the county."]),
    ("topic", "How much did the school fundraiser raise?", [
        "The kids' school is holding a fundraiser for new library books.",
        "The fundraiser is a sponsored event the teachers named the Pancake Marathon.",
        "The Pancake Marathon brought in nearly six thousand dollars."]),
    ("person", "What does the personal trainer at the gym do on weekends?", [
        "I signed up for sessions with a personal trainer at the gym.",
        "My personal trainer is Marisol, she is tough but funny.",
        "Marisol spends Saturdays and Sundays racing sailboats on the bay."]),
    ("pet", "What trick did the cousin's rabbit learn?", [
        "My cousin bought a rabbit for her kids.",
        "The cousin's rabbit is a fluffy lop named Clementine.",
        "Clementine now hops through a hoop whenever she hears a bell."]),
]

# ------------------------------------------------------------------------------ never said
#: (question template, terms the conversation must never contain). ``{S}`` is a speaker.
NEVER_SAID: list[tuple[str, list[str]]] = [
    ("What is the name of {S}'s goldfish?", ["goldfish"]),
    ("Which motorcycle does {S} ride?", ["motorcycle", "motorbike"]),
    ("What is {S}'s blood type?", ["blood type"]),
    ("Where did {S} go scuba diving?", ["scuba", "diving", "dive"]),
    ("What is the name of {S}'s parrot?", ["parrot"]),
    ("Which saxophone does {S} play?", ["saxophone", "sax"]),
    ("What did {S} name the sailboat?", ["sailboat", "sailing"]),
    ("Which chess opening does {S} prefer?", ["chess"]),
    ("How many tattoos does {S} have?", ["tattoo", "tattoos"]),
    ("What is {S}'s favourite opera?", ["opera"]),
    ("What is the name of {S}'s tortoise?", ["tortoise", "turtle"]),
    ("Which accounting firm does {S} work for?", ["accounting", "accountant"]),
    ("What did {S} buy at the pawn shop?", ["pawn"]),
    ("Which allergy medication does {S} take?", ["allergy", "allergic"]),
    ("What is the name of {S}'s hamster?", ["hamster"]),
    ("Who is {S}'s violin teacher?", ["violin"]),
    ("What kind of drone does {S} fly?", ["drone"]),
    ("Where does {S} keep the kayak?", ["kayak"]),
]
NEVER_SAID_PER_CONVERSATION = 5

# ------------------------------------------------------------------------------ updates
#: (older turn, newer turn, question template with ``{S}``, the speaker of both turns).
UPDATES: list[tuple[str, str, str]] = [
    ("My commute is by bus, about forty minutes each way.",
     "I sold my bus pass, I cycle to work every day now.",
     "How does {S} get to work these days?"),
    ("My phone is an old Android that barely holds a charge.",
     "I replaced my old phone with an iPhone last week.",
     "What phone does {S} use now?"),
    ("I'm a vegetarian, have been for two years.",
     "I started eating fish again, so I'm pescatarian now.",
     "What is {S}'s diet now?"),
    ("My favourite coffee place is Bean There on Elm Street.",
     "Bean There closed, so my go-to coffee place is now Roast Republic.",
     "Which coffee place is {S}'s favourite now?"),
    ("I drive a silver Honda Civic.",
     "I traded in the Civic and now drive a blue Subaru Outback.",
     "What car does {S} drive now?"),
    ("I'm learning Spanish with an app every evening.",
     "I switched from Spanish to Japanese lessons this month.",
     "Which language is {S} studying now?"),
    ("My gym is IronWorks, two blocks from home.",
     "I cancelled IronWorks and joined Pulse Fitness downtown.",
     "Which gym does {S} go to now?"),
    ("I work night shifts at the hospital lab.",
     "I finally moved to day shifts at the lab.",
     "What shifts does {S} work now?"),
    ("Our team lead is Harriet, she is very strict.",
     "Harriet left, and our new team lead is Oskar.",
     "Who is {S}'s team lead now?"),
    ("I'm reading a thick biography of Lincoln.",
     "I put the Lincoln biography down and now I'm reading a sci-fi trilogy.",
     "What is {S} reading at the moment?"),
    ("My internet provider is Comlink, it is painfully slow.",
     "I switched internet providers to FiberNest and it is so much faster.",
     "Which internet provider does {S} have now?"),
    ("I play tennis every Tuesday with my coworkers.",
     "I gave up tennis and play badminton on Tuesdays instead.",
     "What sport does {S} play on Tuesdays now?"),
    ("My dentist is Dr. Alvarez on Main Street.",
     "I changed dentists, I see Dr. Okafor now.",
     "Who is {S}'s dentist now?"),
    ("I bank with First Harbor Credit Union.",
     "I moved my accounts from First Harbor to Greenleaf Bank.",
     "Which bank does {S} use now?"),
    ("My running goal this year is a 10K.",
     "I upgraded my running goal to a half marathon.",
     "What is {S}'s running goal now?"),
    ("I'm renting a studio apartment on Pine Avenue.",
     "I moved out of the Pine Avenue studio into a two-bedroom on Cedar Lane.",
     "Where does {S} live now?"),
    ("My weekend job is at a garden centre.",
     "I quit the garden centre and now work weekends at a bookshop.",
     "Where does {S} work on weekends now?"),
    ("My laptop is a five-year-old ThinkPad.",
     "The ThinkPad died, so I'm on a new MacBook Air now.",
     "Which laptop does {S} use now?"),
    ("I take my coffee black, no sugar.",
     "These days I take my coffee with oat milk.",
     "How does {S} take coffee now?"),
    ("My band practice is on Wednesday nights.",
     "Band practice moved from Wednesdays to Sunday afternoons.",
     "When is {S}'s band practice now?"),
    ("My mobile plan is with Telvo, twenty dollars a month.",
     "I changed my mobile plan to Skyline, it includes more data.",
     "Which mobile plan is {S} on now?"),
    ("Our book club meets at the library.",
     "Our book club moved its meetings from the library to a cafe on the square.",
     "Where does {S}'s book club meet now?"),
]


def _thirds(turn_ids: list[str]) -> list[list[str]]:
    n = len(turn_ids)
    return [turn_ids[: n // 3], turn_ids[n // 3: 2 * n // 3], turn_ids[2 * n // 3:]]


def generate(locomo: str | Path) -> dict[str, Any]:
    """The probe file's contents, placed in the conversations of ``locomo``."""
    from .locomo import load_locomo
    from .probes import validate_probes

    ds = load_locomo(locomo, conversations=list(CONVERSATIONS))
    convs = {c.sample_id: c for c in ds.conversations}
    rng = random.Random(SEED)
    groups: list[dict[str, Any]] = []

    def turn_ids(cid: str) -> list[str]:
        return [t.dia_id for t in convs[cid].turns]

    # -- identifiers (i): near-identical records, spread over conv-26
    cid = "conv-26"
    spk = convs[cid].speakers
    anchors = sorted(rng.sample(range(len(turn_ids(cid))), 30))
    inserts = []
    for n in range(1, N_RECORDS + 1):
        after = turn_ids(cid)[anchors[(n - 1) * len(anchors) // N_RECORDS]]
        inserts.append({"id": f"P:rec:{n:03d}", "after": after, "speaker": spk[n % 2],
                        "text": f"Test record {n}: the access code is heron{n}."})
    picks = sorted(rng.sample(range(1, N_RECORDS + 1), N_RECORD_PROBES))
    probes = []
    for j, n in enumerate(picks):
        question = (f"Which record has access code heron{n}?" if j % 2 == 0
                    else f"What is the access code of test record {n}?")
        probes.append({"id": f"ident-rec-{n:03d}", "kind": "identifier", "question": question,
                       "targets": [f"P:rec:{n:03d}"]})
    groups.append({"id": "identifier-records", "kind": "identifier", "conversation": cid,
                   "inserts": inserts, "probes": probes})

    # -- identifiers (ii): a score of turns with codes, over conv-30
    cid = "conv-30"
    spk = convs[cid].speakers
    points = sorted(rng.sample(turn_ids(cid), len(CODES)), key=turn_ids(cid).index)
    inserts, probes = [], []
    for j, ((text, question), after) in enumerate(zip(CODES, points)):
        tid = f"P:code:{j + 1:02d}"
        inserts.append({"id": tid, "after": after, "speaker": spk[j % 2], "text": text})
        probes.append({"id": f"ident-code-{j + 1:02d}", "kind": "identifier",
                       "question": question, "targets": [tid]})
    groups.append({"id": "identifier-codes", "kind": "identifier", "conversation": cid,
                   "inserts": inserts, "probes": probes})

    # -- bridges: round robin over the five conversations, one memory per conversation
    per_conv: dict[str, list[int]] = {c: [] for c in CONVERSATIONS}
    for j in range(len(BRIDGES)):
        per_conv[CONVERSATIONS[j % len(CONVERSATIONS)]].append(j)
    for cid, idx in per_conv.items():
        thirds = _thirds(turn_ids(cid))
        inserts, probes = [], []
        for j in idx:
            btype, question, texts = BRIDGES[j]
            speaker = convs[cid].speakers[rng.randrange(2)]
            ids = [f"P:br{j + 1:02d}:{part}" for part in ("subject", "bridge", "answer")]
            for tid, text, third in zip(ids, texts, thirds):
                inserts.append({"id": tid, "after": rng.choice(third), "speaker": speaker,
                                "text": text})
            probes.append({"id": f"bridge-{j + 1:02d}", "kind": "bridge",
                           "bridge_type": btype, "question": question, "targets": [ids[2]],
                           "chain": ids})
        groups.append({"id": f"bridge-{cid}", "kind": "bridge", "conversation": cid,
                       "inserts": _in_order(inserts, turn_ids(cid)), "probes": probes})

    # -- never said: questions about each conversation's speakers
    for cid in CONVERSATIONS:
        text = " ".join(t.text.lower() for t in convs[cid].turns)
        fitting = [(q, terms) for q, terms in NEVER_SAID
                   if not any(_has_term(text, term) for term in terms)]
        chosen = rng.sample(fitting, min(NEVER_SAID_PER_CONVERSATION, len(fitting)))
        probes = []
        for j, (template, terms) in enumerate(chosen):
            subject = convs[cid].speakers[j % 2]
            probes.append({"id": f"never-{cid}-{j + 1}", "kind": "never_said",
                           "question": template.format(S=subject), "targets": [],
                           "subject": subject, "absent_terms": terms})
        groups.append({"id": f"never_said-{cid}", "kind": "never_said", "conversation": cid,
                       "inserts": [], "probes": probes})

    # -- knowledge updates: older fact early, newer fact late
    per_conv = {c: [] for c in CONVERSATIONS}
    for j in range(len(UPDATES)):
        per_conv[CONVERSATIONS[j % len(CONVERSATIONS)]].append(j)
    for cid, idx in per_conv.items():
        thirds = _thirds(turn_ids(cid))
        inserts, probes = [], []
        for j in idx:
            older, newer, template = UPDATES[j]
            speaker = convs[cid].speakers[rng.randrange(2)]
            ids = [f"P:up{j + 1:02d}:older", f"P:up{j + 1:02d}:newer"]
            inserts.append({"id": ids[0], "after": rng.choice(thirds[0]), "speaker": speaker,
                            "text": older})
            inserts.append({"id": ids[1], "after": rng.choice(thirds[2]), "speaker": speaker,
                            "text": newer})
            probes.append({"id": f"update-{j + 1:02d}", "kind": "update",
                           "question": template.format(S=speaker), "targets": [ids[1]],
                           "older": ids[0], "newer": ids[1]})
        groups.append({"id": f"update-{cid}", "kind": "update", "conversation": cid,
                       "inserts": _in_order(inserts, turn_ids(cid)), "probes": probes})

    data = {
        "format": "synapse-probes",
        "version": VERSION,
        "source": "LoCoMo dev split (../shared/data/locomo/locomo_dev.json): "
                  + ", ".join(CONVERSATIONS),
        "generator": "python -m synapse_integrations.bench.probe_gen --locomo FILE --out FILE",
        "seed": SEED,
        "groups": groups,
    }
    validate_probes(data, ds)
    return data


def _has_term(text: str, term: str) -> bool:
    import re

    return re.search(rf"\b{re.escape(term.lower())}\b", text) is not None


def _in_order(inserts: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    pos = {d: i for i, d in enumerate(order)}
    return sorted(inserts, key=lambda t: pos[t["after"]])  # stable: same point keeps order


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", required=True, help="LoCoMo JSON holding the dev conversations")
    parser.add_argument("--out", required=True, help="where to write the probe JSON")
    args = parser.parse_args(argv)
    data = generate(args.locomo)
    Path(args.out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", "utf-8")
    counts: dict[str, int] = {}
    for g in data["groups"]:
        counts[g["kind"]] = counts.get(g["kind"], 0) + len(g["probes"])
    print(f"wrote {args.out}: {counts}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
