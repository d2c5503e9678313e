"""Word lists of the offline extractor (compact and built in: no downloads).

Data only: the frozensets and tuples :mod:`.offline` reads.
"""

from __future__ import annotations

__all__ = [
    "ADJECTIVE_ENDINGS",
    "CHATTER",
    "CONNECTORS",
    "DATE_WORDS",
    "GENERIC",
    "IE_WORDS",
    "KEEP_PLURAL",
    "LY_NOUNS",
    "NAME_OPENERS",
    "NOT_CONCEPT",
    "NOT_NAME_START",
    "STOPWORDS",
    "SUFFIX_NOUNS",
    "TITLES",
]

#: Function words: never concepts, never the start of a name.
STOPWORDS = frozenset(
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
#: concepts and never the start of a name ("Wow Caroline" -> "Caroline").
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
GENERIC = frozenset(
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

#: Date and time words: dates are not concepts (nor are numbers).
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

#: Lowercase words that may sit inside a multiword name ("Statue of Liberty", "Lord of the Rings").
CONNECTORS = frozenset({"of", "the", "de", "da", "del", "der", "van", "von", "du", "la", "le"})

#: Honorifics written with a period that does not end the sentence ("Dr. Seuss").
TITLES = ("Dr", "Mr", "Mrs", "Ms", "Mx", "Prof", "St", "Mt", "Jr", "Sr", "Capt", "Rev")

#: Plural forms the simple singularisation rule must leave alone.
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

ADJECTIVE_ENDINGS = ("ful", "ous", "less", "ive", "able", "ible", "est")
NOT_CONCEPT = STOPWORDS | CHATTER | GENERIC | DATE_WORDS
NOT_NAME_START = STOPWORDS | CHATTER | DATE_WORDS
