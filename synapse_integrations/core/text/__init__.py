"""What a turn's text is: tokens, the word lists, the documents the indexes read."""
