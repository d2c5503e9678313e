"""Every English word list and word pattern the engine reads, once each.

A word list here is a fact about English (or about the roles of a chat), not a setting:
the mechanisms import them by name, and a test checks that no other module of the
engine defines one at module level.
"""

from __future__ import annotations

import re

#: Speaker names taken as the user's / the assistant's when a turn's metadata has no role.
USER_SPEAKERS = frozenset({"user", "human"})
ASSISTANT_SPEAKERS = frozenset({"assistant", "ai"})


#: Words that frame a question rather than name what it asks about ("What *kind* of ...",
#: "Did Sam ever *mention* ...", "What is the *name* of ..."): left out of the attribute
#: terms, whose coverage the checks measure.
FRAME_WORDS = frozenset("""
kind type sort name named called mention mentioned mentions say said says tell told ever
recently currently now still lately anymore usually
""".split())

# --- the lexical index and the questions (core/text/tokens.py, and the signals and the
# gate that read a question) ---

#: English function words left out of the lexical index and the query terms
#: (core/text/tokens.py). In a small memory their IDF is high ("is" may occur in two turns
#: of six), so without this list "What is the name of Sam's dog?" matches "Sam is learning
#: the cello" on "is" and "the". Content words, numbers and names are kept, and so are
#: question words' answers (dates, places). Differs from :data:`EXTRACTOR_STOPWORDS`: it
#: has the pieces the tokenizer leaves of a contraction ("s", "ll", "don") and lacks the
#: extractor's quantifiers, whole contractions and chat forms.
INDEX_STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does doing done for from had has
have having he her here hers herself him himself his how i if in into is it its itself just
me my myself no nor not of off on once only or other our ours ourselves out over own same
she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves about above after again against
all am any because before below between both during each few further more most s t ll re ve
d m o y don isn wasn weren won aren didn doesn hasn haven
""".split())

#: A text in the first person (a question about the one asking it, a turn about its
#: speaker): a pattern, case-insensitive. Not the same words as
#: :data:`STATEMENT_FIRST_PERSON` (this one also has "me", "myself", "us"; no "we're",
#: "we've").
FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|us)\b", re.I)

#: Month names and their abbreviations ("january", "jan", "sept"): a number next to one is
#: a date, not a value (reconsolidation). The same words as the :data:`MONTH` pattern,
#: which is built from them.
MONTH_NAMES = frozenset("january february march april may june july august september october "
                        "november december jan feb mar apr jun jul aug sep sept oct nov dec".split())

#: A month's name or its abbreviation (a pattern, case-insensitive): :data:`MONTH_NAMES`,
#: the longer of two names that start alike tried first ("september" before "sept", "sep").
MONTH = "(?:" + "|".join(sorted(MONTH_NAMES, key=lambda w: (-len(w), w))) + ")"


# --- the offline extractor (core/ingest/extraction/offline.py) ---

#: Function words the offline extractor never takes as a concept or the start of a name.
#: Longer than :data:`INDEX_STOPWORDS`: quantifiers and indefinite pronouns ("everyone",
#: "several"), whole contractions ("i'm", "don't") and chat forms ("gonna", "dunno").
EXTRACTOR_STOPWORDS = frozenset(
    """
    a about above after again against ago all almost along already also although am among
    an and another any anybody anyone anything anyway anywhere are around as at away back
    be became because become been before being below besides between both but by can
    cannot could did do does doing done down during each either else enough etc even ever
    every everybody everyone everything everywhere few for from further had has have
    having he her here hers herself him himself his how however i if in instead into is
    it its itself just last least less lot lots many may me might mine more most much
    must my myself neither never next no nobody none nor not nothing now of off often on
    once one only onto or other others otherwise our ours ourselves out over own per
    perhaps quite rather really always same several shall she should since so some somebody
    someone something sometimes somewhat somewhere soon still such than that the their
    theirs them themselves then there these they thing things this those though through
    thus till to together too toward towards under until up upon us very via was we
    were what whatever when whenever where wherever whether which while who whoever
    whole whom whose why will with within without would yet you your yours yourself
    yourselves
    i'm i've i'll i'd it's it'll it'd that's that'll there's there'll here's what's
    what're what'll who's who'd who'll where's when's why's how's how're how'd how've
    let's he's he'd he'll she's she'd she'll we're we've we'll we'd you're you've you'll
    you'd they're they've they'll they'd isn't aren't wasn't weren't hasn't haven't
    hadn't doesn't don't didn't won't wouldn't shan't shouldn't can't couldn't mustn't
    mightn't needn't ain't must've could've would've should've might've y'all
    gonna gotta wanna kinda sorta lemme dunno
    """.split()
)

#: Chat discourse: greetings, interjections, evaluations, politeness, hedges. Never
#: concepts and never the start of a name ("Wow Caroline" -> "Caroline"). Differs from
#: :data:`FILLER_WORDS` (the surprisal gate's list, a different one).
CHATTER = frozenset(
    """
    hey hi hello hiya yo bye goodbye cya cheers thanks thank thx ty congrats
    congratulations please sorry welcome wow woah whoa woohoo yay yeah yep yup yes yah
    nope nah no ok okay oh ooh ohh ah aah aw aww awww hmm hm huh haha hahaha hehe lol
    lmao omg btw tbh imo idk fyi ugh oops oof yikes phew meh wait well sure indeed
    absolutely definitely totally exactly certainly clearly truly honestly seriously
    actually basically literally obviously probably possibly maybe hopefully luckily
    thankfully unfortunately fortunately apparently especially generally usually
    normally recently lately finally eventually anyways besides plus also though
    great good nice cool awesome amazing wonderful fantastic incredible terrific
    excellent brilliant superb lovely sweet neat fab fabulous epic stunning gorgeous
    beautiful cute adorable perfect fun funny crazy wild insane tough hard rough sad
    happy glad excited exciting thrilled proud lucky blessed grateful thankful
    appreciate appreciated appreciative anytime impressive impressed inspiring inspired
    inspiration super pretty real true agreed agree right wrong bad worse worst best
    better sounds sound seems seem looks look looking feels feel feeling keep stay
    take talk chat catch hope hoping wish wishing guess bet believe remember imagine
    love loving loved adore adores adored like liked enjoy enjoyed tell told let see seeing
    saw
    """.split()
)

#: Generic content words: poor concepts on their own (common verbs in all their forms,
#: vague nouns, quantities, common adjectives). A capitalised one at the start of a
#: sentence is not a name; inside a multiword capitalised run ("Little Women") it is kept.
#: The extractor's; :data:`GENERIC_STATEMENT_WORDS` is reconsolidation's, a different list.
GENERIC_CONCEPT_WORDS = frozenset(
    """
    thing stuff lot lots bit kind sort type way part piece side place point idea ideas
    reason question answer fact case matter deal issue problem chance example sense end
    start beginning rest time times while people person guy guys folks man woman men
    women difference world word words worth key note luck step pic pics favorite
    favourite fave fav cause shot ton tons bunch couple dozen half plenty
    new old big small little large huge tiny long short high low full empty easy
    difficult important different similar special whole main major simple certain sure
    own free busy ready able likely other another such close closer far later young
    alone alive alright safe strong forward glad keen
    first second third fourth fifth last next previous final one two three four five six
    seven eight nine ten eleven twelve twenty thirty hundred thousand million billion
    single double
    get gets got getting gotten go goes going gone went come comes came coming make makes
    made making do does did doing done have has had having take takes took taken taking
    give gives gave given giving put puts putting keep keeps kept keeping find finds
    found finding think thinks thought thinking know knows knew known knowing want wants
    wanted wanting need needs needed needing try tries tried trying use uses used using
    say says said saying mean means meant show shows showed shown showing call calls
    called calling ask asks asked asking seem seems seemed feel feels felt feeling start
    starts started starting begin began begun help helps helped helping happen happens
    happened happening change changes changed changing share shares shared sharing spend
    spends spent spending live lives lived hear hears heard hearing leave leaves left
    leaving bring brings brought bringing hold holds held holding turn turns turned
    turning move moves moved moving reach reaches reached reaching become becomes
    becoming lose loses losing lost win wins won let lets letting stay stays stayed
    staying tell tells told telling talk talks talked talking chat chats chatted
    chatting look looks looked looking see sees saw seen seeing watch watches watched
    check checks checked checking create creates creating connect connects connecting
    explore explores exploring remind reminds reminded reminding wonder wondering plan
    plans planned planning decide decides decided care cares cared stop stops stopped
    continue continues continued continuing realize realise realized realizing
    understand understands understood understanding forget forgets forgot forgotten
    remember remembers remembered believe believes believing hope hopes hoped hoping
    push pushes pushed pushing pay pays paid paying meet meets met join joins
    joined joining add adds added adding hang hangs hanging handle handles handled
    hit hits hitting build builds built spread spreads capture captures
    captured teach teaches taught tackle tackles tackled manage manages managed
    managing speak speaks spoke spoken speaking express expresses expressed expressing
    motivate motivates motivated motivating inspire inspires inspired inspiring improve
    improves improved improving supported supporting accept accepts
    accepted accepting recommend recommends recommended quit quits offered
    stand stands stood standing enjoy enjoys enjoying cherish cherishes cherished
    cherishing boost boosts boosted mix mixed drove smile smiles smiled
    relax relaxes relaxed worry worries worried worrying doubt doubts act acts visited
    work works worked working learn learns learned learnt grow grows grew grown growing
    play plays played playing read reads write writes wrote written run runs ran win wins
    winning live living watched watching
    interesting rewarding fulfilling challenging encouraging refreshing satisfying
    uplifting calming relaxing amazing exciting touching heartwarming overwhelming
    fascinating intriguing exhausting frustrating annoying boring charming stunning
    breathtaking thrilling soothing comforting reassuring promising surprising
    disappointing depressing terrifying devastating passionate magical fortunate
    """.split()
)

#: Date and time words: dates are not concepts (nor are numbers). Holds every word of
#: :data:`MONTH_NAMES`, and days, their abbreviations and units of time besides.
DATE_WORDS = frozenset(
    """
    january february march april may june july august september october november
    december jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday
    thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
    today tonight tomorrow yesterday morning afternoon evening night midnight noon
    day days week weeks weekend weekends month months year years decade decades
    hour hours minute minutes second seconds moment ago lately recently soon
    """.split()
)

#: Words that open many names ("New York", "Little Women") even at the start of a sentence.
NAME_OPENERS = frozenset(
    """
    new old little great grand big north south east west upper lower central united
    royal golden red blue black white green san santa saint fort mount lake
    """.split()
)

#: Lowercase words that may sit inside a multiword name ("Statue of Liberty", "Lord of the
#: Rings").
NAME_CONNECTORS = frozenset({"of", "the", "de", "da", "del", "der", "van", "von", "du", "la", "le"})

#: Honorifics written with a period that does not end the sentence ("Dr. Seuss"), as
#: written (capitalised, without the period).
NAME_TITLES = ("Dr", "Mr", "Mrs", "Ms", "Mx", "Prof", "St", "Mt", "Jr", "Sr", "Capt", "Rev")

#: Plural forms the offline extractor's simple singularisation rule must leave alone.
KEEP_PLURAL = frozenset(
    """
    news series species clothes jeans pants shorts glasses scissors physics mathematics
    politics economics electronics gymnastics athletics aerobics lens gas bus yes always
    perhaps sometimes christmas thanks congrats whereas analysis basis crisis thesis
    diabetes trans
    """.split()
)

#: Words whose plural is "-ies" but whose singular ends in "-ie", not "-y".
IE_WORDS = frozenset(
    """
    movie cookie selfie zombie rookie calorie brownie smoothie hoodie veggie goalie pie
    tie lie genie newbie indie aussie foodie techie sweetie bookie collie prairie
    """.split()
)

#: Nouns with an adjective-like ending ("-ive", "-able"), kept as topics.
SUFFIX_NOUNS = frozenset(
    """
    perspective initiative detective archive narrative incentive executive alternative
    objective relative explosive adjective motive native representative vegetable
    timetable constable cable interest forest contest harvest request protest conquest
    manifest everest
    """.split()
)

#: Words ending in "-ly" that are nouns, not adverbs.
LY_NOUNS = frozenset(
    """
    family assembly butterfly anomaly italy july supply reply rally belly jelly bully
    holly lily ally fly monopoly melancholy dragonfly firefly
    """.split()
)

#: Endings that mark an English adjective ("careful", "famous", "creative"): such a word
#: is no concept unless it is one of :data:`SUFFIX_NOUNS`.
ADJECTIVE_ENDINGS = ("ful", "ous", "less", "ive", "able", "ible", "est")


#: The offline extractor's derived sets: what is never a concept, what never starts a name.
NOT_CONCEPT = EXTRACTOR_STOPWORDS | CHATTER | GENERIC_CONCEPT_WORDS | DATE_WORDS
NOT_NAME_START = EXTRACTOR_STOPWORDS | CHATTER | DATE_WORDS


# --- statements and what changes them (core/lifecycle/reconsolidation.py) ---

#: Number words, multiplicatives and ordinals as the value they state ("three", "twice",
#: "third" -> "3"): a statement's values (core/lifecycle/reconsolidation.py).
NUMBER_WORDS = {
    "single": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "fifteen": "15", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50",
    "hundred": "100", "twice": "2", "thrice": "3", "second": "2", "third": "3",
    "fourth": "4", "fifth": "5", "sixth": "6", "seventh": "7", "eighth": "8", "ninth": "9",
    "tenth": "10", "dozen": "12", "couple": "2",
}

#: Words that make a sentence a first-person statement, left out of its content words
#: (reconsolidation). Not the same words as the :data:`FIRST_PERSON` pattern (no "me",
#: "myself", "us"; with "we're", "we've").
STATEMENT_FIRST_PERSON = frozenset({"i", "my", "mine", "we", "our", "i'm", "i've", "i'd",
                                    "i'll", "we're", "we've"})

#: A sentence that addresses the listener ("I want you to write 60 characters") is a
#: request, not a fact about the speaker.
ADDRESSEE_WORDS = frozenset({"you", "your", "you're", "you've", "yourself", "please"})

#: A sentence with one of these ("three weeks ago") is anchored to one moment: it tells of
#: an event, not of an attribute that a later value replaces.
MOMENT_WORDS = frozenset({"ago", "yesterday", "tomorrow", "tonight"})

#: ... and so is one with one of these right before a :data:`PERIOD_WORDS` word ("last
#: weekend", "next Monday").
DEICTIC_WORDS = frozenset({"last", "next", "this"})

#: Periods that a :data:`DEICTIC_WORDS` word anchors to one moment ("last weekend", "this
#: summer").
PERIOD_WORDS = frozenset("""week weekend month year night morning evening summer winter spring fall
monday tuesday wednesday thursday friday saturday sunday""".split())

#: Verbs that say an attribute changed: such a sentence supersedes an earlier one about the
#: same thing even without a number ("I switched providers to FiberNest").
CHANGE_VERBS = frozenset("""moved switched changed quit replaced upgraded swapped
transferred relocated""".split())

#: Words of one attribute, read as that attribute ("I live in Boston" / "I moved to
#: Denver": both about where one lives).
ATTRIBUTE_WORDS: dict[str, str] = {
    **dict.fromkeys("live lives living lived moved move relocated apartment flat house home "
                    "rent renting".split(), "@home"),
    **dict.fromkeys("job jobs employer hired employed".split(), "@job"),
}

#: First-person subjects a :data:`CHANGE_VERBS` verb must follow to say the speaker
#: changed something ("I moved", "we've just switched").
CHANGE_SUBJECTS = frozenset({"i", "we", "i've", "we've", "i'd", "we'd"})

#: Verbs of moving: about where one lives only when they say where (a
#: :data:`MOVE_DIRECTIONS` word follows: "moved to", "moved out"), not in "I moved the
#: meeting".
MOVE_VERBS = frozenset({"moved", "move", "relocated"})

#: Words after a :data:`MOVE_VERBS` verb that make it a move of home.
MOVE_DIRECTIONS = frozenset({"to", "into", "back", "out", "in", "here", "there", "away", "abroad",
                             "from"})

#: A sentence that opens with one of these verbs ("Give me chapter 2") is a request, not a
#: fact about the speaker.
REQUEST_VERBS = frozenset("""give write provide suggest tell list make create explain show help
summarize summarise rewrite generate find recommend describe send let translate add""".split())

#: Words too common in chat to say what a statement is about ("by the way", "I think"):
#: reconsolidation's; not :data:`GENERIC_CONCEPT_WORDS` (the extractor's, a different list).
GENERIC_STATEMENT_WORDS = frozenset("""way really actually also think just usually around oh lot pretty
still now well get got go goes going see like thing things make sure need want know feel
thinking planning trying try last next new good great much many able bit kind far interested
looking curious wondering""".split())

#: A sentence with one of these is a plan, a wish or a guess ("I want to watch 1 episode
#: daily", "I'm thinking of adding 2 sessions a week", "maybe 2-3 hours"): it states no
#: value that holds, so it neither replaces nor is replaced (reconsolidation).
PLAN_WORDS = frozenset("""want wants wanted wanna planning thinking considering
hope hoping maybe might could would should wish""".split())

#: ... and so is one with one of these word pairs ("I'll try to dedicate a few hours"). Not
#: "plan": it is also a noun ("I changed my mobile plan to Skyline").
PLAN_PHRASES = frozenset({("try", "to"), ("trying", "to"), ("going", "to")})

#: A number before one of these is a time of day, not a value.
CLOCK_WORDS = frozenset({"am", "pm", "a.m", "p.m", "o'clock"})

#: A query holding one of these is about what was asked ("What did I ask you about
#: Lisbon?"), so a turn's question is what it wants (core/signals/asks.py).
ASKING_WORDS = frozenset("""ask asked asking asks question questions wonder wondered wondering
inquire inquired inquiry request requested""".split())

#: Words that open a real question (a sentence ending in "?" that starts otherwise,
#: "remember when I got pre-approved for $400,000?", still states something).
QUESTION_OPENERS = frozenset("""what how when where who whom whose why which do does did can
could would will is are was were should shall have has had any may might am isn't aren't
don't doesn't didn't won't wouldn't couldn't""".split())


# --- filler (core/lifecycle/surprisal.py) ---

#: Words that carry no content on their own: a turn made only of them is filler (the
#: surprisal gate, core/lifecycle/surprisal.py). Differs from :data:`CHATTER` (the
#: extractor's, far longer), which lacks some of these ("k", "np", "uh", "um", "noted").
FILLER_WORDS = frozenset("""
ok okay k thanks thank thx ty great sounds sound good sure yes yeah yep yup cool nice got it
perfect awesome lol haha hahaha alright right hi hey hello bye goodbye welcome np wow agreed
fine exactly indeed absolutely totally true sweet hmm hm oh ah uh um well glad appreciate
lot much definitely course noted will see later soon bet love
""".split())


# --- affect (core/models/mnemos.py) ---

#: Words of urgency: they raise a turn's arousal (mnemos' affect tagger,
#: core/models/mnemos.py).
URGENT_WORDS = frozenset("""urgent urgently asap immediately emergency now hurry quick quickly
    critical crisis broken crash crashed crashing down outage fail failed failing failure
    panic help deadline alarm alert danger dangerous""".split())

#: Subordinating and linking words: each raises a turn's complexity (mnemos' affect
#: tagger).
SUBORDINATORS = frozenset("""because although though however whereas therefore unless
    while whether which since if moreover furthermore consequently""".split())


# --- question and sentence cues (core/signals, core/retrieval/gate.py, core/lifecycle/sleep.py) ---

#: Words that ask about an earlier state ("before", "used to"): the question's tense is
#: past (version ranking, core/signals/versions.py).
PAST_CUES = re.compile(r"\b(before|previous(ly)?|used to|originally|at first|formerly|initially|"
                       r"earlier|prior|first time|back then|had been)\b", re.I)

#: Words that ask about the present state ("now", "currently"): the question's tense is
#: current (version ranking, core/signals/versions.py).
CURRENT_CUES = re.compile(r"\b(now|currently|current|latest|still|most recent|these days|"
                          r"anymore|today|at the moment|so far|up to date|recent)\b", re.I)

#: "you" and a verb in the past: the question recalls what the assistant said or did ("the
#: two companies you mentioned", "the phone number you provided me", "what you told me").
YOU_SAID = re.compile(r"\byou\s+(?:\w+ly\s+)?(?:\w+ed|said|told|gave|wrote|made|sent|showed|"
                      r"brought|came up with|found|put|taught|chose|drew|did)\b", re.I)

#: The second person: a turn addressed to someone (the gate's attribution check,
#: core/retrieval/gate.py).
SECOND_PERSON = re.compile(r"\b(you|you're|you've|you'd|you'll|your|yours|yourself)\b", re.I)

#: A sentence in the first person, a prefix "i'" included (sleep's facts,
#: core/lifecycle/sleep.py). Not :data:`FIRST_PERSON` (no "i'm" as a word, no "myself").
FACT_FIRST_PERSON = re.compile(r"\b(i|my|me|mine|we|our|us)\b|\bi'", re.I)


# --- relative dates in a question (core/text/relative_dates.py) ---

#: Counts said without a number ("a week ago", "a few months ago"); numbers and number
#: words are :data:`NUMBER_WORDS`.
VAGUE_COUNTS = {"a": 1, "an": 1, "one": 1, "a few": 3, "few": 3, "several": 3, "a couple of": 2}

#: Units of time a relative date counts in, each in days (a month and a year on average).
TIME_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}

#: Words that put a unit or a weekday just before now ("last week", "past three months").
LAST_WORDS = ("last", "past")
