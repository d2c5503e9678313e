"""Every English word list and word pattern the engine reads, once each.

A word list here is a fact about English (or about the roles of a chat), not a setting:
the mechanisms import them by name, and a test checks that no other module of the
engine defines one at module level.
"""

from __future__ import annotations

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
